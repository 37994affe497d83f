//! The Plugin API (plugin → host, `openapi/plugin-api-v1.yaml`): [`Client`] calls it with the
//! chat's token; [`wire`] holds its bodies; [`limits`] its numbers and the rules of its
//! parameters, shared with the host.
//!
//! A non-2xx answer is an [`Error::Status`] carrying the status, the API's error code and its
//! message; [`Error::has_status`] and [`Error::code`] check it. Calls wait [`TIMEOUT`];
//! [`Client::live_control`] waits as long as the host waits for the live session, and
//! [`Client::run_ui`] as long as the command's timeout ([`ui_command`]).

mod client;
pub mod limits;
pub mod ui_command;
pub mod wire;

pub use client::{Client, Error, FromEnvError, LIVE_CONTROL_TIMEOUT, Result, StatusError, TIMEOUT};
pub use wire::ErrorCode;
