//! A chat's live session as the cluster keeps it, decided purely: the app opens it with the
//! control subtypes it takes and a lease, keeps it by opening it again before the lease
//! runs out (a heartbeat), and closes it; past its lease it has lapsed, and the chat is not
//! live. Kept in one ConfigMap per chat (`live-<chat>`, key `session`, beside the chat's
//! control requests), which every API replica's index holds, so any replica answers a
//! plugin's control request.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::{Deserialize, Serialize};

use model::names;

/// The component label of a chat's live session ConfigMap.
pub const COMPONENT: &str = "live";
/// The key holding the session.
pub const KEY: &str = "session";
/// The lease a session gets when the app names none.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The shortest lease the app may ask for.
pub const MIN_LEASE: Duration = Duration::from_secs(5);
/// The longest lease the app may ask for.
pub const MAX_LEASE: Duration = Duration::from_secs(300);
/// The most control subtypes a session takes.
pub const MAX_CONTROLS: usize = 64;

/// An open (or lapsed) session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The control request subtypes the app's session takes.
    pub controls: Vec<String>,
    pub lease_seconds: u64,
    pub opened: Timestamp,
    pub renewed: Timestamp,
}

impl Session {
    /// When it lapses unless renewed.
    pub fn expires(&self) -> Timestamp {
        self.renewed + Duration::from_secs(self.lease_seconds)
    }

    /// Whether the chat is live at `now`.
    pub fn is_open(&self, now: Timestamp) -> bool {
        now < self.expires()
    }
}

/// What the app asks for when it opens or renews a session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Open {
    /// The control subtypes the session takes.
    #[serde(default)]
    pub controls: Vec<String>,
    /// The lease, in seconds ([`DEFAULT_LEASE`] when absent).
    #[serde(default)]
    pub lease_seconds: Option<u64>,
}

/// Checks what the app asked for, naming the field that is wrong.
pub fn check(open: &Open) -> Result<Duration, String> {
    if open.controls.len() > MAX_CONTROLS {
        return Err(format!(
            "controls: at most {MAX_CONTROLS} subtypes, not {}",
            open.controls.len()
        ));
    }
    for subtype in &open.controls {
        if subtype.is_empty() || subtype.chars().count() > sdk::api::limits::MAX_SUBTYPE {
            return Err(format!(
                "controls: {subtype:?} is not a subtype of 1 to {} characters",
                sdk::api::limits::MAX_SUBTYPE
            ));
        }
    }
    let lease = open
        .lease_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_LEASE);
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(format!(
            "lease_seconds: from {} to {}, not {}",
            MIN_LEASE.as_secs(),
            MAX_LEASE.as_secs(),
            lease.as_secs()
        ));
    }
    Ok(lease)
}

/// The session after the app opened or renewed it at `now`: a renewal of an open session
/// keeps when it was opened.
pub fn opened(previous: Option<&Session>, open: &Open, lease: Duration, now: Timestamp) -> Session {
    let mut controls = open.controls.clone();
    controls.sort();
    controls.dedup();
    Session {
        controls,
        lease_seconds: lease.as_secs(),
        opened: previous
            .filter(|s| s.is_open(now))
            .map(|s| s.opened)
            .unwrap_or(now),
        renewed: now,
    }
}

/// Why a plugin's control request does not go to the app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    /// No session is open (none, closed, or lapsed).
    NotLive,
    /// The session does not take the subtype.
    NotTaken { takes: Vec<String> },
}

/// Whether a control request of `subtype` goes to the chat's session at `now`.
pub fn takes(session: Option<&Session>, subtype: &str, now: Timestamp) -> Result<(), Closed> {
    let session = session.filter(|s| s.is_open(now)).ok_or(Closed::NotLive)?;
    if session.controls.iter().any(|c| c == subtype) {
        Ok(())
    } else {
        Err(Closed::NotTaken {
            takes: session.controls.clone(),
        })
    }
}

/// The ConfigMap's name of a chat's session.
pub fn name(chat: &str) -> String {
    names::join_name(&["live", chat])
}

/// The session a ConfigMap holds.
pub fn read(map: &ConfigMap) -> Option<Session> {
    serde_json::from_str(map.data.as_ref()?.get(KEY)?).ok()
}

/// The chat's live ConfigMap, empty (its keys are merged in), owned by the chat: the session
/// (key `session`) and the control requests (`crate::live::request`).
pub fn config_map(
    namespace: &str,
    chat: &str,
    project: &str,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    crate::config_map::empty(
        name(chat),
        namespace,
        names::labels("", project, chat, COMPONENT),
        owner,
    )
}

/// The data patch that writes `session` (`None`: closes it).
pub fn write(session: Option<&Session>) -> crate::asks::record::DataPatch {
    BTreeMap::from([(
        KEY.to_string(),
        session.map(|s| serde_json::to_string(s).expect("a session serializes")),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn open(controls: &[&str], lease: Option<u64>) -> Open {
        Open {
            controls: controls.iter().map(|c| c.to_string()).collect(),
            lease_seconds: lease,
        }
    }

    #[test]
    fn a_session_is_live_until_its_lease_runs_out_and_a_renewal_keeps_it_open() {
        let asked = open(&["interrupt", "set_model", "interrupt"], None);
        let lease = check(&asked).unwrap();
        let first = opened(None, &asked, lease, at(0));
        assert_eq!(first.controls, ["interrupt", "set_model"]);
        assert!(first.is_open(at(29)));
        assert!(!first.is_open(at(30)), "lapsed at its lease's end");
        let renewed = opened(Some(&first), &asked, lease, at(20));
        assert_eq!((renewed.opened, renewed.renewed), (at(0), at(20)));
        assert!(renewed.is_open(at(49)));
        let reopened = opened(Some(&first), &asked, lease, at(40));
        assert_eq!(reopened.opened, at(40), "a lapsed session opens anew");
    }

    #[test]
    fn a_request_goes_only_to_an_open_session_that_takes_its_subtype() {
        let s = opened(
            None,
            &open(&["interrupt"], Some(10)),
            Duration::from_secs(10),
            at(0),
        );
        assert_eq!(takes(Some(&s), "interrupt", at(5)), Ok(()));
        assert_eq!(
            takes(Some(&s), "set_model", at(5)),
            Err(Closed::NotTaken {
                takes: vec!["interrupt".into()]
            })
        );
        assert_eq!(takes(Some(&s), "interrupt", at(10)), Err(Closed::NotLive));
        assert_eq!(takes(None, "interrupt", at(0)), Err(Closed::NotLive));
    }

    #[test]
    fn what_the_app_asks_for_is_checked_naming_the_field() {
        assert!(
            check(&open(&[""], None))
                .unwrap_err()
                .starts_with("controls:")
        );
        assert!(
            check(&open(&[&"x".repeat(129)], None))
                .unwrap_err()
                .starts_with("controls:")
        );
        assert!(
            check(&open(&[], Some(4)))
                .unwrap_err()
                .starts_with("lease_seconds:")
        );
        assert!(
            check(&open(&[], Some(301)))
                .unwrap_err()
                .starts_with("lease_seconds:")
        );
        assert_eq!(check(&open(&[], Some(300))), Ok(MAX_LEASE));
    }

    #[test]
    fn the_config_map_holds_the_session_it_is_read_back_as() {
        let s = opened(None, &open(&["interrupt"], None), DEFAULT_LEASE, at(0));
        let mut map = config_map("team", "general", "proj", None);
        assert_eq!(map.metadata.name.as_deref(), Some("live-general"));
        let labels = map.metadata.labels.clone().unwrap();
        assert_eq!(labels[names::LABEL_COMPONENT], COMPONENT);
        let data = map.data.get_or_insert_default();
        crate::asks::record::apply(data, &write(Some(&s)));
        assert_eq!(read(&map), Some(s));
        crate::asks::record::apply(map.data.get_or_insert_default(), &write(None));
        assert_eq!(read(&map), None, "closed");
    }
}
