//! Every rule the reference states or implies for `plugin.json`, checked on its JSON so that
//! all problems are found at once, each at its path.

mod actions;
mod agents;
mod capabilities;
mod egress;
mod events;
pub(super) mod gate;
mod identity;
mod keys;
mod live;
mod read;
mod resources;
mod settings;
mod tools;
mod ui;

use std::collections::BTreeSet;

use serde_json::Value;

use super::capability::Capability;
use super::error::{JsonPath, Problem, Problems};
use read::Object;

/// The manifest being checked and what was found so far.
pub(super) struct Ctx<'a> {
    pub doc: &'a Object,
    /// The known capabilities the manifest declares.
    pub declared: BTreeSet<Capability>,
    pub problems: Problems,
}

impl Ctx<'_> {
    fn root(&self) -> JsonPath {
        JsonPath::root()
    }

    /// Refuses what is at `path` unless the manifest declares `capability`. `needs` says what
    /// needs it, verb included: "panels need", "a default_schedule needs".
    fn require(&mut self, capability: Capability, path: &JsonPath, needs: &str) {
        if !self.declared.contains(&capability) {
            self.problems
                .add(path, format!("{needs} \"{capability}\" in capabilities"));
        }
    }
}

/// Every problem of the document, in document order; empty when it is a valid manifest.
pub(crate) fn check(doc: &Value) -> Vec<Problem> {
    let mut problems = Problems::default();
    let Some(obj) = doc.as_object() else {
        problems.add(
            &JsonPath::root(),
            format!("must be a JSON object, not {}", read::kind(doc)),
        );
        return problems.into_vec();
    };
    let mut ctx = Ctx {
        doc: obj,
        declared: BTreeSet::new(),
        problems,
    };
    identity::check(&mut ctx);
    keys::check(&mut ctx);
    capabilities::check(&mut ctx);
    agents::check(&mut ctx);
    tools::check(&mut ctx);
    actions::check(&mut ctx);
    settings::check(&mut ctx);
    ui::check(&mut ctx);
    live::check(&mut ctx);
    events::check(&mut ctx);
    gate::check(&mut ctx);
    resources::check(&mut ctx);
    egress::check(&mut ctx);
    ctx.problems.into_vec()
}
