//! The desired Pod, Secret and data volume of a PluginInstance: pure builders, no client.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, LocalObjectReference,
    ObjectFieldSelector, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, Probe, ResourceRequirements, Secret,
    SecretVolumeSource, TCPSocketAction, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use model::contract::{
    API_URL_ENV, DATA_DIR, GATE_DIR, GATE_POLICY_ENV, PLUGIN_PORT, RunAs, SECRET_DIR, SECRET_KEY,
    SELF_IMAGE_BINARY, TOKEN_KEY, WORKTREE_DIR,
};
use model::names;
use model::resources::WorkingTree;
use model::security::{restricted_container, restricted_pod};

/// The size each /data claim asks for.
pub const DATA_SIZE: &str = "1Gi";

/// What a plugin's Pod is made of.
#[derive(Clone, Debug)]
pub struct PodInputs<'a> {
    pub instance: &'a str,
    pub namespace: &'a str,
    pub owner: OwnerReference,
    pub plugin: &'a str,
    pub project: &'a str,
    pub channel: &'a str,
    /// The image, pinned by digest.
    pub image: &'a str,
    /// The image's entrypoint and command, as admission read them (the gate runs them).
    pub command: &'a [String],
    /// The image's numeric USER (never root: admission refuses such an image).
    pub run_as: RunAs,
    /// The dockerconfigjson Secret beside the Pod that its image is pulled with.
    pub image_pull_secret: Option<&'a str>,
    /// The manifest's resources as Kubernetes quantities: memory, cpu.
    pub memory: Option<Quantity>,
    pub cpu: Option<Quantity>,
    /// LOOP_API_URL.
    pub api_url: &'a str,
    /// The chat's working tree, if it has one.
    pub working_tree: Option<&'a WorkingTree>,
    /// The gate, while HostConfig turns it on.
    pub gate: Option<GateInputs<'a>>,
}

/// What the gate needs in the Pod.
#[derive(Clone, Debug)]
pub struct GateInputs<'a> {
    /// The image holding our binary, copied in by the init container.
    pub image: &'a str,
    /// The policy file the init container writes (compiled from the manifest at admission).
    pub policy_json: String,
    /// The chat as the audit names it: `<namespace>/<channel>`.
    pub chat: String,
    /// Where the audit goes: `-` (the container log) or a dir under /data.
    pub audit: String,
}

/// The policy file's path in the Pod.
pub const GATE_POLICY_FILE: &str = "policy.json";

/// Why a Pod cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PodError {
    #[error("the gate is on but Plugin {0} has no spec.command for the gate to run")]
    GateWithoutCommand(String),
    #[error("Plugin {0}'s image runs as root (uid 0); plugin containers never do")]
    RunsAsRoot(String),
}

/// The plugin's Pod. Its name carries a hash of its spec, so a changed spec makes a new Pod.
pub fn build_pod(input: &PodInputs) -> Result<Pod, PodError> {
    if input.run_as.uid == 0 {
        return Err(PodError::RunsAsRoot(input.plugin.into()));
    }
    let mut volumes = vec![
        Volume {
            name: "loop-plugin".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(names::secret_name(input.instance)),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        },
        Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: names::data_claim_name(input.plugin, input.channel),
                read_only: None,
            }),
            ..Default::default()
        },
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Default::default()
        },
    ];
    let mut mounts = vec![
        mount("loop-plugin", SECRET_DIR, true, None),
        mount("data", DATA_DIR, false, None),
        mount("tmp", "/tmp", false, None),
    ];
    if let Some(tree) = input.working_tree {
        volumes.push(Volume {
            name: "worktree".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: tree.claim_name.clone(),
                read_only: Some(true),
            }),
            ..Default::default()
        });
        mounts.push(mount("worktree", WORKTREE_DIR, true, tree.sub_path.clone()));
    }

    let mut env = vec![
        env_value("LOOP_PLUGIN_PORT", &PLUGIN_PORT.to_string()),
        env_value(API_URL_ENV, input.api_url),
        env_value(
            "LOOP_PLUGIN_TOKEN_FILE",
            &format!("{SECRET_DIR}/{TOKEN_KEY}"),
        ),
        env_value(
            "LOOP_PLUGIN_SECRET_FILE",
            &format!("{SECRET_DIR}/{SECRET_KEY}"),
        ),
        EnvVar {
            name: "LOOP_PLUGIN_HOST".into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "status.podIP".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    // Where /data is, said as a path, so a kubelet that maps volume paths (the tests'
    // stand-in) points the plugin at the chat's own volume.
    env.push(env_value("LOOP_PLUGIN_DATA_DIR", DATA_DIR));
    if input.working_tree.is_some() {
        env.push(env_value("LOOP_CHANNEL_DIR", WORKTREE_DIR));
    }

    let (command, init_containers) = match &input.gate {
        None => (None, None),
        Some(gate) => {
            if input.command.is_empty() {
                return Err(PodError::GateWithoutCommand(input.plugin.into()));
            }
            volumes.push(Volume {
                name: "gate".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            });
            mounts.push(mount("gate", GATE_DIR, true, None));
            let gate_bin = format!("{GATE_DIR}/loop-plugins");
            let policy = format!("{GATE_DIR}/{GATE_POLICY_FILE}");
            let init = Container {
                name: "install-gate".into(),
                image: Some(gate.image.into()),
                command: Some(vec![
                    SELF_IMAGE_BINARY.into(),
                    "install-gate".into(),
                    gate_bin.clone(),
                    "--policy".into(),
                    policy.clone(),
                ]),
                env: Some(vec![env_value(GATE_POLICY_ENV, &gate.policy_json)]),
                volume_mounts: Some(vec![mount("gate", GATE_DIR, false, None)]),
                security_context: Some(restricted_container(Some(input.run_as))),
                ..Default::default()
            };
            // The policy file holds the rules and the audit's retention; the dirs are said
            // on the command line too, as the Pod's mounts (the same values in a cluster; a
            // kubelet that plays mounts with other folders, the tests' stand-in, maps them).
            let mut command = vec![
                gate_bin,
                "gate".into(),
                "--policy".into(),
                policy,
                "--plugin".into(),
                input.plugin.into(),
                "--chat".into(),
                gate.chat.clone(),
                "--termination-log".into(),
                "/dev/termination-log".into(),
                "--writable".into(),
                DATA_DIR.into(),
                "--writable".into(),
                "/tmp".into(),
                "--no-exec".into(),
                "/dev/shm".into(),
                "--audit".into(),
                gate.audit.clone(),
                "--".into(),
            ];
            command.extend(input.command.iter().cloned());
            (Some(command), Some(vec![init]))
        }
    };

    let limits: BTreeMap<String, Quantity> = [("memory", &input.memory), ("cpu", &input.cpu)]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|q| (k.to_string(), q)))
        .collect();
    let resources = (!limits.is_empty()).then(|| ResourceRequirements {
        limits: Some(limits.clone()),
        requests: Some(limits),
        ..Default::default()
    });

    let container = Container {
        name: "plugin".into(),
        image: Some(input.image.into()),
        command,
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some("http".into()),
            container_port: PLUGIN_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        readiness_probe: Some(Probe {
            // A TCP probe: the plugin refuses HTTP without its secret, which must not be in the spec.
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(PLUGIN_PORT),
                ..Default::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(3),
            ..Default::default()
        }),
        resources,
        security_context: Some(restricted_container(Some(input.run_as))),
        volume_mounts: Some(mounts),
        ..Default::default()
    };

    let spec = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        restart_policy: Some("Always".into()),
        image_pull_secrets: input.image_pull_secret.map(|name| {
            vec![LocalObjectReference {
                name: name.to_string(),
            }]
        }),
        security_context: Some(restricted_pod(Some(input.run_as))),
        init_containers,
        containers: vec![container],
        volumes: Some(volumes),
        ..Default::default()
    };
    let hash = names::content_hash(&spec);
    let mut labels = names::labels(input.plugin, input.project, input.channel, "plugin");
    labels.insert(names::LABEL_INSTANCE.into(), input.instance.into());
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(names::join_name(&[input.instance, &hash[..8]])),
            namespace: Some(input.namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![input.owner.clone()]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The instance's Secret: a fresh random token (for the Plugin API) and secret (for calls to
/// the plugin). Made once; never logged, never in a Pod spec or an env value.
pub fn build_secret(input: &PodInputs, token: &str, secret: &str) -> Secret {
    let mut labels = names::labels(input.plugin, input.project, input.channel, "token");
    labels.insert(names::LABEL_INSTANCE.into(), input.instance.into());
    Secret {
        metadata: ObjectMeta {
            name: Some(names::secret_name(input.instance)),
            namespace: Some(input.namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![input.owner.clone()]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([
            (TOKEN_KEY.into(), ByteString(token.as_bytes().to_vec())),
            (SECRET_KEY.into(), ByteString(secret.as_bytes().to_vec())),
        ])),
        immutable: Some(true),
        ..Default::default()
    }
}

/// The claim holding /data of a (plugin, chat): owned by the chat, so it outlives Pods and
/// instances and goes with the chat.
pub fn build_data_claim(
    plugin: &str,
    project: &str,
    channel: &str,
    namespace: &str,
    owner: OwnerReference,
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(names::data_claim_name(plugin, channel)),
            namespace: Some(namespace.into()),
            labels: Some(names::labels(plugin, project, channel, "data")),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".into(),
                    Quantity(DATA_SIZE.into()),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        status: None,
    }
}

fn mount(name: &str, path: &str, read_only: bool, sub_path: Option<String>) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        sub_path,
        ..Default::default()
    }
}

fn env_value(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "plugins.loop.dev/v1alpha1".into(),
            kind: "PluginInstance".into(),
            name: "echo-general".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn inputs<'a>(command: &'a [String]) -> PodInputs<'a> {
        PodInputs {
            instance: "echo-general",
            namespace: "team",
            owner: owner(),
            plugin: "echo",
            project: "proj",
            channel: "general",
            image: "registry.local/echo@sha256:0123",
            command,
            memory: Some(Quantity("128Mi".into())),
            cpu: Some(Quantity("500m".into())),
            api_url: "http://api:8080",
            working_tree: None,
            run_as: RunAs {
                uid: 1234,
                gid: Some(2345),
            },
            image_pull_secret: None,
            gate: None,
        }
    }

    fn env_of(pod: &Pod) -> Vec<EnvVar> {
        pod.spec.as_ref().unwrap().containers[0]
            .env
            .clone()
            .unwrap()
    }

    #[test]
    fn every_container_runs_locked_down_as_the_images_user() {
        let command = vec!["/bin/echo-plugin".to_string()];
        let mut input = inputs(&command);
        input.gate = Some(gate());
        let pod = build_pod(&input).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let psc = spec.security_context.as_ref().unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.run_as_user, Some(1234));
        assert_eq!(psc.run_as_group, Some(2345));
        assert_eq!(psc.fs_group, Some(2345));
        assert_eq!(
            psc.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        let init = spec.init_containers.as_ref().unwrap();
        let containers = [("plugin", &spec.containers[0]), ("install-gate", &init[0])];
        for (name, container) in containers {
            assert_eq!(container.name, name);
            let sc = container.security_context.as_ref().unwrap();
            assert_eq!(sc.run_as_non_root, Some(true), "{name}");
            assert_eq!(sc.run_as_user, Some(1234), "{name}");
            assert_eq!(sc.run_as_group, Some(2345), "{name}");
            assert_eq!(
                sc.capabilities.as_ref().unwrap().drop,
                Some(vec!["ALL".to_string()]),
                "{name}"
            );
            assert_eq!(sc.capabilities.as_ref().unwrap().add, None, "{name}");
            assert_eq!(sc.read_only_root_filesystem, Some(true), "{name}");
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{name}");
            assert_eq!(sc.privileged, None, "{name}");
            assert_eq!(
                sc.seccomp_profile.as_ref().unwrap().type_,
                "RuntimeDefault",
                "{name}"
            );
        }
        // Never root, whatever the image says.
        input.run_as = RunAs {
            uid: 0,
            gid: Some(0),
        };
        assert_eq!(build_pod(&input), Err(PodError::RunsAsRoot("echo".into())));
    }

    #[test]
    fn the_pod_is_locked_down() {
        let pod = build_pod(&inputs(&[])).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.automount_service_account_token, Some(false));
        let psc = spec.security_context.as_ref().unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(
            psc.seccomp_profile.as_ref().unwrap().type_,
            "RuntimeDefault"
        );
        let csc = spec.containers[0].security_context.as_ref().unwrap();
        assert_eq!(csc.allow_privilege_escalation, Some(false));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("registry.local/echo@sha256:0123")
        );
        let res = spec.containers[0].resources.as_ref().unwrap();
        assert_eq!(res.limits, res.requests);
        assert_eq!(
            res.limits.as_ref().unwrap()["memory"],
            Quantity("128Mi".into())
        );
    }

    #[test]
    fn token_and_secret_come_from_files_never_env_values() {
        let pod = build_pod(&inputs(&[])).unwrap();
        let env = env_of(&pod);
        let get = |n: &str| {
            env.iter()
                .find(|e| e.name == n)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(
            get("LOOP_PLUGIN_TOKEN_FILE").unwrap(),
            "/var/run/loop-plugin/token"
        );
        assert_eq!(
            get("LOOP_PLUGIN_SECRET_FILE").unwrap(),
            "/var/run/loop-plugin/secret"
        );
        assert_eq!(get("LOOP_PLUGIN_PORT").unwrap(), "8080");
        let secret = build_secret(&inputs(&[]), "tok-123", "sec-456");
        let spec_json = serde_json::to_string(&pod).unwrap();
        assert!(!spec_json.contains("tok-123") && !spec_json.contains("sec-456"));
        assert_eq!(secret.immutable, Some(true));
    }

    fn gate() -> GateInputs<'static> {
        GateInputs {
            image: "registry.local/loop-plugins@sha256:abcd",
            policy_json: "{\"version\":1}".into(),
            chat: "team/general".into(),
            audit: "/data/.loop-audit".into(),
        }
    }

    /// The whole Pod, Secret and /data claim, as a reviewer reads them: a change to any field
    /// shows in the diff of `src/snapshots/` (`INSTA_UPDATE=always cargo test` rewrites them).
    #[test]
    fn built_objects_snapshot() {
        let command = vec!["/echo-plugin".to_string()];
        let mut input = inputs(&command);
        input.image_pull_secret = Some("echo-general-pull");
        input.working_tree = None;
        insta::assert_yaml_snapshot!("pod", build_pod(&input).unwrap());
        input.gate = Some(gate());
        insta::assert_yaml_snapshot!("pod_gated", build_pod(&input).unwrap());
        insta::assert_yaml_snapshot!("secret", build_secret(&input, "<token>", "<secret>"));
        // The claim belongs to the chat, as `chat` makes it: it outlives Pods and instances.
        let chat = OwnerReference {
            kind: "Channel".into(),
            name: "general".into(),
            uid: "uid-general".into(),
            ..owner()
        };
        insta::assert_yaml_snapshot!(
            "data_claim",
            build_data_claim("echo", "proj", "general", "team", chat)
        );
    }

    #[test]
    fn the_gate_wraps_the_plugins_own_command() {
        let command = vec!["/bin/echo-plugin".to_string(), "--serve".to_string()];
        let mut input = inputs(&command);
        input.gate = Some(gate());
        let pod = build_pod(&input).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let line = spec.containers[0].command.clone().unwrap().join(" ");
        assert!(
            line.starts_with(
                "/loop-gate/loop-plugins gate --policy /loop-gate/policy.json --plugin echo --chat team/general --termination-log /dev/termination-log"
            ),
            "{line}"
        );
        assert!(line.ends_with(" -- /bin/echo-plugin --serve"), "{line}");
        assert!(line.contains("--audit /data/.loop-audit"), "{line}");
        let init = &spec.init_containers.as_ref().unwrap()[0];
        assert_eq!(
            init.command.clone().unwrap(),
            [
                "/loop-plugins",
                "install-gate",
                "/loop-gate/loop-plugins",
                "--policy",
                "/loop-gate/policy.json"
            ]
        );
        let env = init.env.clone().unwrap();
        assert_eq!(env[0].name, GATE_POLICY_ENV);
        assert_eq!(env[0].value.as_deref(), Some("{\"version\":1}"));
        // The gate's dir is read-only to the plugin.
        let mounts = spec.containers[0].volume_mounts.clone().unwrap();
        let gate_mount = mounts
            .iter()
            .find(|m| m.mount_path == "/loop-gate")
            .unwrap();
        assert_eq!(gate_mount.read_only, Some(true));
    }

    #[test]
    fn the_pod_runs_as_the_images_user_and_pulls_with_the_registry_secret() {
        let mut input = inputs(&[]);
        input.image_pull_secret = Some("echo-general-pull");
        let pod = build_pod(&input).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        let psc = spec.security_context.as_ref().unwrap();
        assert_eq!(
            (psc.run_as_user, psc.run_as_group, psc.fs_group),
            (Some(1234), Some(2345), Some(2345))
        );
        assert_eq!(
            spec.image_pull_secrets.clone().unwrap()[0].name,
            "echo-general-pull"
        );
        assert!(
            build_pod(&inputs(&[]))
                .unwrap()
                .spec
                .unwrap()
                .image_pull_secrets
                .is_none()
        );
    }

    #[test]
    fn the_gate_needs_a_command() {
        let mut input = inputs(&[]);
        input.gate = Some(gate());
        assert_eq!(
            build_pod(&input),
            Err(PodError::GateWithoutCommand("echo".into()))
        );
    }

    #[test]
    fn a_changed_spec_makes_a_new_pod_name() {
        let a = build_pod(&inputs(&[])).unwrap();
        let mut other = inputs(&[]);
        other.image = "registry.local/echo@sha256:4567";
        let b = build_pod(&other).unwrap();
        assert_ne!(a.metadata.name, b.metadata.name);
        assert_eq!(
            a.metadata.name,
            build_pod(&inputs(&[])).unwrap().metadata.name
        );
    }
}
