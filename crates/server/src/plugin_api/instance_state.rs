//! The API server's part of a PluginInstance's status: `lastActivity`, `switches` and
//! `liveHold`. Pure: a change and the current part make the next part; `writes` applies it.
//!
//! The part is written by server-side apply with the field manager [`FIELD_MANAGER`], always
//! whole: a field left out of an apply is a field given up, so each apply carries all three.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use super::clock::rfc3339;
use model::manifest::{Capability, Manifest};
use model::resources::{PluginInstanceStatus, SwitchState};

/// The field manager of everything the API server writes.
pub const FIELD_MANAGER: &str = "loop-plugins-api";

/// At most one `lastActivity` write per instance this often.
pub const ACTIVITY_EVERY: Duration = Duration::from_secs(5);

/// A switch's title (its tooltip), in characters: the reference's limit.
pub const MAX_SWITCH_TITLE: usize = 200;

/// The fields of an instance's status the API server owns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiPart {
    pub last_activity: Option<String>,
    pub switches: Vec<SwitchState>,
    pub live_hold: bool,
}

impl ApiPart {
    /// The API server's part of a status.
    pub fn of(status: Option<&PluginInstanceStatus>) -> Self {
        status.map_or_else(Self::default, |s| Self {
            last_activity: s.last_activity.clone(),
            switches: s.switches.clone(),
            live_hold: s.live_hold,
        })
    }

    /// The status to apply: only the API server's fields.
    pub fn to_status(&self) -> PluginInstanceStatus {
        PluginInstanceStatus {
            last_activity: self.last_activity.clone(),
            switches: self.switches.clone(),
            live_hold: self.live_hold,
            ..Default::default()
        }
    }

    /// The switch's state in this chat, if the plugin set one.
    pub fn switch(&self, id: &str) -> Option<&SwitchState> {
        self.switches.iter().find(|s| s.id == id)
    }
}

/// What a call changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Only the activity.
    Touch,
    /// `PUT /composer/switches/{id}`.
    SetSwitch(SwitchState),
    /// `DELETE /composer/switches/{id}`: back to the manifest's off state and title.
    ResetSwitch(String),
    /// `PUT /channel/live/hold`.
    Hold(bool),
}

/// The part after `change` at `now`. Switches the manifest no longer declares are forgotten,
/// and so are all of them once `ui.composer_switch` is not approved; the live session is let
/// go once `live.control` is not.
pub fn apply(
    part: &ApiPart,
    change: &Change,
    manifest: &Manifest,
    approved: &BTreeSet<Capability>,
    now: Timestamp,
) -> ApiPart {
    let mut next = part.clone();
    next.last_activity = Some(rfc3339(now));
    match change {
        Change::Touch => {}
        Change::SetSwitch(state) => {
            next.switches.retain(|s| s.id != state.id);
            next.switches.push(state.clone());
        }
        Change::ResetSwitch(id) => next.switches.retain(|s| &s.id != id),
        Change::Hold(hold) => next.live_hold = *hold,
    }
    let may_switch = approved.contains(&Capability::UiComposerSwitch);
    next.switches
        .retain(|s| may_switch && manifest.composer_switch(&s.id).is_some());
    next.live_hold &= approved.contains(&Capability::LiveControl);
    // In the manifest's order, so an unchanged state applies unchanged.
    next.switches.sort_by_key(|s| {
        manifest
            .ui
            .composer_switches
            .iter()
            .position(|m| m.id == s.id)
    });
    next
}

/// Whether a `lastActivity` write is due: none for `ACTIVITY_EVERY` after the last one.
pub fn activity_due(last: Option<Timestamp>, now: Timestamp) -> bool {
    match last {
        None => true,
        Some(last) => {
            now.duration_since(last)
                >= jiff::SignedDuration::try_from(ACTIVITY_EVERY).unwrap_or_default()
        }
    }
}

/// When each instance's activity was last written by this process, by instance uid.
#[derive(Default)]
pub struct ActivityLimiter {
    last: Mutex<HashMap<String, Timestamp>>,
}

impl ActivityLimiter {
    /// Claims the write of `uid`'s activity at `now` if one is due, considering the activity
    /// the instance already records.
    pub fn claim(&self, uid: &str, recorded: Option<Timestamp>, now: Timestamp) -> bool {
        let mut last = self.last.lock().expect("activity lock");
        let seen = match (last.get(uid).copied(), recorded) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if !activity_due(seen, now) {
            return false;
        }
        last.insert(uid.to_string(), now);
        true
    }

    /// Records a write of `uid`'s status made for another reason, which carried the activity.
    pub fn wrote(&self, uid: &str, now: Timestamp) {
        self.last
            .lock()
            .expect("activity lock")
            .insert(uid.to_string(), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin_api::tests::fixtures::full_manifest;

    fn all() -> BTreeSet<Capability> {
        Capability::ALL.into_iter().collect()
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn on(id: &str, title: Option<&str>) -> SwitchState {
        SwitchState {
            id: id.into(),
            on: true,
            title: title.map(Into::into),
            error: false,
            busy: false,
        }
    }

    #[test]
    fn switches_are_set_reset_and_kept_in_manifest_order() {
        let m = full_manifest();
        let now = t("2026-01-01T10:00:00Z");
        let part = ApiPart::default();
        let a = apply(&part, &Change::SetSwitch(on("quiz", None)), &m, &all(), now);
        let b = apply(
            &a,
            &Change::SetSwitch(on("sync", Some("Syncing"))),
            &m,
            &all(),
            now,
        );
        assert_eq!(
            b.switches.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["sync", "quiz"]
        );
        assert_eq!(b.last_activity.as_deref(), Some("2026-01-01T10:00:00Z"));
        let c = apply(&b, &Change::ResetSwitch("sync".into()), &m, &all(), now);
        assert_eq!(c.switches, vec![on("quiz", None)]);
        // Setting the same state again changes nothing but the activity.
        let d = apply(&c, &Change::SetSwitch(on("quiz", None)), &m, &all(), now);
        assert_eq!(d, c);
    }

    #[test]
    fn undeclared_switches_and_switches_without_the_capability_are_forgotten() {
        let m = full_manifest();
        let now = t("2026-01-01T10:00:00Z");
        let part = ApiPart {
            switches: vec![on("gone", None), on("sync", None)],
            ..Default::default()
        };
        let next = apply(&part, &Change::Touch, &m, &all(), now);
        assert_eq!(next.switches, vec![on("sync", None)]);
        let mut without = all();
        without.remove(&Capability::UiComposerSwitch);
        let next = apply(&part, &Change::Hold(true), &m, &without, now);
        assert!(next.switches.is_empty());
        assert!(next.live_hold);
        without.remove(&Capability::LiveControl);
        let next = apply(&next, &Change::Touch, &m, &without, now);
        assert!(!next.live_hold);
    }

    #[test]
    fn activity_is_written_at_most_every_few_seconds() {
        let limiter = ActivityLimiter::default();
        let t0 = t("2026-01-01T10:00:00Z");
        assert!(limiter.claim("u", None, t0));
        assert!(!limiter.claim("u", None, t0 + Duration::from_secs(4)));
        assert!(limiter.claim("u", None, t0 + Duration::from_secs(5)));
        assert!(limiter.claim("v", None, t0));
        // The activity the instance records counts too (after a restart of the server).
        assert!(!limiter.claim("w", Some(t0), t0 + Duration::from_secs(1)));
        limiter.wrote("v", t0 + Duration::from_secs(10));
        assert!(!limiter.claim("v", None, t0 + Duration::from_secs(12)));
    }
}
