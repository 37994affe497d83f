//! The fan-out's mark of what it sent, where the next Lease holder finds it: for each config a
//! `settings.changed` speaks for (the global config; each project's, with its trust) the
//! version it was last sent for, and the generation of each plugin `plugins.changed` last told
//! of. It is a record of the replicas' namespace ([`crate::records`]) named after the fan-out
//! Lease, `<lease>-sent`, written by the holder after it sends.
//!
//! A replica that takes over compares the mark with what its stores hold and sends what the
//! last holder did not, whether or not it saw the write itself: the [`super::backlog`] covers
//! only what a running replica saw within the handover window, the mark also a write no
//! running replica saw (a brand-new Pod wins the Lease, the others restarted meanwhile) or one
//! older than the window (the Lease went unheld for longer). Delivery stays at least once: a
//! holder killed between its send and its mark's write is sent for again.
//!
//! Nothing is written while nothing changes: the holder writes the mark when it takes over
//! (once, if it differs) and after each send, never with its Lease renewals.

use std::collections::BTreeMap;

use kube::{Client, ResourceExt};

use crate::index::Index;
use crate::index::config_writes::Whose;
use crate::records::{RecordDecision, RecordError, Records};
use model::names;
use model::resources::HOST_CONFIG_NAME;

/// The mark as stored: key → version.
pub type Versions = BTreeMap<String, String>;

/// The key that tells a mark from a record not written yet (an empty one reads the same).
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "1";
/// The keys of the configs `settings.changed` speaks for start with this.
pub const SETTINGS: &str = "settings.";
/// The keys of the plugins `plugins.changed` told of start with this.
pub const PLUGINS: &str = "plugin.";
const GLOBAL_KEY: &str = "settings.global";
/// The version of a config that does not exist (the HostConfig deleted: the defaults count).
const ABSENT: &str = "none";

/// The mark's key of a config: `settings.global`, or `settings.<namespace>.<project>` (a
/// namespace name has no dot, so the first one ends it; ConfigMap keys allow no slash).
pub fn settings_key(whose: &Whose) -> String {
    match whose {
        Whose::Global => GLOBAL_KEY.to_string(),
        Whose::Project(ns, name) => format!("{SETTINGS}{ns}.{name}"),
    }
}

/// One config as the stores hold it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub whose: Whose,
    /// Its object's uid and generation (and its trust's, for a project): a spec write changes it.
    pub version: String,
    /// Whether it was written since it was made (a generation past the first, or a trust): what
    /// a replica that saw it happen would have sent `settings.changed` for.
    pub written: bool,
}

fn version_of(uid: Option<String>, generation: Option<i64>) -> String {
    format!(
        "{}:{}",
        uid.unwrap_or_default(),
        generation.unwrap_or_default()
    )
}

/// The configs `settings.changed` speaks for, as `index` holds them.
pub fn configs_now(index: &Index) -> Vec<Config> {
    let host = index
        .host
        .state()
        .into_iter()
        .find(|h| h.name_any() == HOST_CONFIG_NAME);
    let mut out = vec![match host {
        Some(h) => Config {
            whose: Whose::Global,
            version: version_of(h.uid(), h.metadata.generation),
            written: h.metadata.generation.unwrap_or_default() > 1,
        },
        None => Config {
            whose: Whose::Global,
            version: ABSENT.to_string(),
            written: false,
        },
    }];
    let trusts = index.project_trusts.state();
    for project in index.projects.state() {
        let ns = project.namespace().unwrap_or_default();
        let name = project.name_any();
        let trust = trusts
            .iter()
            .find(|t| t.namespace().as_deref() == Some(ns.as_str()) && t.name_any() == name);
        let mut version = version_of(project.uid(), project.metadata.generation);
        if let Some(t) = trust {
            version = format!("{version}/{}", version_of(t.uid(), t.metadata.generation));
        }
        out.push(Config {
            whose: Whose::Project(ns, name),
            version,
            written: project.metadata.generation.unwrap_or_default() > 1 || trust.is_some(),
        });
    }
    out
}

/// The configs whose `settings.changed` the mark does not show as sent: a version other than
/// the one marked, or none marked (a project made after the mark was written) and written
/// since it was made.
pub fn unsent(mark: &Versions, now: &[Config]) -> Vec<Whose> {
    now.iter()
        .filter(|c| match mark.get(&settings_key(&c.whose)) {
            Some(sent) => sent != &c.version,
            None => c.written,
        })
        .map(|c| c.whose.clone())
        .collect()
}

/// The mark's entries for `configs` (all of them: a snapshot; or those just sent).
pub fn settings_entries<'a>(configs: impl IntoIterator<Item = &'a Config>) -> Versions {
    configs
        .into_iter()
        .map(|c| (settings_key(&c.whose), c.version.clone()))
        .collect()
}

/// The installed plugins (name → generation) the mark says `plugins.changed` last told of.
pub fn plugins_told(mark: &Versions) -> BTreeMap<String, i64> {
    mark.iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(PLUGINS)?.to_string(), v.parse().ok()?)))
        .collect()
}

/// The mark's entries for the installed plugins (a snapshot).
pub fn plugin_entries(installed: &BTreeMap<String, i64>) -> Versions {
    installed
        .iter()
        .map(|(name, generation)| (format!("{PLUGINS}{name}"), generation.to_string()))
        .collect()
}

/// The mark after writing `entries`: with `snapshot` set to a prefix, the entries are all
/// there is under it (the keys of configs or plugins gone since are dropped).
pub fn merged(data: &Versions, entries: &Versions, snapshot: Option<&str>) -> Versions {
    let mut next = data.clone();
    if let Some(prefix) = snapshot {
        next.retain(|k, _| !k.starts_with(prefix));
    }
    next.extend(entries.iter().map(|(k, v)| (k.clone(), v.clone())));
    next.insert(FORMAT_KEY.into(), FORMAT.into());
    next
}

/// The mark in the replicas' namespace.
pub struct SentRecord {
    records: Records,
    name: String,
}

impl SentRecord {
    /// The mark of the fan-out on the Lease `lease` in `namespace`.
    pub fn new(client: Client, namespace: &str, lease: &str) -> Self {
        Self {
            records: Records::new(client, namespace),
            name: format!("{lease}-sent"),
        }
    }

    /// The mark; None while no holder wrote one (then nothing can be known to be unsent).
    pub async fn read(&self) -> Result<Option<Versions>, RecordError> {
        let data = self
            .records
            .update(&self.name, &[], |data| RecordDecision::Keep(data.clone()))
            .await?;
        Ok(data.contains_key(FORMAT_KEY).then_some(data))
    }

    /// Writes `entries` into the mark ([`merged`]); nothing when it already says so.
    pub async fn write(
        &self,
        entries: &Versions,
        snapshot: Option<&str>,
    ) -> Result<(), RecordError> {
        let labels = [
            (names::LABEL_PART_OF, names::PART_OF),
            (names::LABEL_COMPONENT, "fanout"),
        ];
        self.records
            .update(&self.name, &labels, |data| {
                let next = merged(data, entries, snapshot);
                if &next == data {
                    RecordDecision::Keep(())
                } else {
                    RecordDecision::Write(next, ())
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(ns: &str, name: &str, version: &str, written: bool) -> Config {
        Config {
            whose: Whose::Project(ns.into(), name.into()),
            version: version.into(),
            written,
        }
    }

    #[test]
    fn what_the_mark_does_not_show_is_unsent() {
        let mark = merged(
            &Versions::new(),
            &Versions::from([
                (GLOBAL_KEY.to_string(), "h:1".to_string()),
                ("settings.a.p".to_string(), "u:2".to_string()),
                ("settings.a.q".to_string(), "v:1".to_string()),
            ]),
            None,
        );
        let now = [
            Config {
                whose: Whose::Global,
                version: "h:1".into(),
                written: false,
            },
            // Sent for this version: nothing to do.
            project("a", "p", "u:2", true),
            // Written since it was sent (here: trusted).
            project("a", "q", "v:1/t:1", true),
            // Made after the mark was written: sent only if written since.
            project("b", "new", "w:1", false),
            project("b", "changed", "x:3", true),
        ];
        assert_eq!(
            unsent(&mark, &now),
            [
                Whose::Project("a".into(), "q".into()),
                Whose::Project("b".into(), "changed".into())
            ]
        );
    }

    #[test]
    fn a_snapshot_drops_what_is_gone_and_keeps_the_other_kind() {
        let data = merged(
            &Versions::new(),
            &Versions::from([
                ("settings.a.gone".to_string(), "u:1".to_string()),
                ("plugin.echo".to_string(), "3".to_string()),
            ]),
            None,
        );
        let now = [project("a", "p", "v:1", false)];
        let next = merged(&data, &settings_entries(&now), Some(SETTINGS));
        assert_eq!(
            next.keys().collect::<Vec<_>>(),
            ["format", "plugin.echo", "settings.a.p"]
        );
        assert_eq!(plugins_told(&next), BTreeMap::from([("echo".into(), 3)]));
        // The same entries again change nothing.
        assert_eq!(merged(&next, &settings_entries(&now), Some(SETTINGS)), next);
        let plugins = plugin_entries(&BTreeMap::from([("other".to_string(), 1)]));
        let next = merged(&next, &plugins, Some(PLUGINS));
        assert_eq!(plugins_told(&next), BTreeMap::from([("other".into(), 1)]));
        assert!(next.contains_key("settings.a.p"));
    }

    #[test]
    fn keys_are_what_a_config_map_allows() {
        let key = settings_key(&Whose::Project("team-a".into(), "web.app".into()));
        assert_eq!(key, "settings.team-a.web.app");
        assert!(
            key.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
        );
    }
}
