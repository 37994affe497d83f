//! Cards and notifications, from the plugin that posts them to the person who reads them.
//!
//! - A plugin posts with the Plugin API (`POST /cards`, `POST /notifications`:
//!   `crate::plugin_api::routes`); each entry is kept in the (plugin, chat)'s inbox ConfigMap
//!   ([`inbox`]: the newest entries of each plugin in each chat).
//! - The app reads a chat's drawer through the host API (`GET .../cards`, `POST .../cards/read`,
//!   `GET .../cards/unread`: `crate::host_api::cards`): the chat's inboxes gathered, each card
//!   with what it shows now ([`drawer`]: its page from a signed link, or a note why not), and
//!   unread or not ([`read_marks`], written by [`marks`]).
//! - The app reads a chat's notifications the same way (`GET .../notifications`, `POST
//!   .../notifications/read`: `crate::host_api::notifications`; [`notifications`]), marked
//!   read apart from the cards; the sidebar's unread count is both.
//! - The console draws the drawer (`crate::console`).

pub mod drawer;
pub mod host_notes;
pub mod inbox;
pub mod marks;
pub mod notifications;
pub mod read_marks;
