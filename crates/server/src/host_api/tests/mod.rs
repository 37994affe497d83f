//! Request-level tests of the host API and the check of its spec.

mod approvals;
mod cards;
mod config;
mod console;
mod fixtures;
mod hostile;
mod openapi;
mod quality;
mod requests;
mod runs;
mod upgrade;
