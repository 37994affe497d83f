//! Config writes, as the watches see them: a change to a Project's spec (its config, or the
//! version its owner trusts) or to the HostConfig's (the global config). The fan-out sends
//! `settings.changed` for each (see `crate::fanout::settings_changed`).

use std::collections::HashMap;

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::mpsc;

use model::resources::{HostConfig, Project};

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
pub struct Written {
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

    pub fn forget(&mut self, key: &str) {
        self.seen.remove(key);
    }
}

/// Turns Project watch events into writes.
pub fn on_project(
    gens: &mut Generations,
    event: &watcher::Event<Project>,
    tx: &mpsc::UnboundedSender<Written>,
) {
    match event {
        watcher::Event::InitApply(p) => {
            gens.changed(key(p), p.metadata.generation);
        }
        watcher::Event::Apply(p) => {
            if gens.changed(key(p), p.metadata.generation) {
                let _ = tx.send(Written {
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

/// Turns HostConfig watch events into writes.
pub fn on_host(
    gens: &mut Generations,
    event: &watcher::Event<HostConfig>,
    tx: &mpsc::UnboundedSender<Written>,
) {
    match event {
        watcher::Event::InitApply(h) => {
            gens.changed(h.name_any(), h.metadata.generation);
        }
        watcher::Event::Apply(h) => {
            if gens.changed(h.name_any(), h.metadata.generation) {
                let _ = tx.send(Written {
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
            Written {
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
            Written {
                whose: Whose::Global,
                uid: "uid-host".into(),
                generation: 2,
            }
        );
    }
}
