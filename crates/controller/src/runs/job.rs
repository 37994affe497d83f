//! The objects a run runs with, built purely from the run and HostConfig's runner: a Secret
//! holding the prompt (a prompt may be 256 KiB, past what one environment variable may hold)
//! and the run's MCP token, and the Job of the runner's image. docs/runner.md is the runner's side of this contract;
//! the names of the environment variables and files are `model::run_contract`'s.
//!
//! The Job runs once (`backoffLimit: 0`, `restartPolicy: Never`): a runner that fails or is
//! killed fails the run, as a session is never resumed; past the time limit
//! (`activeDeadlineSeconds`) the Job fails with `DeadlineExceeded`. Both are owned by the run,
//! so they go with it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec,
    Secret, SecretEnvSource, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use model::contract::WORKTREE_DIR;
use model::names;
use model::resources::{AgentRun, AgentRunner, WorkingTree};
use model::run_contract::{self as contract, MCP_TOKEN_KEY, PROMPT_KEY, RUN_DIR};
use model::security::{restricted_container, restricted_pod};

/// The label every runner Pod carries, naming its run.
pub use model::names::LABEL_RUN;
/// The component label of a run's Job and Secret.
pub const COMPONENT: &str = "runner";

/// The name of a run's Job and Secret.
pub fn job_name(run: &AgentRun) -> String {
    names::join_name(&["run", &run.name_any()])
}

/// The labels of a run's Job and Secret: the run's own, as a runner.
fn labels(run: &AgentRun) -> BTreeMap<String, String> {
    let project = run
        .labels()
        .get(names::LABEL_PROJECT)
        .cloned()
        .unwrap_or_default();
    let mut labels = names::labels(&run.spec.plugin, &project, &run.spec.channel, COMPONENT);
    labels.insert(LABEL_RUN.into(), run.name_any());
    labels
}

fn owner(run: &AgentRun) -> Option<Vec<OwnerReference>> {
    run.controller_owner_ref(&()).map(|o| vec![o])
}

/// The Secret holding the run's prompt and its MCP token `token`.
pub fn build_secret(run: &AgentRun, token: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(job_name(run)),
            namespace: run.namespace(),
            labels: Some(labels(run)),
            owner_references: owner(run),
            ..Default::default()
        },
        immutable: Some(true),
        data: Some(BTreeMap::from([
            (
                PROMPT_KEY.into(),
                ByteString(run.spec.prompt.clone().into_bytes()),
            ),
            (MCP_TOKEN_KEY.into(), ByteString(token.as_bytes().to_vec())),
        ])),
        ..Default::default()
    }
}

/// The run's MCP token in `secret` (as [`build_secret`] made it).
pub fn token_of(secret: &Secret) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(MCP_TOKEN_KEY)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The Job that runs `run` with `runner`; the run's MCP endpoint is under `api_url` (the
/// Plugin API's URL as Pods see it); the chat's `working_tree`, if it has one, is mounted at
/// `/workspace`, read-only for a read-only agent.
pub fn build_job(
    run: &AgentRun,
    runner: &AgentRunner,
    api_url: &str,
    working_tree: Option<&WorkingTree>,
) -> Job {
    let name = job_name(run);
    let env = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        ..Default::default()
    };
    let spec = &run.spec;
    let container = Container {
        name: "runner".into(),
        image: Some(runner.image.clone()),
        command: (!runner.command.is_empty()).then(|| runner.command.clone()),
        env: Some(vec![
            env(contract::RUN_ID, run.name_any()),
            env(contract::AGENT, spec.agent.clone()),
            env(contract::READ_ONLY, spec.read_only.to_string()),
            env(contract::PLUGIN, spec.plugin.clone()),
            env(contract::CHANNEL, spec.channel.clone()),
            env(contract::THREAD, spec.thread.clone()),
            env(contract::TOOLS, spec.tools.join(",")),
            env(contract::PROMPT_FILE, format!("{RUN_DIR}/{PROMPT_KEY}")),
            env(contract::TIME_LIMIT, runner.time_limit_seconds.to_string()),
            env(
                contract::TERMINATION_LOG,
                contract::TERMINATION_LOG_PATH.into(),
            ),
            env(
                contract::MCP_URL,
                format!(
                    "{}{}",
                    api_url.trim_end_matches('/'),
                    contract::mcp_path(&run.namespace().unwrap_or_default(), &run.name_any())
                ),
            ),
            env(
                contract::MCP_TOKEN_FILE,
                format!("{RUN_DIR}/{MCP_TOKEN_KEY}"),
            ),
        ]),
        termination_message_path: Some(contract::TERMINATION_LOG_PATH.into()),
        termination_message_policy: Some("File".into()),
        env_from: runner.credentials_secret.as_ref().map(|secret| {
            vec![EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: secret.clone(),
                    // A run starts where the credentials are missing; the runner says what
                    // it lacks.
                    optional: Some(true),
                }),
                ..Default::default()
            }]
        }),
        resources: runner.resources.clone(),
        volume_mounts: Some(vec![VolumeMount {
            name: "run".into(),
            mount_path: RUN_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        security_context: Some(restricted_container(None)),
        ..Default::default()
    };
    let mut container = container;
    let mut volumes = vec![Volume {
        name: "run".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(name.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }];
    if let Some(tree) = working_tree {
        volumes.push(Volume {
            name: "workspace".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: tree.claim_name.clone(),
                read_only: Some(spec.read_only),
            }),
            ..Default::default()
        });
        container
            .volume_mounts
            .get_or_insert_default()
            .push(VolumeMount {
                name: "workspace".into(),
                mount_path: WORKTREE_DIR.into(),
                read_only: Some(spec.read_only),
                sub_path: tree.sub_path.clone(),
                ..Default::default()
            });
        container.env.get_or_insert_default().push(EnvVar {
            name: contract::WORKSPACE.into(),
            value: Some(WORKTREE_DIR.into()),
            ..Default::default()
        });
    }
    let pod_labels = BTreeMap::from([
        (names::LABEL_COMPONENT.to_string(), COMPONENT.to_string()),
        (LABEL_RUN.to_string(), run.name_any()),
    ]);
    Job {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: run.namespace(),
            labels: Some(labels(run)),
            owner_references: owner(run),
            ..Default::default()
        },
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(i64::from(runner.time_limit_seconds)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: runner.service_account.clone(),
                    automount_service_account_token: Some(false),
                    restart_policy: Some("Never".into()),
                    security_context: Some(restricted_pod(None)),
                    containers: vec![container],
                    volumes: Some(volumes),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;
    use model::resources::AgentRunSpec;

    fn run(name: &str) -> AgentRun {
        let mut run = AgentRun::new(
            name,
            AgentRunSpec {
                plugin: "echo".into(),
                channel: "general".into(),
                thread: "plugin:echo".into(),
                agent: "summarizer".into(),
                read_only: true,
                tools: vec!["plugin_echo".into(), "plugin_count".into()],
                prompt: "Summarize the chat.".into(),
            },
        );
        run.metadata.namespace = Some("team".into());
        run.metadata.uid = Some("0000-run".into());
        run.metadata.labels = Some(names::labels("echo", "demo", "general", "run"));
        run
    }

    const API: &str = "http://loop-plugins-api.loop-system:8080/";

    #[test]
    fn the_chats_working_tree_is_mounted_read_only_for_a_read_only_agent() {
        let tree = WorkingTree {
            claim_name: "repo".into(),
            sub_path: Some("general".into()),
        };
        let mounts_of = |read_only: bool| {
            let mut run = run("echo-1");
            run.spec.read_only = read_only;
            let job = build_job(&run, &runner(), API, Some(&tree));
            let pod = job.spec.unwrap().template.spec.unwrap();
            let claim = pod
                .volumes
                .unwrap()
                .into_iter()
                .find_map(|v| v.persistent_volume_claim)
                .unwrap();
            let container = &pod.containers[0];
            let mount = container
                .volume_mounts
                .as_ref()
                .unwrap()
                .iter()
                .find(|m| m.name == "workspace")
                .cloned()
                .unwrap();
            let env = container.env.as_ref().unwrap();
            assert!(
                env.iter()
                    .any(|e| e.name == contract::WORKSPACE
                        && e.value.as_deref() == Some("/workspace"))
            );
            (
                claim.claim_name,
                claim.read_only,
                mount.read_only,
                mount.sub_path,
            )
        };
        assert_eq!(
            mounts_of(true),
            (
                "repo".into(),
                Some(true),
                Some(true),
                Some("general".into())
            )
        );
        assert_eq!(
            mounts_of(false),
            (
                "repo".into(),
                Some(false),
                Some(false),
                Some("general".into())
            )
        );
        let none = build_job(&run("echo-1"), &runner(), API, None);
        let pod = none.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            pod.volumes.unwrap().len(),
            1,
            "no working tree, no workspace"
        );
    }

    #[test]
    fn the_runner_gets_its_runs_mcp_endpoint_and_a_token_only_in_the_secret() {
        let run = run("echo-1");
        let job = build_job(&run, &runner(), API, None);
        let pod = job.spec.unwrap().template.spec.unwrap();
        let env = pod.containers[0].env.clone().unwrap();
        let value = |name: &str| {
            env.iter()
                .find(|e| e.name == name)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(
            value(contract::MCP_URL).as_deref(),
            Some("http://loop-plugins-api.loop-system:8080/mcp/namespaces/team/runs/echo-1")
        );
        assert_eq!(
            value(contract::MCP_TOKEN_FILE).as_deref(),
            Some("/run/loop-run/mcp-token")
        );
        assert!(env.iter().all(|e| e.value.as_deref() != Some("t0ken")));
        let secret = build_secret(&run, "t0ken");
        assert_eq!(token_of(&secret).as_deref(), Some("t0ken"));
    }

    fn runner() -> AgentRunner {
        AgentRunner {
            image: "ghcr.io/loop/loop-plugins:dev".into(),
            command: vec!["/loop-plugins".into(), "agent".into()],
            resources: Some(ResourceRequirements {
                limits: Some([("memory".to_string(), Quantity("256Mi".into()))].into()),
                ..Default::default()
            }),
            service_account: Some("agent-runner".into()),
            credentials_secret: Some("model-key".into()),
            time_limit_seconds: 300,
        }
    }

    #[test]
    fn built_objects_snapshot() {
        let run = run("echo-0123456789abcdef");
        insta::assert_yaml_snapshot!("runner_job", build_job(&run, &runner(), API, None));
        insta::assert_yaml_snapshot!("runner_prompt_secret", build_secret(&run, "t0ken"));
    }

    #[test]
    fn the_runner_gets_every_variable_of_the_contract_and_the_prompt_as_a_file() {
        let job = build_job(&run("echo-1"), &runner(), API, None);
        let pod = job.spec.unwrap().template.spec.unwrap();
        let env = pod.containers[0].env.clone().unwrap();
        let names: Vec<&str> = env.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, contract::RUN_ENV);
        assert!(
            env.iter()
                .all(|e| !e.value.as_deref().unwrap_or("").contains("Summarize")),
            "the prompt is a file, not a variable"
        );
        let prompt_file = env
            .iter()
            .find(|e| e.name == contract::PROMPT_FILE)
            .unwrap();
        assert_eq!(prompt_file.value.as_deref(), Some("/run/loop-run/prompt"));
    }

    #[test]
    fn a_run_runs_once_within_its_time_limit_and_goes_with_its_run() {
        let job = build_job(&run("echo-1"), &runner(), API, None);
        let spec = job.spec.as_ref().unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(300));
        let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("AgentRun", Some(true))
        );
        assert_eq!(job_name(&run("echo-1")), "run-echo-1");
    }

    #[test]
    fn a_runner_without_a_command_keeps_its_entrypoint() {
        let runner = AgentRunner {
            command: vec![],
            ..runner()
        };
        let job = build_job(&run("echo-1"), &runner, API, None);
        let pod = job.spec.unwrap().template.spec.unwrap();
        assert_eq!(pod.containers[0].command, None);
    }
}
