//! What every e2e test module uses: one cluster for the whole run (the local control plane, or
//! an existing one: see [`target`]), a fresh namespace per test, kubectl, and waits driven by
//! watches with timeouts.
//!
//! A new module adds `pub fn tests() -> Vec<E2eTest>` built with [`test`], and main.rs lists it.
//! A test that reads what only the local control plane has says so with
//! [`E2eTest::local_only`].

mod clock;
mod cluster;
mod harness;
pub use testkit::images;
mod namespace;
mod pod_security;
pub mod target;
pub mod wait;

pub use clock::{a_lock_wait_does_not_count_against_the_time_limit, lock_wait};
pub use cluster::{Cluster, IMAGE_SH, program};
pub use harness::{E2eTest, plain, run, test};
pub use namespace::Ns;
pub use pod_security::{restricted, restricted_template};
pub use target::{Existing, Target, target};
