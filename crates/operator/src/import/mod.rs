//! `project import`: an existing desktop config (`<project>/.loop/config.json`, JSON with
//! comments as the desktop writes it, or the global `~/.loop/config.json`) carried over as
//! the cluster's Project (with `--trust`, its ProjectTrust) or HostConfig's plugin defaults.
//!
//! The shape:
//! - [`file`](mod@file): reads the text and takes its `plugins` object (json5, as manifests are read);
//! - [`carry`]: pure; decides entry by entry what carries over, with the rules the controller
//!   applies (`model::resolve`'s settings and schedules), so nothing is written that the
//!   controller would leave out, and every value left behind is listed with why;
//! - [`write`](mod@write): thin; applies the Project (then trusts exactly that version) or HostConfig's
//!   `plugins.defaults`, or prints them as YAML for `--dry-run`.

pub mod carry;
pub mod file;
pub mod write;

pub use carry::{Carried, NotCarried, NotCarriedReason, carry_over};
pub use file::{ImportError, read_plugins};
pub use write::{ImportTarget, Imported, import, project_name_of};
