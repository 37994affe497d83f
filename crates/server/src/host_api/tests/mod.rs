//! Request-level tests of the host API and the check of its spec.

mod approvals;
mod cards;
mod console;
mod fixtures;
mod hostile;
mod openapi;
mod requests;
mod runs;
