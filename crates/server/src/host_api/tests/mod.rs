//! Request-level tests of the host API and the check of its spec.

mod fixtures;
mod openapi;
mod requests;
