//! resources: memory and cpus that become Kubernetes quantities.

use super::Ctx;
use super::read::{field, optional_object};
use crate::quantity;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    let Some((at, resources)) = optional_object(ctx.doc, "resources", &root, p) else {
        return;
    };
    if let Some(memory) = field(resources, "memory")
        && let Err(e) = quantity::memory_quantity(memory)
    {
        p.add(&at.key("memory"), e);
    }
    if let Some(cpus) = field(resources, "cpus")
        && let Err(e) = quantity::cpu_quantity(cpus)
    {
        p.add(&at.key("cpus"), e);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn resources_pass() {
        M::new()
            .set("resources", json!({ "memory": "128m", "cpus": 0.5 }))
            .assert_valid();
        M::new()
            .set("resources", json!({ "memory": 1048576 }))
            .assert_valid();
    }

    #[test]
    fn bad_resources_are_refused() {
        let m = M::new().set("resources", json!({ "memory": "lots", "cpus": -1 }));
        m.assert_problem("resources.memory", "not a memory size");
        m.assert_problem("resources.cpus", "more than 0");
        M::new()
            .set("resources", json!({ "cpus": "0.5" }))
            .assert_problem("resources.cpus", "must be a number");
        M::new()
            .set("resources", json!("128m"))
            .assert_problem("resources", "must be an object");
    }
}
