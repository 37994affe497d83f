//! The one index of the cluster (`crates/index`), under the names the calls read it by.

pub use ::index::changed::bump;
pub use ::index::{Compiled, ContainerKey, Endpoint, Index, InstanceKey};
