//! A Pod's volumes as folders: Secrets, ConfigMaps, the downward API and service-account tokens
//! written as files; emptyDirs fresh per Pod; a PersistentVolumeClaim's folder kept per claim.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, DownwardAPIVolumeFile, KeyToPath, PersistentVolumeClaim, Pod, Secret,
    ServiceAccount, Volume,
};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};

use super::env::{Data, Mounts, PodFacts, Sources};

/// Why a volume (or an env source) is not ready.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A Secret, ConfigMap or claim the Pod needs (or a key of it) does not exist yet.
    #[error("{kind} {name:?}{} not found", key.as_ref().map(|k| format!(" key {k:?}")).unwrap_or_default())]
    Missing {
        kind: &'static str,
        name: String,
        key: Option<String>,
    },
    /// A volume this stand-in cannot play.
    #[error("volume {volume:?}: {reason}")]
    Unsupported { volume: String, reason: String },
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
}

/// Reads the Secrets, ConfigMaps and claims of one namespace.
#[derive(Clone)]
pub struct Fetcher {
    client: Client,
    namespace: String,
}

impl Fetcher {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
        }
    }

    /// A Secret's keys as bytes, None when it does not exist.
    pub async fn secret(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = api
            .get_opt(name)
            .await
            .map_err(kube_error("reading a Secret"))?;
        Ok(secret.map(|s| {
            let mut data: BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            for (k, v) in s.string_data.unwrap_or_default() {
                data.insert(k, v.into_bytes());
            }
            data
        }))
    }

    /// A ConfigMap's keys as bytes, None when it does not exist.
    pub async fn config_map(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, VolumeError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let map = api
            .get_opt(name)
            .await
            .map_err(kube_error("reading a ConfigMap"))?;
        Ok(map.map(|m| {
            let mut data: BTreeMap<String, Vec<u8>> = m
                .binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            for (k, v) in m.data.unwrap_or_default() {
                data.insert(k, v.into_bytes());
            }
            data
        }))
    }

    /// Every Secret and ConfigMap the containers' env and envFrom name (those that exist).
    pub async fn env_sources(&self, containers: &[&Container]) -> Result<Sources, VolumeError> {
        let mut secrets = Vec::new();
        let mut config_maps = Vec::new();
        for c in containers {
            for from in c.env_from.iter().flatten() {
                secrets.extend(from.secret_ref.as_ref().map(|r| r.name.clone()));
                config_maps.extend(from.config_map_ref.as_ref().map(|r| r.name.clone()));
            }
            for var in c.env.iter().flatten() {
                let Some(from) = &var.value_from else {
                    continue;
                };
                secrets.extend(from.secret_key_ref.as_ref().map(|r| r.name.clone()));
                config_maps.extend(from.config_map_key_ref.as_ref().map(|r| r.name.clone()));
            }
        }
        let text = |data: BTreeMap<String, Vec<u8>>| -> Data {
            data.into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect()
        };
        let mut sources = Sources::default();
        for name in secrets {
            if let Some(data) = self.secret(&name).await? {
                sources.secrets.insert(name, text(data));
            }
        }
        for name in config_maps {
            if let Some(data) = self.config_map(&name).await? {
                sources.config_maps.insert(name, text(data));
            }
        }
        Ok(sources)
    }
}

/// Where the Pod's volumes live: name → folder.
pub type VolumeDirs = BTreeMap<String, PathBuf>;

/// The folder of a claim's volume: `<claims>/pvc-<claim uid>`, as a provisioner would name it.
pub fn claim_dir(claims: &Path, claim_uid: &str) -> PathBuf {
    claims.join(format!("pvc-{claim_uid}"))
}

/// Writes every volume of `pod` under `pod_dir/volumes`, PVCs under `claims`.
pub async fn prepare(
    fetcher: &Fetcher,
    pod: &Pod,
    facts: &PodFacts,
    pod_dir: &Path,
    claims: &Path,
) -> Result<VolumeDirs, VolumeError> {
    let mut dirs = VolumeDirs::new();
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    for volume in &volumes {
        let dir = pod_dir.join("volumes").join(&volume.name);
        let dir = prepare_one(fetcher, pod, facts, volume, dir, claims).await?;
        dirs.insert(volume.name.clone(), dir);
    }
    Ok(dirs)
}

async fn prepare_one(
    fetcher: &Fetcher,
    pod: &Pod,
    facts: &PodFacts,
    volume: &Volume,
    dir: PathBuf,
    claims: &Path,
) -> Result<PathBuf, VolumeError> {
    if volume.empty_dir.is_some() {
        create_dir(&dir)?;
        return Ok(dir);
    }
    if let Some(host) = &volume.host_path {
        let path = PathBuf::from(&host.path);
        create_dir(&path)?;
        return Ok(path);
    }
    if let Some(claim) = &volume.persistent_volume_claim {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(fetcher.client.clone(), &fetcher.namespace);
        let pvc = api
            .get_opt(&claim.claim_name)
            .await
            .map_err(kube_error("reading a PersistentVolumeClaim"))?
            .ok_or_else(|| VolumeError::Missing {
                kind: "PersistentVolumeClaim",
                name: claim.claim_name.clone(),
                key: None,
            })?;
        let path = claim_dir(claims, &pvc.uid().unwrap_or_default());
        create_dir(&path)?;
        return Ok(path);
    }
    // The rest are files written fresh for each Pod.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io_error(&dir))?;
    }
    create_dir(&dir)?;
    if let Some(secret) = &volume.secret {
        let name = secret.secret_name.clone().unwrap_or_default();
        match fetcher.secret(&name).await? {
            Some(data) => write_keys(
                &dir,
                &data,
                secret.items.as_deref(),
                secret.optional,
                ("Secret", &name),
            )?,
            None if secret.optional == Some(true) => {}
            None => return Err(missing("Secret", &name, None)),
        }
    } else if let Some(map) = &volume.config_map {
        match fetcher.config_map(&map.name).await? {
            Some(data) => write_keys(
                &dir,
                &data,
                map.items.as_deref(),
                map.optional,
                ("ConfigMap", &map.name),
            )?,
            None if map.optional == Some(true) => {}
            None => return Err(missing("ConfigMap", &map.name, None)),
        }
    } else if let Some(downward) = &volume.downward_api {
        write_downward(&dir, facts, downward.items.as_deref().unwrap_or_default())?;
    } else if let Some(projected) = &volume.projected {
        for source in projected.sources.iter().flatten() {
            if let Some(secret) = &source.secret {
                match fetcher.secret(&secret.name).await? {
                    Some(data) => write_keys(
                        &dir,
                        &data,
                        secret.items.as_deref(),
                        secret.optional,
                        ("Secret", &secret.name),
                    )?,
                    None if secret.optional == Some(true) => {}
                    None => return Err(missing("Secret", &secret.name, None)),
                }
            } else if let Some(map) = &source.config_map {
                match fetcher.config_map(&map.name).await? {
                    Some(data) => write_keys(
                        &dir,
                        &data,
                        map.items.as_deref(),
                        map.optional,
                        ("ConfigMap", &map.name),
                    )?,
                    None if map.optional == Some(true) => {}
                    None => return Err(missing("ConfigMap", &map.name, None)),
                }
            } else if let Some(downward) = &source.downward_api {
                write_downward(&dir, facts, downward.items.as_deref().unwrap_or_default())?;
            } else if let Some(token) = &source.service_account_token {
                let jwt = request_token(
                    fetcher,
                    pod,
                    token.audience.clone(),
                    token.expiration_seconds,
                )
                .await?;
                write_file(&dir.join(&token.path), jwt.as_bytes())?;
            } else {
                return Err(unsupported(
                    volume,
                    "a projected source other than secret, configMap, downwardAPI or serviceAccountToken",
                ));
            }
        }
    } else {
        return Err(unsupported(
            volume,
            "only emptyDir, hostPath, persistentVolumeClaim, secret, configMap, downwardAPI and projected are played here",
        ));
    }
    Ok(dir)
}

/// The folders each of a container's volume mounts plays: (mountPath, folder incl. subPath).
pub fn mounts(container: &Container, dirs: &VolumeDirs) -> Result<Mounts, VolumeError> {
    let mut mounts = Mounts::new();
    for mount in container.volume_mounts.iter().flatten() {
        let dir = dirs
            .get(&mount.name)
            .ok_or_else(|| VolumeError::Unsupported {
                volume: mount.name.clone(),
                reason: format!(
                    "container {:?} mounts a volume the Pod does not have",
                    container.name
                ),
            })?;
        let dir = match mount.sub_path.as_deref() {
            Some(sub) if !sub.is_empty() => {
                let dir = dir.join(sub);
                create_dir(&dir)?;
                dir
            }
            _ => dir.clone(),
        };
        mounts.push((mount.mount_path.clone(), dir));
    }
    Ok(mounts)
}

async fn request_token(
    fetcher: &Fetcher,
    pod: &Pod,
    audience: Option<String>,
    expiration_seconds: Option<i64>,
) -> Result<String, VolumeError> {
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let api: Api<ServiceAccount> = Api::namespaced(fetcher.client.clone(), &fetcher.namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: audience.map(|a| vec![a]),
            expiration_seconds,
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(pod.name_any()),
                uid: pod.uid(),
            }),
        }),
        ..Default::default()
    };
    let answer = api
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(kube_error("requesting a service-account token"))?;
    Ok(answer.status.and_then(|s| s.token).unwrap_or_default())
}

/// Writes the keys (or the items) as files; a missing item key is an error unless optional.
fn write_keys(
    dir: &Path,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    (kind, name): (&'static str, &str),
) -> Result<(), VolumeError> {
    match items {
        Some(items) => {
            for item in items {
                match data.get(&item.key) {
                    Some(bytes) => write_file(&dir.join(&item.path), bytes)?,
                    None if optional == Some(true) => {}
                    None => return Err(missing(kind, name, Some(item.key.clone()))),
                }
            }
        }
        None => {
            for (key, bytes) in data {
                write_file(&dir.join(key), bytes)?;
            }
        }
    }
    Ok(())
}

fn missing(kind: &'static str, name: &str, key: Option<String>) -> VolumeError {
    VolumeError::Missing {
        kind,
        name: name.to_string(),
        key,
    }
}

fn write_downward(
    dir: &Path,
    facts: &PodFacts,
    items: &[DownwardAPIVolumeFile],
) -> Result<(), VolumeError> {
    for item in items {
        let value = match &item.field_ref {
            Some(field) => facts.field(&field.field_path).unwrap_or_default(),
            // No limits are enforced here: a resourceFieldRef has nothing true to say.
            None => String::new(),
        };
        write_file(&dir.join(&item.path), value.as_bytes())?;
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), VolumeError> {
    if let Some(parent) = path.parent() {
        create_dir(parent)?;
    }
    std::fs::write(path, bytes).map_err(io_error(path))
}

fn create_dir(path: &Path) -> Result<(), VolumeError> {
    std::fs::create_dir_all(path).map_err(io_error(path))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError {
    let path = path.to_path_buf();
    move |source| VolumeError::Io { path, source }
}

fn kube_error(context: &str) -> impl FnOnce(kube::Error) -> VolumeError {
    let context = context.to_string();
    move |source| VolumeError::Kube { context, source }
}

fn unsupported(volume: &Volume, reason: &str) -> VolumeError {
    VolumeError::Unsupported {
        volume: volume.name.clone(),
        reason: reason.to_string(),
    }
}
