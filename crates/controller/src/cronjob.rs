//! The desired CronJob of a scheduled action in a channel: a pure builder.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use model::contract::{SELF_IMAGE_BINARY, SERVICE_ACCOUNT_TOKEN};
use model::names;

use crate::plan::ExistingTask;

/// What a schedule's CronJob is made of.
#[derive(Clone, Debug)]
pub struct CronJobInputs<'a> {
    pub plugin: &'a str,
    pub project: &'a str,
    pub channel: &'a str,
    pub namespace: &'a str,
    pub action: &'a str,
    /// The 5-field cron expression.
    pub cron: &'a str,
    /// Kept but turned off: the entry says `enabled: false`, or the project stopped enabling the plugin.
    pub suspend: bool,
    /// The hash of the schedule entry this CronJob was made from.
    pub entry_hash: &'a str,
    /// Our own image, which holds `loop-plugins trigger`.
    pub self_image: &'a str,
    /// Where the host API answers.
    pub api_url: &'a str,
    /// The chat, which owns the CronJob.
    pub owner: OwnerReference,
}

/// Annotation carrying the schedule entry's hash.
pub const ANNOTATION_ENTRY: &str = "plugins.loop.dev/schedule-entry";

/// A CronJob we made, as the plan reads it: its (plugin, action) from its labels, and the
/// task it runs. None for one without our labels.
pub fn existing_task(cronjob: &CronJob) -> Option<((String, String), ExistingTask)> {
    let labels = cronjob.metadata.labels.as_ref()?;
    let key = (
        labels.get(names::LABEL_PLUGIN)?.clone(),
        labels.get(names::LABEL_ACTION)?.clone(),
    );
    let task = ExistingTask {
        cron: cronjob.spec.schedule.clone(),
        entry_hash: cronjob
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_ENTRY))
            .cloned()
            .unwrap_or_default(),
        suspended: cronjob.spec.suspend.unwrap_or(false),
    };
    Some((key, task))
}

/// The CronJob that runs `loop-plugins trigger` for one action of one plugin in one channel.
pub fn build_cronjob(input: &CronJobInputs) -> CronJob {
    let name = names::cronjob_name(input.plugin, input.channel, input.action);
    let mut labels = names::labels(input.plugin, input.project, input.channel, "schedule");
    labels.insert(names::LABEL_ACTION.into(), input.action.into());
    let container = Container {
        name: "trigger".into(),
        image: Some(input.self_image.into()),
        command: Some(vec![SELF_IMAGE_BINARY.into(), "trigger".into()]),
        args: Some(vec![
            format!("--api-url={}", input.api_url),
            format!("--namespace={}", input.namespace),
            format!("--channel={}", input.channel),
            format!("--plugin={}", input.plugin),
            format!("--action={}", input.action),
            format!("--task={name}"),
            // Said explicitly, so a kubelet that maps volume paths (the tests' stand-in) can.
            format!("--token-file={SERVICE_ACCOUNT_TOKEN}"),
        ]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    CronJob {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(input.namespace.into()),
            labels: Some(labels.clone()),
            annotations: Some(
                [(ANNOTATION_ENTRY.to_string(), input.entry_hash.to_string())].into(),
            ),
            owner_references: Some(vec![input.owner.clone()]),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: input.cron.into(),
            suspend: Some(input.suspend),
            concurrency_policy: Some("Forbid".into()),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(0),
                    ttl_seconds_after_finished: Some(3600),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..Default::default()
                        }),
                        spec: Some(PodSpec {
                            service_account_name: Some(names::TRIGGER_SERVICE_ACCOUNT.into()),
                            restart_policy: Some("Never".into()),
                            security_context: Some(PodSecurityContext {
                                run_as_non_root: Some(true),
                                run_as_user: Some(65532),
                                seccomp_profile: Some(SeccompProfile {
                                    type_: "RuntimeDefault".into(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            containers: vec![container],
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(suspend: bool) -> CronJobInputs<'static> {
        CronJobInputs {
            plugin: "echo",
            project: "proj",
            channel: "general",
            namespace: "team",
            action: "tick",
            cron: "*/5 * * * *",
            suspend,
            entry_hash: "abc",
            self_image: "registry.local/loop-plugins@sha256:00",
            api_url: "http://api:8080",
            owner: OwnerReference::default(),
        }
    }

    /// The JSON paths of every value in `value`, list items by index.
    fn paths(value: &serde_json::Value, at: String, all: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    paths(v, format!("{at}.{key}"), all);
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    paths(v, format!("{at}[{i}]"), all);
                }
            }
            _ => {
                all.insert(at);
            }
        }
    }

    /// `apply::apply` makes an absent CronJob with a create, whose fields an apply later
    /// takes only where it sets them: so whatever the inputs, the builder sets the same fields.
    #[test]
    fn sets_the_same_fields_whatever_the_inputs() {
        let fields = |inputs: &CronJobInputs| {
            let mut all = std::collections::BTreeSet::new();
            paths(
                &serde_json::to_value(build_cronjob(inputs)).unwrap(),
                String::new(),
                &mut all,
            );
            all
        };
        let other = CronJobInputs {
            plugin: "other",
            channel: "random",
            action: "sweep",
            cron: "0 3 * * 1",
            suspend: true,
            entry_hash: "def",
            api_url: "http://elsewhere:9090",
            ..inputs(false)
        };
        assert_eq!(fields(&inputs(false)), fields(&other));
    }

    /// The whole CronJob, as a reviewer reads it (see `pod::tests::built_objects_snapshot`).
    #[test]
    fn built_cronjob_snapshot() {
        insta::assert_yaml_snapshot!("cronjob", build_cronjob(&inputs(false)));
    }

    #[test]
    fn runs_trigger_for_its_plugin_channel_and_action() {
        let cj = build_cronjob(&inputs(false));
        let spec = &cj.spec;
        assert_eq!(spec.schedule, "*/5 * * * *");
        assert_eq!(spec.suspend, Some(false));
        let pod = spec
            .job_template
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        let args = pod.containers[0].args.clone().unwrap();
        assert!(args.contains(&"--action=tick".to_string()));
        assert!(args.contains(&"--channel=general".to_string()));
        assert_eq!(cj.metadata.name.as_deref(), Some("echo-general-tick"));
    }
}
