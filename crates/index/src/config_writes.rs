//! Config writes, as the watches see them: a change to a Project's spec (its config), to its
//! trust (a ProjectTrust made, changed or deleted: the reference sends `settings.changed`
//! "after a config write or a project trust change") or to the HostConfig's spec (the global
//! config). The API server's fan-out sends `settings.changed` for each (see
//! `server::fanout::settings_changed`).

use std::collections::HashMap;

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;

use model::resources::{HostConfig, Project, ProjectTrust};

/// Whose chats a config write concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Whose {
    /// One project: its namespace and name.
    Project(String, String),
    /// The global config: every project.
    Global,
}

/// A config write: whose chats it concerns, and which object (by uid) at which generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigWrite {
    pub whose: Whose,
    pub uid: String,
    pub generation: i64,
}

/// The generations seen of one kind, to tell a write from the first list and from status
/// changes (which keep the generation).
#[derive(Default)]
pub struct Generations {
    seen: HashMap<String, i64>,
}

impl Generations {
    /// Whether the object's spec changed since it was last seen; the first sight (the initial
    /// list, or a new object) is no change.
    pub fn changed(&mut self, key: String, generation: Option<i64>) -> bool {
        let generation = generation.unwrap_or_default();
        match self.seen.insert(key, generation) {
            Some(before) => before != generation,
            None => false,
        }
    }

    /// Whether the object is new since the first list, or its spec changed since it was last
    /// seen.
    pub fn made_or_changed(&mut self, key: String, generation: Option<i64>) -> bool {
        let generation = generation.unwrap_or_default();
        self.seen.insert(key, generation) != Some(generation)
    }

    pub fn forget(&mut self, key: &str) {
        self.seen.remove(key);
    }
}

/// Turns Project watch events into writes.
pub fn on_project(
    gens: &mut Generations,
    event: &watcher::Event<Project>,
    tx: &mpsc::UnboundedSender<ConfigWrite>,
) {
    match event {
        watcher::Event::InitApply(p) => {
            gens.changed(key(p), p.metadata.generation);
        }
        watcher::Event::Apply(p) => {
            if gens.changed(key(p), p.metadata.generation) {
                let _ = tx.send(ConfigWrite {
                    whose: Whose::Project(p.namespace().unwrap_or_default(), p.name_any()),
                    uid: p.uid().unwrap_or_default(),
                    generation: p.metadata.generation.unwrap_or_default(),
                });
            }
        }
        watcher::Event::Delete(p) => gens.forget(&key(p)),
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

/// Turns ProjectTrust watch events into writes of its project: a trust made after the first
/// list, changed, or deleted changes which config counts.
pub fn on_trust(
    gens: &mut Generations,
    event: &watcher::Event<ProjectTrust>,
    tx: &mpsc::UnboundedSender<ConfigWrite>,
) {
    let written = |t: &ProjectTrust| ConfigWrite {
        whose: Whose::Project(t.namespace().unwrap_or_default(), t.name_any()),
        uid: t.uid().unwrap_or_default(),
        generation: t.metadata.generation.unwrap_or_default(),
    };
    let key = |t: &ProjectTrust| format!("{}/{}", t.namespace().unwrap_or_default(), t.name_any());
    match event {
        watcher::Event::InitApply(t) => {
            gens.changed(key(t), t.metadata.generation);
        }
        watcher::Event::Apply(t) => {
            if gens.made_or_changed(key(t), t.metadata.generation) {
                let _ = tx.send(written(t));
            }
        }
        watcher::Event::Delete(t) => {
            gens.forget(&key(t));
            let _ = tx.send(written(t));
        }
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

/// Turns HostConfig watch events into writes.
pub fn on_host(
    gens: &mut Generations,
    event: &watcher::Event<HostConfig>,
    tx: &mpsc::UnboundedSender<ConfigWrite>,
) {
    match event {
        watcher::Event::InitApply(h) => {
            gens.changed(h.name_any(), h.metadata.generation);
        }
        watcher::Event::Apply(h) => {
            if gens.changed(h.name_any(), h.metadata.generation) {
                let _ = tx.send(ConfigWrite {
                    whose: Whose::Global,
                    uid: h.uid().unwrap_or_default(),
                    generation: h.metadata.generation.unwrap_or_default(),
                });
            }
        }
        watcher::Event::Delete(h) => gens.forget(&h.name_any()),
        watcher::Event::Init | watcher::Event::InitDone => {}
    }
}

fn key(p: &Project) -> String {
    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::ProjectSpec;

    #[test]
    fn a_trust_made_changed_or_deleted_is_a_write_of_its_project() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut gens = Generations::default();
        let trust = |name: &str, generation: i64| {
            let mut t = ProjectTrust::of(name, &Default::default());
            t.metadata.namespace = Some("ns".into());
            t.metadata.generation = Some(generation);
            t.metadata.uid = Some(format!("uid-{name}"));
            t
        };
        let whose = |rx: &mut mpsc::UnboundedReceiver<ConfigWrite>| rx.try_recv().map(|w| w.whose);
        let of = |name: &str| Ok(Whose::Project("ns".into(), name.into()));
        // The first list is no write.
        on_trust(&mut gens, &watcher::Event::InitApply(trust("a", 1)), &tx);
        on_trust(&mut gens, &watcher::Event::InitDone, &tx);
        assert!(rx.try_recv().is_err());
        // Unchanged (a resync), changed, made, deleted.
        on_trust(&mut gens, &watcher::Event::Apply(trust("a", 1)), &tx);
        assert!(rx.try_recv().is_err());
        on_trust(&mut gens, &watcher::Event::Apply(trust("a", 2)), &tx);
        assert_eq!(whose(&mut rx), of("a"));
        on_trust(&mut gens, &watcher::Event::Apply(trust("b", 1)), &tx);
        assert_eq!(whose(&mut rx), of("b"));
        on_trust(&mut gens, &watcher::Event::Delete(trust("a", 2)), &tx);
        assert_eq!(whose(&mut rx), of("a"));
        // Made again after its deletion: a write.
        on_trust(&mut gens, &watcher::Event::Apply(trust("a", 1)), &tx);
        assert_eq!(whose(&mut rx), of("a"));
        assert!(rx.try_recv().is_err());
    }

    fn project(generation: i64) -> Project {
        let mut p = Project::new("proj", ProjectSpec::default());
        p.metadata.namespace = Some("ns".into());
        p.metadata.generation = Some(generation);
        p.metadata.uid = Some("uid-proj".into());
        p
    }

    #[test]
    fn only_a_spec_change_after_the_first_sight_is_a_write() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut gens = Generations::default();
        on_project(&mut gens, &watcher::Event::InitApply(project(1)), &tx);
        on_project(&mut gens, &watcher::Event::InitDone, &tx);
        // A status change keeps the generation.
        on_project(&mut gens, &watcher::Event::Apply(project(1)), &tx);
        assert!(rx.try_recv().is_err());
        on_project(&mut gens, &watcher::Event::Apply(project(2)), &tx);
        assert_eq!(
            rx.try_recv().unwrap(),
            ConfigWrite {
                whose: Whose::Project("ns".into(), "proj".into()),
                uid: "uid-proj".into(),
                generation: 2,
            }
        );
        // A project made after the list: its first sight is no write.
        let mut other = project(1);
        other.metadata.name = Some("other".into());
        on_project(&mut gens, &watcher::Event::Apply(other), &tx);
        assert!(rx.try_recv().is_err());

        let mut host = HostConfig::new("default", Default::default());
        host.metadata.generation = Some(1);
        host.metadata.uid = Some("uid-host".into());
        on_host(&mut gens, &watcher::Event::InitApply(host.clone()), &tx);
        host.metadata.generation = Some(2);
        on_host(&mut gens, &watcher::Event::Apply(host), &tx);
        assert_eq!(
            rx.try_recv().unwrap(),
            ConfigWrite {
                whose: Whose::Global,
                uid: "uid-host".into(),
                generation: 2,
            }
        );
    }
}
