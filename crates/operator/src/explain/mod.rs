//! `explain PLUGIN --chat NS/CHAT`: why a plugin runs or doesn't in a chat, each fact with
//! where it came from.
//!
//! The shape: [`gather()`] reads the objects the controller decides from (HostConfig, the
//! Plugin, the chat, its Project and ProjectTrust, the instance); [`facts`] is pure and asks
//! the very functions the controller and the API server ask (`model::resolve`: whether the
//! chat runs plugins, the trust state, whether the project enables the plugin, the settings
//! layering, the schedules, the risk profile and which tools wait for a person; admission's verdict as the Plugin's status records it), so there
//! is no second implementation of any rule; [`facts::text`] prints them as a table.

pub mod facts;
pub mod gather;

pub use facts::{Fact, World, explain, text};
pub use gather::gather;
