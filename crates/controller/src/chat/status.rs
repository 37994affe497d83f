//! The chat's status, derived from the plan and what the writes did: the plugins that run in
//! it, the schedule entries applied, whether every entry is valid (`SchedulesValid`) and whether
//! every write went through (`Applied`); and the conditions that turned False, for their Events.
//! Pure; `chat` writes it.

use std::collections::BTreeSet;

use crate::error::Failures;
use crate::plan::ChatPlan;
use model::resources::{
    AppliedSchedule, Channel, ChannelStatus, Condition, ConditionStatus, set_condition,
};

/// The entries to record as applied: the plan's, except that an entry whose CronJob could not
/// be applied (`not_applied`, by (plugin, action)) keeps the record it had (`before`), so it is
/// applied again rather than counted as done.
pub fn applied(
    plan: &ChatPlan,
    before: &[AppliedSchedule],
    not_applied: &BTreeSet<(String, String)>,
) -> Vec<AppliedSchedule> {
    let key = |r: &AppliedSchedule| (r.plugin.clone(), r.action.clone());
    let mut applied: Vec<AppliedSchedule> = plan
        .applied
        .iter()
        .filter(|r| !not_applied.contains(&key(r)))
        .chain(before.iter().filter(|r| not_applied.contains(&key(r))))
        .cloned()
        .collect();
    applied.sort();
    applied.dedup();
    applied
}

/// The chat's status: the plugins that run in it, the entries applied, whether every entry
/// is valid, and whether every write went through.
pub fn desired_status(
    channel: &Channel,
    current: &ChannelStatus,
    plan: &ChatPlan,
    applied: Vec<AppliedSchedule>,
    failures: &Failures,
    now: &str,
) -> ChannelStatus {
    let mut conditions = current.conditions.clone();
    let condition = |r#type: &str, ok: bool, reason: &str, message: String| Condition {
        r#type: r#type.into(),
        status: if ok {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        observed_generation: channel.metadata.generation,
        last_transition_time: now.into(),
        reason: reason.into(),
        message,
    };
    set_condition(
        &mut conditions,
        if plan.problems.is_empty() {
            condition(
                "SchedulesValid",
                true,
                "SchedulesApplied",
                "every schedule entry is applied".into(),
            )
        } else {
            condition(
                "SchedulesValid",
                false,
                "InvalidSchedule",
                plan.problems.join("; "),
            )
        },
    );
    set_condition(
        &mut conditions,
        if failures.is_empty() {
            condition(
                "Applied",
                true,
                "Applied",
                "every instance, data volume and task of this chat is as planned".into(),
            )
        } else {
            condition("Applied", false, "ApplyFailed", failures.to_string())
        },
    );
    ChannelStatus {
        observed_generation: channel.metadata.generation,
        plugins: plan.enabled.clone(),
        applied_schedules: applied,
        conditions,
    }
}

/// The condition of type `kind` when it turned False or its message changed while False.
pub fn turned_false<'a>(
    before: &ChannelStatus,
    after: &'a ChannelStatus,
    kind: &str,
) -> Option<&'a Condition> {
    let find = |s: &ChannelStatus| s.conditions.iter().find(|c| c.r#type == kind).cloned();
    let now = after.conditions.iter().find(|c| c.r#type == kind)?;
    let was = find(before);
    (now.status == ConditionStatus::False
        && was.is_none_or(|w| w.status != ConditionStatus::False || w.message != now.message))
    .then_some(now)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::error::WriteError;
    use crate::plan::{ChatInputs, PluginFacts, PluginView, plan_chat};
    use crate::tests::fixtures;
    use index::manifests::Manifests;
    use model::resources::Plugin;

    const T1: &str = "2026-01-01T10:00:00Z";

    /// The plan of `general` in [`fixtures::World::echo`], with `plugin` installed.
    fn plan(plugin: Plugin) -> ChatPlan {
        let host = fixtures::host().spec;
        let (project, trust) = (fixtures::project(true), fixtures::trust(true));
        let channel = fixtures::channel("general");
        let facts = PluginFacts::installed(&host, [&plugin], &Manifests::default());
        let views: Vec<PluginView> = facts.iter().map(PluginFacts::view).collect();
        plan_chat(&ChatInputs {
            channel: &channel.spec,
            project: Some(model::resolve::ProjectView::new(&project, Some(&trust))),
            host: &host,
            plugins: &views,
            existing_cronjobs: &BTreeMap::new(),
            applied: &[],
            now: T1.parse().expect("a timestamp"),
        })
    }

    /// The chat's status, whole, as a reviewer reads it (`src/chat/snapshots/`): echo running with
    /// its task applied; then echo without its `schedule` capability approved, and a write
    /// the API server refused.
    #[test]
    fn the_status_snapshot() {
        let channel = fixtures::channel("general");
        let applied = plan(fixtures::echo_plugin());
        let status = desired_status(
            &channel,
            &ChannelStatus::default(),
            &applied,
            applied.applied.clone(),
            &Failures::default(),
            T1,
        );
        insta::assert_yaml_snapshot!("channel_status_applied", status);

        let unscheduled = plan(fixtures::plugin_with(
            fixtures::echo_manifest(),
            &["ui.composer_switch"],
        ));
        let mut failures = Failures::default();
        failures.check::<()>(Err(WriteError::Create {
            kind: "PluginInstance",
            name: "echo-general".into(),
            source: kube::Error::Api(
                kube::core::Status::failure("refused: Invalid", "Invalid")
                    .with_code(422)
                    .boxed(),
            ),
        }));
        insta::assert_yaml_snapshot!(
            "channel_status_not_applied",
            desired_status(
                &channel,
                &status,
                &unscheduled,
                unscheduled.applied.clone(),
                &failures,
                "2026-01-01T11:00:00Z",
            )
        );
    }

    #[test]
    fn an_entry_whose_task_was_not_applied_keeps_its_record() {
        let record = |action: &str, hash: &str| AppliedSchedule {
            plugin: "echo".into(),
            action: action.into(),
            entry_hash: hash.into(),
            source: None,
        };
        let plan = ChatPlan {
            applied: vec![record("tick", "new"), record("tidy", "new")],
            ..Default::default()
        };
        let before = [record("tick", "old"), record("tidy", "old")];
        let refused = BTreeSet::from([("echo".to_string(), "tick".to_string())]);
        assert_eq!(
            applied(&plan, &before, &refused),
            [record("tick", "old"), record("tidy", "new")]
        );
        assert_eq!(applied(&plan, &before, &BTreeSet::new()), plan.applied);
    }
}
