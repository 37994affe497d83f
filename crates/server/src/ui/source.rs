//! Where a bundle comes from: the admitted image, read from its registry by digest through the
//! `oci` crate (the same pull, layer rules and /loop-plugin checks as admission, so a symlink
//! out of the tree never gets this far), keeping only `/loop-plugin/ui/`. The registry client
//! is built from HostConfig `plugins.registry` as the controller's
//! ([`oci::registry_options`]), its credentials Secret read when a bundle is read (rare:
//! once per image digest, then the cache answers). Thin: the decisions are the oci crate's and
//! [`super::bundle`]'s.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use model::resources::RegistryConfig;
use oci::{DOCKER_CONFIG_SECRET_KEY, ImageRef, Registry, inspect};

use super::bundle::Bundle;

/// Why a bundle could not be read; the route answers 502 (the registry's) or 500.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("image {image:?} is not pinned by digest")]
    NotPinned { image: String },
    #[error(transparent)]
    Reference(#[from] oci::ReferenceError),
    #[error(transparent)]
    Setup(#[from] oci::registry_options::RegistrySetupError),
    #[error("reading the registry credentials Secret {namespace}/{name}: {source}")]
    Credentials {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Inspect(#[from] oci::InspectError),
    #[error(transparent)]
    Pull(#[from] install::PullError),
}

/// Pulls a plugin image with its published signatures, to review an upgrade to it (the
/// host API's `.../review`): the same client, credentials and checks as a bundle's read.
pub trait ImagePuller: Send + Sync {
    fn pull<'a>(
        &'a self,
        reference: &'a str,
        registry: &'a RegistryConfig,
    ) -> BoxFuture<'a, Result<install::Pulled, SourceError>>;
}

/// Reads the bundle of a pinned image.
pub trait BundleSource: Send + Sync {
    /// The `ui/` files of `image` (`registry/repository@sha256:...`), read with `registry`.
    fn read<'a>(
        &'a self,
        image: &'a str,
        registry: &'a RegistryConfig,
    ) -> BoxFuture<'a, Result<Bundle, SourceError>>;
}

/// The registry the image came from, with the credentials HostConfig names.
pub struct RegistrySource {
    client: Client,
    /// Where HostConfig's credentials Secret is (the release namespace).
    namespace: String,
}

impl RegistrySource {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
        }
    }

    async fn credentials(&self, config: &RegistryConfig) -> Result<Option<Vec<u8>>, SourceError> {
        let Some(name) = &config.credentials_secret else {
            return Ok(None);
        };
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        let secret = secrets
            .get(name)
            .await
            .map_err(|source| SourceError::Credentials {
                namespace: self.namespace.clone(),
                name: name.clone(),
                source,
            })?;
        Ok(secret
            .data
            .and_then(|mut d| d.remove(DOCKER_CONFIG_SECRET_KEY))
            .map(|b| b.0))
    }

    /// The registry client HostConfig's `plugins.registry` describes.
    async fn registry(&self, config: &RegistryConfig) -> Result<Registry, SourceError> {
        let credentials = self.credentials(config).await?;
        let options = oci::registry_options::options(config, credentials.as_deref())?;
        Ok(Registry::new(options)
            .map_err(|e| oci::registry_options::RegistrySetupError::Client(e.to_string()))?)
    }
}

impl ImagePuller for RegistrySource {
    fn pull<'a>(
        &'a self,
        reference: &'a str,
        config: &'a RegistryConfig,
    ) -> BoxFuture<'a, Result<install::Pulled, SourceError>> {
        Box::pin(async move {
            let registry = self.registry(config).await?;
            Ok(install::check::pull(&registry, reference).await?)
        })
    }
}

impl BundleSource for RegistrySource {
    fn read<'a>(
        &'a self,
        image: &'a str,
        config: &'a RegistryConfig,
    ) -> BoxFuture<'a, Result<Bundle, SourceError>> {
        Box::pin(async move {
            let reference = ImageRef::parse(image)?;
            if reference.digest().is_none() {
                return Err(SourceError::NotPinned {
                    image: image.to_string(),
                });
            }
            let registry = self.registry(config).await?;
            let facts = inspect(&registry, &reference).await?;
            Ok(Bundle::of_tree(&facts.tree))
        })
    }
}
