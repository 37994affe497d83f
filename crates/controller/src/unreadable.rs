//! Names the objects the index leaves out because they do not parse (`index::unreadable`: the
//! watch logs each and serves the rest of its kind): a Warning Event `Unreadable` on each,
//! once per version, and `loop_plugins_controller_unreadable_objects` by kind. Runs beside the
//! reconcilers, on the leader.

use std::collections::BTreeSet;
use std::sync::Arc;

use index::{UnreadableObject, Unreadables};

use super::context::Context;

/// The Event's reason.
pub const REASON: &str = "Unreadable";

/// Publishes an Event on each object `unreadables` holds, once per version, and keeps the
/// gauge of them by kind, until the index goes.
pub async fn report(unreadables: Arc<Unreadables>, ctx: Arc<Context>) {
    let mut changes = unreadables.subscribe();
    let mut told = Told::default();
    loop {
        changes.mark_unchanged();
        ctx.metrics.unreadable_counts(&unreadables.counts());
        for object in told.news(&unreadables.objects()) {
            ctx.event_on(&object.reference(), true, REASON, "Read", note(&object))
                .await;
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

/// What the Event says.
pub fn note(object: &UnreadableObject) -> String {
    format!(
        "{} {} does not parse, so the controller leaves it out (as if it did not exist) until \
         it changes: {}",
        object.kind,
        object.key(),
        object.error
    )
}

/// The versions told already.
#[derive(Debug, Default)]
pub struct Told {
    versions: BTreeSet<(String, Option<String>, String, Option<String>)>,
}

impl Told {
    /// The objects of `held` whose version was not told yet; forgets what `held` no longer
    /// has (fixed or gone), so the same version left out again later is told again.
    pub fn news(&mut self, held: &[UnreadableObject]) -> Vec<UnreadableObject> {
        let now: BTreeSet<_> = held.iter().map(version).collect();
        let news = held
            .iter()
            .filter(|o| !self.versions.contains(&version(o)))
            .cloned()
            .collect();
        self.versions = now;
        news
    }
}

fn version(o: &UnreadableObject) -> (String, Option<String>, String, Option<String>) {
    (
        o.kind.clone(),
        o.namespace.clone(),
        o.name.clone(),
        o.resource_version.clone(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, version: &str) -> UnreadableObject {
        UnreadableObject {
            kind: "Project".into(),
            api_version: "plugins.loop.dev/v1alpha1".into(),
            namespace: Some("team".into()),
            name: name.into(),
            uid: Some(format!("uid-{name}")),
            resource_version: Some(version.into()),
            error: "spec.plugins.echo.settings.a: recursion limit exceeded".into(),
        }
    }

    fn names(objects: Vec<UnreadableObject>) -> Vec<(String, String)> {
        objects
            .into_iter()
            .map(|o| (o.name, o.resource_version.unwrap_or_default()))
            .collect()
    }

    #[test]
    fn each_version_is_told_once() {
        let mut told = Told::default();
        let held = [object("a", "1"), object("b", "2")];
        assert_eq!(names(told.news(&held)).len(), 2);
        assert!(told.news(&held).is_empty(), "a relist tells nothing again");
        let changed = [object("a", "1"), object("b", "3")];
        assert_eq!(names(told.news(&changed)), [("b".into(), "3".into())]);
    }

    #[test]
    fn a_version_left_out_again_after_a_fix_is_told_again() {
        let mut told = Told::default();
        told.news(&[object("a", "1")]);
        told.news(&[]);
        assert_eq!(names(told.news(&[object("a", "1")])).len(), 1);
    }

    #[test]
    fn the_note_names_the_object_and_why() {
        let note = note(&object("a", "1"));
        assert!(note.starts_with("Project team/a does not parse"), "{note}");
        assert!(note.ends_with("recursion limit exceeded"), "{note}");
    }
}
