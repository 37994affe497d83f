//! Operator verbs: the writes and reads a person makes through the CLI rather than with
//! kubectl.
//!
//! - [`project`]: `project trust` (the write itself is `server::person::trust`'s, which the
//!   console's trust goes through too);
//! - [`explain`]: `explain PLUGIN --chat NS/CHAT`, the facts the controller decides from;
//! - [`import`]: `project import` (a desktop `.loop/config.json` as a Project or HostConfig's
//!   plugin defaults);
//! - [`plugins`]: `plugin install|upgrade|remove|stop|list|info|verify|keygen|sign`;
//! - [`console`]: `console`, the console's URL for the kubeconfig's user;
//! - [`approvals`]: `approvals`, `approve`, `deny`: agents' tool calls a person answers,
//!   through the host API.

pub mod approvals;
pub mod console;
pub mod explain;
pub mod import;
pub mod plugins;

/// `project trust`: the same write the console makes.
pub mod project {
    pub use server::person::trust::{TrustError as OperatorError, trust_of, trust_project};
}

pub use project::{OperatorError, trust_of, trust_project};
