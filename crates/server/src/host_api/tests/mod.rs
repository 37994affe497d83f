//! Request-level tests of the host API and the check of its spec.

mod cards;
mod console;
mod fixtures;
mod hostile;
mod openapi;
mod requests;
