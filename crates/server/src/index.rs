//! The index as the API server reads it: the one index of the cluster (`crates/index`),
//! started for the API server's role ([`Roles::api`], in `serve`): the declared resources,
//! the instances and runs, the inbox, memory, live session and quality scan ConfigMaps, the
//! token Secrets (their tokens only as digests), the plugin Pods, each Plugin's compiled
//! manifest and the config writes.
//! Answers read from it, never from the API server. Its types under the names the server's
//! modules use.

pub use ::index::config_writes::{self, ConfigWrite};
pub use ::index::{
    Compiled, ContainerKey, Endpoint, Index, InstanceKey, PodIndex, Roles, TokenIndex, TokenOwner,
    Writers,
};
