//! actions: unique ids; a default schedule needs the `schedule` capability and must parse.

use serde_json::Value;

use super::Ctx;
use super::read::{Unique, field, optional_object, optional_objects, required_str};
use crate::capability::Capability;
use crate::schedule;
use crate::schedule::ScheduleType;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let mut ids = Unique::new("id");
    for (at, action) in optional_objects(ctx.doc, "actions", &root, &mut ctx.problems) {
        if let Some(id) = required_str(action, "id", &at, &mut ctx.problems) {
            ids.check(id, &at, &mut ctx.problems);
        }
        let Some((ds_at, ds)) = optional_object(action, "default_schedule", &at, &mut ctx.problems)
        else {
            continue;
        };
        ctx.require(Capability::Schedule, &ds_at, "a default_schedule needs");
        let p = &mut ctx.problems;
        let kind = match field(ds, "type") {
            Some(Value::String(t)) if t == "cron" => Some(ScheduleType::Cron),
            Some(Value::String(t)) if t == "interval" => Some(ScheduleType::Interval),
            None => {
                p.add(&ds_at.key("type"), "is required: cron or interval");
                None
            }
            Some(other) => {
                p.add(
                    &ds_at.key("type"),
                    format!("must be cron or interval, not {other}"),
                );
                None
            }
        };
        let expr = required_str(ds, "schedule", &ds_at, p);
        // A default schedule no task could run on is refused here, at install, rather than on
        // every chat's task later.
        if let (Some(kind), Some(expr)) = (kind, expr)
            && let Err(e) = schedule::parse(kind, expr)
        {
            p.add(&ds_at.key("schedule"), e.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn actions_with_default_schedules_pass() {
        M::new()
            .caps(&["schedule"])
            .set(
                "actions",
                json!([
                    { "id": "ping" },
                    { "id": "daily", "default_schedule": { "type": "cron", "schedule": "0 9 * * *" } },
                    { "id": "often", "default_schedule": { "type": "interval", "schedule": "30m" } },
                    // The reference's intervals are durations, whatever cron can express.
                    { "id": "long", "default_schedule": { "type": "interval", "schedule": "2h30m" } },
                    { "id": "odd", "default_schedule": { "type": "interval", "schedule": "7m" } }
                ]),
            )
            .assert_valid();
        M::new()
            .set("actions", json!([{ "id": "ping" }]))
            .assert_valid();
    }

    #[test]
    fn action_ids_are_unique() {
        M::new()
            .set("actions", json!([{ "id": "ping" }, { "id": "ping" }]))
            .assert_problem("actions[1].id", "already the id of actions[0]");
        M::new()
            .set("actions", json!([{}]))
            .assert_problem("actions[0].id", "is required");
    }

    #[test]
    fn a_default_schedule_needs_the_capability() {
        M::new()
            .set(
                "actions",
                json!([{ "id": "daily", "default_schedule": { "type": "cron", "schedule": "0 9 * * *" } }]),
            )
            .assert_problem("actions[0].default_schedule", "needs \"schedule\" in capabilities");
    }

    #[test]
    fn a_default_schedule_must_parse() {
        let m = |ds| {
            M::new()
                .caps(&["schedule"])
                .set("actions", json!([{ "id": "a", "default_schedule": ds }]))
        };
        m(json!({ "type": "cron", "schedule": "0 9 * *" }))
            .assert_problem("actions[0].default_schedule.schedule", "exactly 5");
        m(json!({ "type": "cron", "schedule": "0 25 * * *" }))
            .assert_problem("actions[0].default_schedule.schedule", "hour");
        m(json!({ "type": "interval", "schedule": "5 minutes" }))
            .assert_problem("actions[0].default_schedule.schedule", "interval");
        m(json!({ "type": "interval", "schedule": "0m" }))
            .assert_problem("actions[0].default_schedule.schedule", "longer than zero");
        m(json!({ "type": "interval", "schedule": "-5m" }))
            .assert_problem("actions[0].default_schedule.schedule", "negative");
        // A CronJob ticks at most once a minute.
        m(json!({ "type": "interval", "schedule": "45s" }))
            .assert_problem("actions[0].default_schedule.schedule", "at least a minute");
        m(json!({ "type": "weekly", "schedule": "0 9 * * *" }))
            .assert_problem("actions[0].default_schedule.type", "cron or interval");
        m(json!({ "schedule": "0 9 * * *" }))
            .assert_problem("actions[0].default_schedule.type", "is required");
        m(json!({ "type": "cron" }))
            .assert_problem("actions[0].default_schedule.schedule", "is required");
        m(json!("0 9 * * *")).assert_problem("actions[0].default_schedule", "must be an object");
    }
}
