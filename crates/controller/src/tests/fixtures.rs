//! Small builders for reconcile tests: a world of objects as the reflector stores would hold
//! them, and a Context whose client talks to the mocked API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{Request, Response};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use prometheus_client::registry::Registry;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::verifier::ApiServer;
use crate::context::{Context, Options, Stores};
use crate::metrics::Metrics;
use index::compact::Compact;
use model::config::{PluginConfig, ScheduleEntry};
use model::resources::{
    ADMITTED, AgentRun, App, Channel, ChannelKind, ChannelSpec, Condition, ConditionStatus,
    HOST_CONFIG_NAME, HostConfig, HostConfigSpec, HostPlugins, ImageStatus, Plugin, PluginInstance,
    PluginInstanceSpec, PluginStatus, Project, ProjectSpec, ProjectTrust,
};

pub const NS: &str = "team";

/// Every object the stores hold, as the API server would serve them.
#[derive(Clone, Default)]
pub struct World {
    pub host: Option<HostConfig>,
    pub plugins: Vec<Plugin>,
    pub projects: Vec<Project>,
    pub trusts: Vec<ProjectTrust>,
    pub channels: Vec<Channel>,
    pub instances: Vec<PluginInstance>,
    pub pods: Vec<Pod>,
    pub secrets: Vec<Secret>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub cronjobs: Vec<CronJob>,
    /// Secrets of the controller's namespace (HostConfig's registry credentials).
    pub registry_secrets: Vec<Secret>,
    pub runs: Vec<AgentRun>,
    pub jobs: Vec<Job>,
    pub network_policies: Vec<NetworkPolicy>,
}

impl World {
    /// Plugins on, the echo plugin installed, a project that trusts a config enabling it with
    /// its `tick` task, and a desktop channel `general`.
    pub fn echo() -> Self {
        World {
            host: Some(host()),
            plugins: vec![echo_plugin()],
            projects: vec![project(true)],
            trusts: vec![trust(true)],
            channels: vec![channel("general")],
            ..Default::default()
        }
    }

    /// A Context over stores holding this world, and the mocked API server its client calls.
    pub fn context(&self) -> (Arc<Context>, ApiServer) {
        self.context_started(jiff::Timestamp::now())
    }

    /// [`World::context`] for a controller that started reconciling at `started`.
    pub fn context_started(&self, started: jiff::Timestamp) -> (Arc<Context>, ApiServer) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let stores = Stores {
            host: store(self.host.iter().cloned()),
            plugins: store(self.plugins.iter().cloned()),
            projects: store(self.projects.iter().cloned()),
            project_trusts: store(self.trusts.iter().cloned()),
            channels: store(self.channels.iter().cloned()),
            instances: store(self.instances.iter().cloned()),
            pods: store(self.pods.iter().cloned()),
            // As the watches keep them: compact.
            secrets: store(self.secrets.iter().map(Compact::of)),
            claims: store(self.claims.iter().map(Compact::of)),
            cronjobs: store(self.cronjobs.iter().map(Compact::of)),
            registry_secrets: store(self.registry_secrets.iter().cloned()),
            runs: store(self.runs.iter().cloned()),
            jobs: store(self.jobs.iter().cloned()),
            network_policies: store(self.network_policies.iter().cloned()),
        };
        let options = Options {
            self_image: format!("registry.local/loop-plugins@sha256:{}", "1".repeat(64)),
            api_url: "http://api.loop-plugins-system:8080".into(),
            namespace: "loop-plugins-system".into(),
            concurrency: 4,
            writes_in_flight: 8,
        };
        let metrics = Metrics::new(&mut Registry::default());
        let mut ctx = Context::new(client, metrics, stores, options);
        ctx.started = started;
        (Arc::new(ctx), ApiServer(handle))
    }

    pub fn channel(&self, name: &str) -> Arc<Channel> {
        Arc::new(
            self.channels
                .iter()
                .find(|c| c.name_any() == name)
                .expect("the channel is in the world")
                .clone(),
        )
    }

    pub fn instance(&self, name: &str) -> Arc<PluginInstance> {
        Arc::new(
            self.instances
                .iter()
                .find(|i| i.name_any() == name)
                .expect("the instance is in the world")
                .clone(),
        )
    }
}

fn store<K>(objects: impl Iterator<Item = K>) -> Store<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    reader
}

/// `object` as the API server serves it: a uid, a resourceVersion, a generation.
pub fn served<K: Resource>(mut object: K) -> K {
    let name = object.meta().name.clone().unwrap_or_default();
    let meta = object.meta_mut();
    meta.uid = Some(format!("uid-{name}"));
    meta.resource_version.get_or_insert_with(|| "1".into());
    meta.generation.get_or_insert(1);
    object
}

/// The object a write's JSON body describes, as the API server then serves it.
pub fn from_body<K: Resource + DeserializeOwned>(body: &Value) -> K {
    served(serde_json::from_value(body.clone()).expect("the body is the object"))
}

/// An object as JSON, for answers.
pub fn to_json<K: Serialize>(object: &K) -> Value {
    serde_json::to_value(object).expect("objects serialize")
}

pub fn host() -> HostConfig {
    served(HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                idle_timeout: "10m".into(),
                ..Default::default()
            },
            ..Default::default()
        },
    ))
}

/// The echo plugin's manifest: a `tick` task, a composer switch and live control.
pub fn echo_manifest() -> Value {
    json!({
        "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
        "capabilities": ["schedule", "ui.composer_switch", "live.control"],
        "actions": [
            { "id": "ping" },
            { "id": "tick", "default_schedule": { "type": "cron", "schedule": "*/5 * * * *" } },
        ],
        "ui": {
            "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg", "title": "Mode is off" }],
        },
        "live": { "control": ["interrupt"] },
        "settings": { "count": { "type": "integer", "minimum": 1, "maximum": 10, "default": 3 } },
        "resources": { "memory": "64m", "cpus": 0.25 },
    })
}

/// The echo plugin, every capability approved.
pub fn echo_plugin() -> Plugin {
    plugin_with(
        echo_manifest(),
        &["schedule", "ui.composer_switch", "live.control"],
    )
}

/// The echo plugin declaring egress to `10.20.0.0/16:5432`, with `network.egress` approved
/// (or not).
pub fn egress_plugin(approved: bool) -> Plugin {
    let mut manifest = echo_manifest();
    manifest["capabilities"]
        .as_array_mut()
        .expect("a list")
        .push("network.egress".into());
    manifest["egress"] = json!([{ "cidr": "10.20.0.0/16", "ports": [5432] }]);
    let mut approve = vec!["schedule", "ui.composer_switch", "live.control"];
    if approved {
        approve.push("network.egress");
    }
    plugin_with(manifest, &approve)
}

/// The chart's NetworkPolicy for plugin Pods in [`NS`]: their egress closed but for its rules.
pub fn closing_policy() -> NetworkPolicy {
    served(
        serde_json::from_value(json!({
            "metadata": { "name": "loop-plugins-plugins", "namespace": NS },
            "spec": {
                "podSelector": { "matchLabels": { "app.kubernetes.io/name": "loop-plugin" } },
                "policyTypes": ["Ingress", "Egress"],
            },
        }))
        .expect("a NetworkPolicy"),
    )
}

pub fn plugin_with(manifest: Value, approved: &[&str]) -> Plugin {
    let mut plugin = Plugin::from_manifest(
        &manifest.to_string(),
        &format!("registry.local/echo@sha256:{}", "0".repeat(64)),
        vec!["/echo-plugin".into()],
        false,
    )
    .expect("a valid manifest");
    plugin.spec.approved_capabilities = approved.iter().map(|c| c.to_string()).collect();
    admitted(served(plugin))
}

/// `plugin` as admission leaves an admitted one: every stage passed for this generation and
/// digest, the image's facts recorded (USER 65532, its command).
pub fn admitted(mut plugin: Plugin) -> Plugin {
    let digest = plugin.pinned_digest().map(String::from);
    plugin.status = Some(PluginStatus {
        observed_generation: plugin.metadata.generation,
        digest: digest.clone(),
        image: Some(ImageStatus {
            digest: digest.unwrap_or_default(),
            run_as_user: 65532,
            run_as_group: None,
            command: plugin.spec.command.clone(),
            plugin_json_sha256: "0".repeat(64),
            manifest_hash: format!("sha256:{}", "0".repeat(64)),
            publisher_key: None,
        }),
        conditions: vec![Condition {
            r#type: ADMITTED.into(),
            status: ConditionStatus::True,
            observed_generation: plugin.metadata.generation,
            last_transition_time: "2026-01-01T00:00:00Z".into(),
            reason: "Admitted".into(),
            message: "every stage passed".into(),
        }],
        ..Default::default()
    });
    plugin
}

/// The project `proj`, whose config enables echo (or not) with its `tick` task.
pub fn project(enabled: bool) -> Project {
    project_with(echo_config(enabled))
}

/// The owner's trust in [`project`]'s config.
pub fn trust(enabled: bool) -> ProjectTrust {
    trust_with(echo_config(enabled))
}

fn echo_config(enabled: bool) -> PluginConfig {
    PluginConfig {
        enabled: Some(enabled),
        schedules: BTreeMap::from([("tick".into(), ScheduleEntry::default())]),
        ..Default::default()
    }
}

/// The project `proj` with this config for echo.
pub fn project_with(config: PluginConfig) -> Project {
    let plugins = BTreeMap::from([("echo".to_string(), config)]);
    let mut project = Project::new("proj", ProjectSpec { plugins });
    project.metadata.namespace = Some(NS.into());
    served(project)
}

/// The owner's trust in exactly this config for echo (the `ProjectTrust` of `proj`).
pub fn trust_with(config: PluginConfig) -> ProjectTrust {
    let plugins = BTreeMap::from([("echo".to_string(), config)]);
    let mut trust = ProjectTrust::of("proj", &plugins);
    trust.metadata.namespace = Some(NS.into());
    served(trust)
}

pub fn channel(name: &str) -> Channel {
    let mut channel = Channel::new(
        name,
        ChannelSpec {
            project: "proj".into(),
            kind: ChannelKind::Channel,
            parent: None,
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    );
    channel.metadata.namespace = Some(NS.into());
    served(channel)
}

/// The instance of echo in `general`, as the chat reconciler makes it.
pub fn instance() -> PluginInstance {
    let mut instance = PluginInstance::new(
        "echo-general",
        PluginInstanceSpec {
            plugin: "echo".into(),
            channel: "general".into(),
            project: "proj".into(),
        },
    );
    instance.metadata.namespace = Some(NS.into());
    instance.metadata.labels = Some(model::names::labels("echo", "proj", "general", "instance"));
    served(instance)
}

/// The facts an instance's reconcile reads of [`instance`] in [`World::echo`], with `plugin`
/// installed: the channel `general` and the project there, no Secret, Pod or policy yet,
/// the controller started at `started`.
pub fn instance_facts(
    instance: &PluginInstance,
    plugin: Plugin,
    started: jiff::Timestamp,
) -> crate::instance::decide::Facts<'_> {
    let manifest = index::manifests::Manifests::default().of(&plugin);
    crate::instance::decide::Facts {
        instance,
        name: "echo-general",
        namespace: NS,
        host: host().spec,
        plugin: Some((Arc::new(plugin), manifest)),
        channel: Some(Arc::new(channel("general"))),
        parent_channel: None,
        project: Some(Arc::new(project(true))),
        pods: vec![],
        policies: vec![],
        secret: None,
        pull_secret: None,
        pull_credentials: None,
        self_image: "registry.local/loop-plugins@sha256:1111",
        api_url: "http://api:8080".into(),
        started,
    }
}

/// The API path of a namespaced object of ours.
pub fn path(resource: &str, name: &str) -> String {
    format!("{}/{name}", collection(resource))
}

/// The API path of a namespaced collection.
pub fn collection(resource: &str) -> String {
    let group = match resource {
        "cronjobs" => "/apis/batch/v1",
        "networkpolicies" => "/apis/networking.k8s.io/v1",
        "agentruns" | "channels" | "plugininstances" | "projects" => {
            "/apis/plugins.loop.dev/v1alpha1"
        }
        _ => "/api/v1",
    };
    format!("{group}/namespaces/{NS}/{resource}")
}

/// The API path of the Plugin `name` (cluster-scoped).
pub fn plugin_path(name: &str) -> String {
    format!("/apis/plugins.loop.dev/v1alpha1/plugins/{name}")
}
