//! Reconcile tests against a mocked API server (each request asserted in order), and snapshot
//! tests of the objects the builders make.

mod chat;
mod context;
mod egress;
pub(crate) mod fixtures;
mod instance;
mod plugin;
mod project;
mod runs;
pub(crate) mod verifier;
mod wake;
