//! The controller's part of a PluginInstance's status, derived from what the reconcile
//! applied: the phase and the Pod, the `Ready`, `SettingsValid` and `Gated` conditions, the
//! settings left out and where each applied setting's value came from. Pure; `instance` writes it (a merge patch of what changed) and says
//! in an Event when the settings left out change.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use model::resolve::{LeftOut, ResolvedSettings};
use model::resources::{
    Condition, ConditionStatus, InstancePhase, PluginInstance, PluginInstanceStatus, set_condition,
};

/// The condition that says whether every configured setting value applies.
pub const SETTINGS_VALID: &str = "SettingsValid";

/// What the status is derived from: what the reconcile decided and applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct Applied<'a> {
    /// The instance's Pod, kept and put right, as the cache shows it; `None` while none runs
    /// (none wanted, or one made or replaced just now).
    pub pod: Option<&'a Pod>,
    /// Whether a Pod is wanted and can be built.
    pub want_pod: bool,
    /// Why no Pod can run, when none can.
    pub problem: Option<&'a str>,
    /// The settings the plugin sees and the values left out, when there is a manifest to
    /// check them against.
    pub settings: Option<&'a ResolvedSettings>,
    /// Whether the Pod runs under the gate, when it can be built.
    pub gated: Option<bool>,
    /// The destinations the plugin's egress policy opens here, when it was looked at.
    pub egress: Option<&'a [String]>,
}

/// The part of an instance's status the controller owns (the API server owns the rest).
pub fn observed_part(status: &PluginInstanceStatus) -> PluginInstanceStatus {
    PluginInstanceStatus {
        observed_generation: status.observed_generation,
        phase: status.phase,
        pod: status.pod.clone(),
        refused_settings: status.refused_settings.clone(),
        setting_sources: status.setting_sources.clone(),
        egress: status.egress.clone(),
        conditions: status.conditions.clone(),
        ..Default::default()
    }
}

/// The controller's part of the instance's status after `applied`, at `now` (RFC 3339): a
/// condition's time moves only when its status flips.
pub fn desired_status(
    instance: &PluginInstance,
    applied: &Applied,
    now: &str,
) -> PluginInstanceStatus {
    let current = instance
        .status
        .as_ref()
        .map(observed_part)
        .unwrap_or_default();
    let pod = applied.pod;
    let ready = pod.is_some_and(index::pods::pod_ready);
    let phase = match (pod, applied.want_pod) {
        (Some(_), _) if ready => InstancePhase::Running,
        (_, true) => InstancePhase::Starting,
        _ => InstancePhase::Stopped,
    };
    let mut conditions = current.conditions.clone();
    let (status, reason, message) = match applied.problem {
        Some(problem) => (ConditionStatus::False, "CannotRun", problem.to_string()),
        None if ready => (
            ConditionStatus::True,
            "Running",
            "the container is Ready".to_string(),
        ),
        None if applied.want_pod => (
            ConditionStatus::False,
            "Starting",
            "waiting for the Pod to be Ready".to_string(),
        ),
        None => (
            ConditionStatus::True,
            "Idle",
            "no container runs until a call, an event, a switch or a schedule needs one"
                .to_string(),
        ),
    };
    set_condition(
        &mut conditions,
        Condition {
            r#type: "Ready".into(),
            status,
            observed_generation: instance.metadata.generation,
            last_transition_time: now.into(),
            reason: reason.into(),
            message,
        },
    );
    // Without a manifest to check them against, what was shown stays.
    let (refused_settings, setting_sources) = match applied.settings {
        Some(settings) => {
            let left_out = &settings.left_out;
            set_condition(&mut conditions, settings_condition(left_out, instance, now));
            (
                left_out.iter().map(LeftOut::to_refused).collect(),
                settings.sources.clone(),
            )
        }
        None => (
            current.refused_settings.clone(),
            current.setting_sources.clone(),
        ),
    };
    if let Some(gated) = applied.gated {
        set_condition(&mut conditions, gate_condition(gated, instance, now));
    }
    PluginInstanceStatus {
        observed_generation: instance.metadata.generation,
        phase: Some(phase),
        pod: pod.map(|p| p.name_any()),
        refused_settings,
        setting_sources,
        egress: applied
            .egress
            .map(<[String]>::to_vec)
            .unwrap_or(current.egress),
        conditions,
        ..Default::default()
    }
}

/// `SettingsValid`: whether every configured setting value applies, and each one left out
/// with why.
fn settings_condition(left_out: &[LeftOut], instance: &PluginInstance, now: &str) -> Condition {
    let (status, reason, message) = if left_out.is_empty() {
        (
            ConditionStatus::True,
            "SettingsApplied",
            "every configured setting value applies".to_string(),
        )
    } else {
        let each: Vec<String> = left_out.iter().map(|l| l.to_string()).collect();
        (
            ConditionStatus::False,
            "SettingsLeftOut",
            format!("{}; the value below each applies", each.join("; ")),
        )
    };
    Condition {
        r#type: SETTINGS_VALID.into(),
        status,
        observed_generation: instance.metadata.generation,
        last_transition_time: now.into(),
        reason: reason.into(),
        message,
    }
}

/// `Gated`: whether the container runs under the gate (HostConfig gates.agentgate.enabled).
fn gate_condition(gated: bool, instance: &PluginInstance, now: &str) -> Condition {
    let (status, reason, message) = if gated {
        (
            ConditionStatus::True,
            "GateOn",
            "the plugin runs under the gate: Landlock, seccomp and the audit",
        )
    } else {
        (
            ConditionStatus::False,
            "GateOff",
            "gates.agentgate.enabled is off in HostConfig default: the plugin's command runs without the gate",
        )
    };
    Condition {
        r#type: "Gated".into(),
        status,
        observed_generation: instance.metadata.generation,
        last_transition_time: now.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// The `SettingsValid` condition to announce in an Event: when the settings left out changed
/// from `before` to `after` (a Warning while it is False).
pub fn settings_news<'a>(
    before: &PluginInstanceStatus,
    after: &'a PluginInstanceStatus,
) -> Option<&'a Condition> {
    if before.refused_settings == after.refused_settings {
        return None;
    }
    after.conditions.iter().find(|c| c.r#type == SETTINGS_VALID)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use model::config::ConfigLevel;
    use model::resolve::LeftOutReason;
    use model::resources::SettingSource;

    use super::*;
    use crate::tests::fixtures;

    const T1: &str = "2026-01-01T10:00:00Z";
    const T2: &str = "2026-01-01T10:05:00Z";

    fn pod(ready: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("echo-general-1a2b3c4d".into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// The project's count refused, the global one applying, and the mode's default.
    fn left_out() -> ResolvedSettings {
        ResolvedSettings {
            values: [
                ("count".to_string(), serde_json::json!(5)),
                ("mode".to_string(), serde_json::json!("fast")),
            ]
            .into(),
            sources: [
                ("count".to_string(), SettingSource::Global),
                ("mode".to_string(), SettingSource::Default),
            ]
            .into(),
            left_out: vec![LeftOut {
                level: ConfigLevel::Project,
                setting: "count".into(),
                field: model::resolve::ConfigField::Settings,
                value: Some(serde_json::json!(11)),
                reason: LeftOutReason::Refused("11 is greater than the maximum of 10".into()),
            }],
        }
    }

    fn condition<'a>(status: &'a PluginInstanceStatus, kind: &str) -> &'a Condition {
        status
            .conditions
            .iter()
            .find(|c| c.r#type == kind)
            .unwrap_or_else(|| panic!("no {kind} condition in {status:?}"))
    }

    #[test]
    fn the_phase_and_ready_say_whether_the_container_runs() {
        let instance = fixtures::instance();
        let (ready, starting) = (pod(true), pod(false));
        let rows = [
            (Some(&ready), true, None, "Running", "Running"),
            (Some(&ready), false, None, "Running", "Running"),
            (Some(&starting), true, None, "Starting", "Starting"),
            (None, true, None, "Starting", "Starting"),
            (None, false, None, "Stopped", "Idle"),
            (
                None,
                false,
                Some("Plugin echo is not installed"),
                "Stopped",
                "CannotRun",
            ),
        ];
        for (pod, want_pod, problem, phase, reason) in rows {
            let applied = Applied {
                pod,
                want_pod,
                problem,
                ..Default::default()
            };
            let status = desired_status(&instance, &applied, T1);
            let row = format!("{pod:?} {want_pod} {problem:?}");
            assert_eq!(
                status.phase.map(|p| format!("{p:?}")).as_deref(),
                Some(phase),
                "{row}"
            );
            assert_eq!(condition(&status, "Ready").reason, reason, "{row}");
            assert_eq!(status.pod.is_some(), pod.is_some(), "{row}");
        }
    }

    #[test]
    fn an_unchanged_instance_gets_the_same_status_later() {
        let mut instance = fixtures::instance();
        let running = pod(true);
        let left_out = left_out();
        let applied = Applied {
            pod: Some(&running),
            want_pod: true,
            settings: Some(&left_out),
            gated: Some(true),
            ..Default::default()
        };
        let first = desired_status(&instance, &applied, T1);
        instance.status = Some(first.clone());
        assert_eq!(desired_status(&instance, &applied, T2), first, "no write");
        // A condition that flips takes the time it flipped (its Pod failed and is replaced).
        let replacing = Applied {
            want_pod: true,
            settings: Some(&left_out),
            gated: Some(true),
            ..Default::default()
        };
        let after = desired_status(&instance, &replacing, T2);
        assert_eq!(condition(&after, "Ready").last_transition_time, T2);
        assert_eq!(condition(&after, "Gated").last_transition_time, T1);
    }

    #[test]
    fn settings_left_out_are_shown_and_stay_while_there_is_no_manifest() {
        let mut instance = fixtures::instance();
        let left_out = left_out();
        let shown = desired_status(
            &instance,
            &Applied {
                settings: Some(&left_out),
                ..Default::default()
            },
            T1,
        );
        assert_eq!(shown.refused_settings.len(), 1);
        assert_eq!(
            shown.setting_sources,
            [
                ("count".to_string(), SettingSource::Global),
                ("mode".to_string(), SettingSource::Default),
            ]
            .into()
        );
        let valid = condition(&shown, SETTINGS_VALID);
        assert_eq!(
            (valid.status, valid.reason.as_str()),
            (ConditionStatus::False, "SettingsLeftOut")
        );
        instance.status = Some(shown.clone());
        // The plugin is gone: what was shown stays.
        let kept = desired_status(&instance, &Applied::default(), T2);
        assert_eq!(kept.refused_settings, shown.refused_settings);
        assert_eq!(kept.setting_sources, shown.setting_sources);
        assert_eq!(kept.egress, shown.egress);
        assert_eq!(settings_news(&shown, &kept), None);
        // Fixed: the condition says so, and that is news.
        let fixed = desired_status(
            &instance,
            &Applied {
                settings: Some(&ResolvedSettings::default()),
                ..Default::default()
            },
            T2,
        );
        assert!(fixed.refused_settings.is_empty());
        assert!(fixed.setting_sources.is_empty());
        let news = settings_news(&shown, &fixed).expect("news");
        assert_eq!(
            (news.status, news.reason.as_str()),
            (ConditionStatus::True, "SettingsApplied")
        );
    }

    /// The status as a reviewer reads it, whole (`src/instance/snapshots/`): a running
    /// instance with a setting left out and the gate off, and one that cannot run.
    #[test]
    fn the_status_snapshot() {
        let instance = fixtures::instance();
        let running = pod(true);
        let left_out = left_out();
        let applied = Applied {
            pod: Some(&running),
            want_pod: true,
            problem: None,
            settings: Some(&left_out),
            gated: Some(false),
            egress: Some(&["10.20.0.0/16:5432".to_string()]),
        };
        insta::assert_yaml_snapshot!(
            "instance_status_running",
            desired_status(&instance, &applied, T1)
        );
        let cannot_run = Applied {
            problem: Some(
                "Plugin echo is not admitted: plugins.enabled is off in HostConfig default",
            ),
            ..Default::default()
        };
        insta::assert_yaml_snapshot!(
            "instance_status_cannot_run",
            desired_status(&instance, &cannot_run, T1)
        );
    }
}
