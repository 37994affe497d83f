//! The one index of the cluster that every long-lived role reads (like linkerd's policy
//! controller: one index, many servers). Nothing here writes to the cluster.
//!
//! - [`watch`]: the one way the index reads the cluster: a watch per kind feeding its store,
//!   with hooks before and after the store, and a stop signal;
//! - [`trim`]: what a stored object loses; [`slim`]: the compact form of the children kept by
//!   the thousand;
//! - [`feed`]: the subscribers of a kind's watch, the streams a kube `Controller` takes;
//! - [`manifests`]: each Plugin's manifest parsed and its tools' schemas compiled, once per
//!   version.

pub mod feed;
pub mod manifests;
pub mod slim;
pub mod trim;
pub mod watch;

pub use feed::Feed;
pub use manifests::{Compiled, Manifests};
pub use slim::Slim;
pub use watch::Watch;
