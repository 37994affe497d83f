//! What every e2e test module uses: one dev cluster for the whole run, a fresh namespace per
//! test, kubectl, and waits driven by watches with timeouts.
//!
//! A new module adds `pub fn tests() -> Vec<E2eTest>` built with [`test`], and main.rs lists it.

mod cluster;
mod harness;
mod namespace;
pub mod wait;

pub use cluster::{Cluster, IMAGE_SH, program};
pub use harness::{E2eTest, run, test};
pub use namespace::Ns;
