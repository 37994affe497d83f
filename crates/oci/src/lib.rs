//! Plugin images for loop-plugins: image references, registry pulls and pushes (oci-client),
//! the OCI layer rules applied to a merged view, the reference's image checks, deterministic
//! image building, and Ed25519 signatures bound to the image manifest digest.
//!
//! The entry points the CLI and the controller call:
//! - [`ImageRef::parse`], [`DockerConfig::parse`], [`Registry::new`], and
//!   [`registry_options::options`]: the client's options from HostConfig `plugins.registry`;
//! - [`inspect()`]: pull by tag or digest, check, return [`ImageFacts`] (pinned digest, USER,
//!   command, labels, plugin.json bytes and sha256, the /loop-plugin tree);
//! - [`signing::keys::PublisherKey`], [`signing::publish::sign_image`],
//!   [`signing::publish::fetch_signatures`], [`signing::policy::decide`];
//! - [`build`] and [`Registry::push_image`] to write images (the echo plugin's, tests').
//!
//! With the `test-support` feature, [`testing::TestRegistry`] runs a real registry on
//! 127.0.0.1 for tests.

pub mod build;
pub mod checks;
pub mod credentials;
pub mod digest;
pub mod inspect;
pub mod layers;
pub mod limits;
pub mod manifest;
pub mod media;
pub mod quote;
pub mod reference;
pub mod registry;
pub mod registry_options;
pub mod rootfs;
pub mod signing;
pub mod tarstream;
#[cfg(feature = "test-support")]
pub mod testing;

pub use checks::{CheckError, ConfigFacts, PluginEntry, TreeFacts};
pub use credentials::{Credential, CredentialsError, DOCKER_CONFIG_SECRET_KEY, DockerConfig};
pub use digest::Digest;
pub use inspect::{ImageFacts, InspectError, inspect};
pub use limits::Limits;
pub use reference::{ImageRef, ReferenceError};
pub use registry::{Endpoint, Registry, RegistryError, RegistryOptions};
