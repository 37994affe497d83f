//! In-cluster configuration for container processes.
//!
//! A real kubelet mounts the ServiceAccount's projected volume (token, `ca.crt`, `namespace`)
//! at `/var/run/secrets/kubernetes.io/serviceaccount`, and client libraries (client-go, kube-rs)
//! read those fixed paths together with `KUBERNETES_SERVICE_HOST`/`_PORT`. Processes here share
//! the machine's filesystem, so that path cannot be each Pod's own. Instead the stand-in writes
//! a kubeconfig that names the same files in the folder playing the volume, the token as
//! `tokenFile` (read again as it changes, as in-cluster clients do), and points `KUBECONFIG` at
//! it. Clients try `KUBECONFIG` before in-cluster config, so the process authenticates as the
//! Pod's ServiceAccount, against the same API server, with the same CA, in the Pod's namespace.

use std::path::{Path, PathBuf};

use super::env::Mounts;

/// Where Pods find their ServiceAccount's credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The kubeconfig's name for its cluster, user and context.
const NAME: &str = "in-cluster";

/// The folder that plays the container's ServiceAccount mount, if it has one.
pub fn account_folder(mounts: &Mounts) -> Option<&Path> {
    mounts
        .iter()
        .find(|(path, _)| path.trim_end_matches('/') == SERVICE_ACCOUNT_DIR)
        .map(|(_, folder)| folder.as_path())
}

/// A kubeconfig (JSON, which is YAML too) for `server` with the credentials in `folder`: its
/// `token` and `ca.crt`, and `namespace` as the default namespace.
pub fn kubeconfig(server: &str, folder: &Path, namespace: &str) -> String {
    let file = |name: &str| folder.join(name).to_string_lossy().into_owned();
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": NAME, "cluster": {
            "server": server,
            "certificate-authority": file("ca.crt"),
        }}],
        "users": [{ "name": NAME, "user": { "tokenFile": file("token") } }],
        "contexts": [{ "name": NAME, "context": {
            "cluster": NAME,
            "user": NAME,
            "namespace": namespace,
        }}],
        "current-context": NAME,
    });
    serde_json::to_string_pretty(&config).expect("a kubeconfig serializes")
}

/// Writes [`kubeconfig`] as `<home>/.kube/config` (where clients look when `KUBECONFIG` is
/// unset, too) and returns its path, for `KUBECONFIG`.
pub fn write(
    home: &Path,
    server: &str,
    folder: &Path,
    namespace: &str,
) -> std::io::Result<PathBuf> {
    let path = home.join(".kube").join("config");
    std::fs::create_dir_all(home.join(".kube"))?;
    std::fs::write(&path, kubeconfig(server, folder, namespace))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_account_mount_is_found_by_its_path() {
        let mounts: Mounts = vec![
            ("/data".into(), PathBuf::from("/run/pod/data")),
            (
                format!("{SERVICE_ACCOUNT_DIR}/"),
                PathBuf::from("/run/pod/kube-api-access"),
            ),
        ];
        assert_eq!(
            account_folder(&mounts),
            Some(Path::new("/run/pod/kube-api-access"))
        );
        assert_eq!(account_folder(&mounts[..1].to_vec()), None);
    }

    #[test]
    fn the_kubeconfig_names_the_volumes_files() {
        let text = kubeconfig(
            "https://127.0.0.1:6443",
            Path::new("/run/pod/kube-api-access"),
            "team-a",
        );
        let config: kube::config::Kubeconfig = serde_json::from_str(&text).unwrap();
        let cluster = config.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/run/pod/kube-api-access/ca.crt")
        );
        let user = config.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(
            user.token_file.as_deref(),
            Some("/run/pod/kube-api-access/token")
        );
        let context = config.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some("team-a"));
        assert_eq!(config.current_context.as_deref(), Some(NAME));
    }

    #[test]
    fn the_kubeconfig_is_written_in_home() {
        let home = std::env::temp_dir().join(format!("incluster-{}", std::process::id()));
        let path = write(&home, "https://127.0.0.1:1", Path::new("/sa"), "ns").unwrap();
        assert_eq!(path, home.join(".kube/config"));
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .contains("/sa/token")
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
