//! Kubeconfig files for the dev cluster, and clients built from them.

use std::path::Path;

use base64::Engine;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::error::{Error, Result};

/// The context, cluster and user name in every kubeconfig we write.
pub const CONTEXT: &str = "loop-plugins-dev";

/// Writes a kubeconfig for `server`, trusting `ca_pem`, authenticating with `token`.
pub fn write(path: &Path, server: &str, ca_pem: &str, user: &str, token: &str) -> Result<()> {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": CONTEXT, "cluster": { "server": server, "certificate-authority-data": ca } }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": CONTEXT, "context": { "cluster": CONTEXT, "user": user } }],
        "current-context": CONTEXT,
    });
    let text = serde_json::to_string_pretty(&config).expect("a kubeconfig serializes");
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io("creating the kubeconfig's folder", dir))?;
    }
    std::fs::write(path, text).map_err(Error::io("writing a kubeconfig", path))
}

/// The client configuration a kubeconfig file describes.
pub async fn load_config(path: &Path) -> Result<Config> {
    let fail = |message: String| Error::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| fail(e.to_string()))
}

/// A client from a kubeconfig file.
pub async fn client(path: &Path) -> Result<Client> {
    let config = load_config(path).await?;
    Client::try_from(config).map_err(Error::kube(format!("a client from {}", path.display())))
}

/// The same cluster as `config`, authenticating with a bearer token instead.
pub fn with_token(config: &Config, token: &str) -> Config {
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    config
}
