//! Operator verbs: the writes and reads a person makes through the CLI rather than with
//! kubectl.
//!
//! - [`project`]: `project trust`;
//! - [`plugins`]: `plugin install|upgrade|remove|list|info|verify|keygen|sign`.

pub mod plugins;
pub mod project;

pub use project::{OperatorError, trust_of, trust_project};
