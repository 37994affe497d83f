//! The I/O admission needs: the image pulled by digest and checked (crates/oci), cached by
//! digest because an image never changes for its digest; the signatures published next to
//! it; the registry client built from HostConfig `plugins.registry` and its credentials
//! Secret. Thin: every decision is the admission crate's.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use admission::{ImageFinding, SignatureFinding, view_of};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use model::resources::{HostConfigSpec, ImageStatus, Plugin, RegistryConfig, SignatureMode};
use oci::registry_options::{RegistrySetupError, options};
use oci::signing::publish;
use oci::signing::record::SignatureRecord;
use oci::{DOCKER_CONFIG_SECRET_KEY, ImageRef, InspectError, Registry, inspect};

/// How many images' facts are kept.
const CACHE_SIZE: usize = 256;

/// The credentials Secret HostConfig names, as `.dockerconfigjson` bytes (None: anonymous).
pub fn credentials(
    config: &RegistryConfig,
    namespace: &str,
    secrets: &Store<Secret>,
) -> Result<Option<Vec<u8>>, RegistrySetupError> {
    let Some(name) = &config.credentials_secret else {
        return Ok(None);
    };
    let secret = secrets
        .state()
        .into_iter()
        .find(|s| s.name_any() == *name && s.namespace().as_deref() == Some(namespace))
        .ok_or_else(|| RegistrySetupError::SecretMissing {
            name: name.clone(),
            namespace: namespace.into(),
        })?;
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(DOCKER_CONFIG_SECRET_KEY))
        .map(|b| b.0.clone())
        .ok_or_else(|| RegistrySetupError::NoKey { name: name.clone() })?;
    Ok(Some(bytes))
}

/// Registry clients by setup, and image facts by digest.
#[derive(Default)]
pub struct Images {
    registry: Mutex<Option<(String, Registry)>>,
    cache: Mutex<Cache>,
}

/// What reading a digest gave, when it can never change: the facts, or a refusal of the
/// content itself (a root USER, a missing label, a broken layer). The registry's own
/// failures (unreachable, unauthorized, not found) are not kept: they may pass.
#[derive(Default)]
struct Cache {
    by_digest: HashMap<String, ImageFinding>,
    order: VecDeque<String>,
}

impl Cache {
    fn get(&self, digest: &str) -> Option<ImageFinding> {
        self.by_digest.get(digest).cloned()
    }

    fn put(&mut self, digest: &str, finding: ImageFinding) {
        if self.by_digest.insert(digest.to_string(), finding).is_none() {
            self.order.push_back(digest.to_string());
        }
        while self.order.len() > CACHE_SIZE {
            if let Some(old) = self.order.pop_front() {
                self.by_digest.remove(&old);
            }
        }
    }
}

impl Images {
    /// The client for this setup, made once per setup (credentials and addresses).
    pub fn registry(
        &self,
        config: &RegistryConfig,
        credentials: Option<&[u8]>,
    ) -> Result<Registry, RegistrySetupError> {
        let key = format!(
            "{}|{}",
            serde_json::to_string(config).unwrap_or_default(),
            credentials
                .map(model::names::short_hash)
                .unwrap_or_default()
        );
        let mut slot = self.registry.lock().expect("never poisoned");
        if let Some((k, r)) = slot.as_ref()
            && *k == key
        {
            return Ok(r.clone());
        }
        let registry = Registry::new(options(config, credentials)?)
            .map_err(|e| RegistrySetupError::Client(e.to_string()))?;
        *slot = Some((key, registry.clone()));
        Ok(registry)
    }

    /// The image `plugin.spec.image` pins, pulled and checked (or from the cache). A failure
    /// that may pass (the registry unreachable) falls back on what the status recorded for
    /// this digest, when admission passed it before.
    pub async fn read(&self, registry: &Registry, plugin: &Plugin) -> ImageFinding {
        let reference = match ImageRef::parse(&plugin.spec.image) {
            Ok(r) => r,
            Err(e) => {
                return ImageFinding::Refused {
                    reason: "ImageReferenceInvalid".into(),
                    message: e.to_string(),
                };
            }
        };
        let Some(digest) = reference.digest().map(|d| d.to_string()) else {
            return ImageFinding::Refused {
                reason: "ImageNotPinned".into(),
                message: format!("{reference} is not pinned by digest"),
            };
        };
        if let Some(finding) = self.cache.lock().expect("never poisoned").get(&digest) {
            return finding;
        }
        let started = std::time::Instant::now();
        let read = inspect(registry, &reference).await;
        tracing::info!(
            image = %reference,
            seconds = started.elapsed().as_secs_f64(),
            ok = read.is_ok(),
            "pulled and checked the image"
        );
        match read {
            Ok(facts) => {
                let finding = ImageFinding::Read(Arc::new(view_of(&facts)));
                self.cache
                    .lock()
                    .expect("never poisoned")
                    .put(&digest, finding.clone());
                finding
            }
            Err(e) if e.is_transient() => match recorded(plugin, &digest) {
                Some(facts) => ImageFinding::Recorded {
                    facts,
                    why: e.to_string(),
                },
                None => ImageFinding::Unavailable {
                    reason: e.reason().into(),
                    message: e.to_string(),
                },
            },
            Err(e) => {
                let finding = refused(&e);
                if intrinsic(&e) {
                    self.cache
                        .lock()
                        .expect("never poisoned")
                        .put(&digest, finding.clone());
                }
                finding
            }
        }
    }

    /// The signatures to judge: `spec.signature` when the Plugin carries one, else those
    /// published next to the image (not looked for when signatures are disabled).
    pub async fn signatures(
        &self,
        registry: &Registry,
        host: &HostConfigSpec,
        plugin: &Plugin,
    ) -> SignatureFinding {
        if let Some(s) = &plugin.spec.signature {
            return SignatureFinding::Records(vec![SignatureRecord {
                payload: s.payload.clone(),
                signature: s.signature.clone(),
                public_key: s.public_key.clone(),
            }]);
        }
        if host.plugins.signature_mode == SignatureMode::Disabled {
            return SignatureFinding::NotRead;
        }
        let (Ok(reference), Some(digest)) = (
            ImageRef::parse(&plugin.spec.image),
            plugin
                .pinned_digest()
                .and_then(|d| oci::Digest::parse(d).ok()),
        ) else {
            return SignatureFinding::Records(vec![]);
        };
        match publish::fetch_signatures(registry, &reference, &digest).await {
            Ok(records) => SignatureFinding::Records(records),
            Err(e) if e.is_transient() => SignatureFinding::Unavailable(e.to_string()),
            // An artifact that cannot be read signs nothing: judged as unsigned.
            Err(e) => {
                tracing::warn!(plugin = %plugin.name_any(), error = %e, "signature artifact unreadable");
                SignatureFinding::Records(vec![])
            }
        }
    }
}

/// What admission recorded for `digest`, if it passed the Image stage for it.
fn recorded(plugin: &Plugin, digest: &str) -> Option<ImageStatus> {
    let image = plugin.status.as_ref()?.image.clone()?;
    (image.digest == digest).then_some(image)
}

/// A refusal of what the digest names, which no retry can change.
fn intrinsic(e: &InspectError) -> bool {
    matches!(
        e,
        InspectError::Manifest { .. } | InspectError::Check { .. } | InspectError::Layer { .. }
    ) && e.reason() != "RegistryUnavailable"
}

fn refused(e: &InspectError) -> ImageFinding {
    ImageFinding::Refused {
        reason: e.reason().into(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission::ImageView;
    use model::contract::RunAs;

    #[test]
    fn the_cache_keeps_the_newest() {
        let mut cache = Cache::default();
        let view = |d: &str| {
            ImageFinding::Read(Arc::new(ImageView {
                digest: d.into(),
                repository: String::new(),
                run_as: RunAs { uid: 1, gid: None },
                command: vec![],
                plugin_json: Arc::default(),
                plugin_json_sha256: String::new(),
                bundle: Arc::default(),
            }))
        };
        for i in 0..CACHE_SIZE + 3 {
            let d = format!("d{i}");
            cache.put(&d, view(&d));
        }
        assert!(cache.get("d0").is_none());
        assert!(cache.get(&format!("d{}", CACHE_SIZE + 2)).is_some());
        assert_eq!(cache.by_digest.len(), CACHE_SIZE);
    }
}
