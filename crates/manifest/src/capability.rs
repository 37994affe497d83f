//! The capabilities a manifest may ask for. The owner approves them at install, and every call
//! of the Plugin API that needs one is checked against them.
//!
//! Where the names come from: the reference names `agent.readonly`, `files.read`, `ui.panel`,
//! `ui.notification.card`, `ui.composer_switch`, `schedule`, `events.subscribe` and
//! `live.control`. Its capability table was cut from our copy and the published Loop source we
//! could read predates plugins, so the names of the capabilities it only implies (agents that
//! are not read-only, memory, notifications, UI commands) are ours: `agent.write`,
//! `memory.read`, `memory.write`, `notifications.send` and `ui.command`; so is
//! `secrets.read`, for the secret settings issue 30 adds (zeroclaw's `secrets.get`, named like
//! our other reads), and `network.egress`, for the destinations a manifest's `egress` lists
//! (issue 30: approving it approves exactly those). They live in this one table, so correcting one is a one-line change.
//!
//! The same cut table leaves open what the SDK's `Hotspots` and `HotspotsPage` (the worst
//! functions of the chat's latest quality scan, `GET /hotspots` and `GET /hotspots/page`) need.
//! Hotspots describe the chat's working tree (each names a file of it, which `GET /files`
//! then reads), so `files.read`, the capability that grants reading the tree, grants them; no
//! capability of their own.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A capability a manifest may declare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// Run the manifest's read-only agents (`POST /runs`).
    AgentReadonly,
    /// Run the manifest's agents that are not read-only.
    AgentWrite,
    /// Read the chat's working tree (`GET /files`), and the hotspots of its latest quality
    /// scan (`GET /hotspots`).
    FilesRead,
    /// Read the project's memory.
    MemoryRead,
    /// Write the project's memory.
    MemoryWrite,
    /// Post notifications.
    NotificationsSend,
    /// Run UI commands in the app.
    UiCommand,
    /// Add panels to the workspace (`ui.panels`).
    UiPanel,
    /// Post cards to the notification drawer (`ui.cards`).
    UiNotificationCard,
    /// Show composer switches (`ui.composer_switches`).
    UiComposerSwitch,
    /// Give actions a default schedule.
    Schedule,
    /// Receive Loop events (`events`).
    EventsSubscribe,
    /// Drive the chat's live session (`live`, the `live.system` event).
    LiveControl,
    /// Read the values of its secret settings (`GET /settings/secrets/{name}`).
    SecretsRead,
    /// Reach the destinations its `egress` lists.
    NetworkEgress,
}

impl Capability {
    /// Every capability, in the order they are listed to people.
    pub const ALL: [Capability; 15] = [
        Capability::AgentReadonly,
        Capability::AgentWrite,
        Capability::FilesRead,
        Capability::MemoryRead,
        Capability::MemoryWrite,
        Capability::NotificationsSend,
        Capability::UiCommand,
        Capability::UiPanel,
        Capability::UiNotificationCard,
        Capability::UiComposerSwitch,
        Capability::Schedule,
        Capability::EventsSubscribe,
        Capability::LiveControl,
        Capability::SecretsRead,
        Capability::NetworkEgress,
    ];

    /// The name written in `capabilities`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::AgentReadonly => "agent.readonly",
            Capability::AgentWrite => "agent.write",
            Capability::FilesRead => "files.read",
            Capability::MemoryRead => "memory.read",
            Capability::MemoryWrite => "memory.write",
            Capability::NotificationsSend => "notifications.send",
            Capability::UiCommand => "ui.command",
            Capability::UiPanel => "ui.panel",
            Capability::UiNotificationCard => "ui.notification.card",
            Capability::UiComposerSwitch => "ui.composer_switch",
            Capability::Schedule => "schedule",
            Capability::EventsSubscribe => "events.subscribe",
            Capability::LiveControl => "live.control",
            Capability::SecretsRead => "secrets.read",
            Capability::NetworkEgress => "network.egress",
        }
    }

    /// What approving it allows, as install shows it before asking.
    pub const fn allows(self) -> &'static str {
        match self {
            Capability::AgentReadonly => {
                "start runs of the manifest's read-only agents (POST /runs)"
            }
            Capability::AgentWrite => "start runs of the manifest's agents that may change files",
            Capability::FilesRead => {
                "read the chat's working tree, and the hotspots of its latest quality scan"
            }
            Capability::MemoryRead => "read the project's memory",
            Capability::MemoryWrite => "write the project's memory",
            Capability::NotificationsSend => "post notifications to the chat",
            Capability::UiCommand => "run UI commands in the app",
            Capability::UiPanel => "add panels to the workspace's add-pane menus",
            Capability::UiNotificationCard => "post cards to the notification drawer",
            Capability::UiComposerSwitch => "show on/off switches in the chat's composer",
            Capability::Schedule => "run its actions on schedules",
            Capability::EventsSubscribe => "receive Loop events (messages, agent status, ...)",
            Capability::LiveControl => "drive the chat's live session and read its system messages",
            Capability::SecretsRead => {
                "read its secret settings' values from the Secrets the global or project config names"
            }
            Capability::NetworkEgress => {
                "reach the hosts and IP blocks its egress lists, on their ports (nothing else beyond the host)"
            }
        }
    }

    /// The capability with this name, if there is one.
    pub fn parse(name: &str) -> Option<Capability> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Every name, comma-separated, for messages.
    pub fn names() -> String {
        Self::ALL.map(Capability::as_str).join(", ")
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown capability name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown capability \"{0}\"")]
pub struct UnknownCapability(pub String);

impl FromStr for Capability {
    type Err = UnknownCapability;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownCapability(s.to_string()))
    }
}

impl Serialize for Capability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Capability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.as_str()), Some(c));
            let json = serde_json::to_value(c).unwrap();
            assert_eq!(serde_json::from_value::<Capability>(json).unwrap(), c);
        }
        assert_eq!(Capability::parse("ui.panels"), None);
        assert!("files.write".parse::<Capability>().is_err());
    }
}
