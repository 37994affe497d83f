//! The baseline: a bare client writing what the controller writes to converge the same world,
//! on the same API server, under a ServiceAccount of its own bound to the controller's role (so
//! its requests take the same path: authentication, RBAC, the same priority level), with the
//! same number of requests in flight at most, as fast as it can.
//!
//! The objects are the controller's own, built by its pure builders (`controller::pod`,
//! `controller::cronjob`) from the controller's own plan of each chat, in namespaces of their
//! own (`bc-NN` for plain creates, `ba-NN` for server-side apply), with two differences that
//! keep them out of the controller's and the API server's watches and leave their sizes as
//! they are: `app.kubernetes.io/managed-by` says `bare-clients` (as long as `loop-plugins`),
//! and the chat that owns a child is a ConfigMap whose name is longer by as much as its owner
//! reference is shorter. Statuses are written on mirrors of the Projects and Channels, which
//! are deleted before the controller starts, so it never sees them.
//!
//! A chat's writes go in the controller's order, one after the other: each enabled plugin's
//! /data claim and instance, the CronJobs, the chat's status, then each instance's Secret and
//! status; chats (and projects' statuses) run `concurrency` at a time.

use super::procstat::CpuMeter;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use rand::Rng;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use controller::cronjob::{CronJobInputs, build_cronjob};
use controller::plan::{ChatInputs, ChatPlan, PluginView, plan_chat};
use controller::pod::{PodInputs, build_data_claim, build_secret};
use model::contract::RunAs;
use model::names;
use model::resources::{
    Channel, HostConfigSpec, Plugin, PluginInstance, PluginInstanceSpec, Project, ProjectTrust,
};

use super::knobs::Sizes;
use super::world::{self, Chat, PROJECT};

/// How the bare client writes objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// POST each object, merge-patch each status: the API server's cheapest path.
    Create,
    /// Server-side apply of claims, instances, CronJobs and statuses, POST of Secrets: what
    /// the controller did before it made absent objects with a create and wrote statuses with
    /// a merge patch; kept as the second baseline, the cost of applying everything.
    Apply,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Create => "create",
            Mode::Apply => "apply",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Mode::Create => "bc",
            Mode::Apply => "ba",
        }
    }
}

/// The label value that keeps the baseline's objects out of every watch of ours.
const BARE: &str = "bare-clients";
/// The owner ConfigMap's name is the chat's and this, making up for the owner reference's
/// shorter apiVersion and kind ("v1" + "ConfigMap" against "plugins.loop.dev/v1alpha1" +
/// "Channel": 21 characters).
const OWNER_PAD: &str = "-oooooooooooooooooooo";
const FIELD_MANAGER: &str = "bare-client";

/// What one run of the baseline did.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub mode: Mode,
    /// Objects made (claims, instances, Secrets, CronJobs).
    pub objects: usize,
    /// Every write: the objects and the statuses.
    pub writes: usize,
    pub elapsed: Duration,
    /// The control plane's CPU seconds in the timed part, by process.
    pub cpu: Vec<(String, f64)>,
}

impl Outcome {
    pub fn objects_per_second(&self) -> f64 {
        self.objects as f64 / self.elapsed.as_secs_f64()
    }

    pub fn writes_per_second(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }
}

/// A chat of the baseline and what the controller's plan gives it.
struct Job {
    chat: Chat,
    owner: OwnerReference,
    plan: ChatPlan,
}

/// The world's host config, plugins and project as the plan reads them.
struct Inputs {
    host: HostConfigSpec,
    plugins: Vec<Plugin>,
    project: Project,
    trust: ProjectTrust,
}

fn relabel<K: Resource>(mut object: K, namespace: &str) -> K {
    let meta = object.meta_mut();
    meta.namespace = Some(namespace.into());
    if let Some(labels) = meta.labels.as_mut() {
        labels.insert(names::LABEL_MANAGED_BY.into(), BARE.into());
    }
    object
}

fn plan(inputs: &Inputs, chat: &Chat) -> ChatPlan {
    let manifests: Vec<_> = inputs
        .plugins
        .iter()
        .map(|p| model::manifest::from_value(&p.spec.manifest.to_json()).ok())
        .collect();
    let names: Vec<String> = inputs.plugins.iter().map(|p| p.name_any()).collect();
    let views: Vec<PluginView> = names
        .iter()
        .zip(&manifests)
        .map(|(name, manifest)| PluginView {
            name,
            manifest: manifest.as_ref(),
            admitted: true,
            may_schedule: true,
            awaiting_admission: false,
        })
        .collect();
    plan_chat(&ChatInputs {
        channel: &world::channel(chat).spec,
        project: Some(model::resolve::ProjectView::new(
            &inputs.project,
            Some(&inputs.trust),
        )),
        host: &inputs.host,
        plugins: &views,
        existing_cronjobs: &Default::default(),
        applied: &[],
        now: jiff::Timestamp::now(),
    })
}

/// Makes the namespaces, the owners and the mirrors for `mode` (not timed).
async fn prepare(
    admin: &Client,
    sizes: &Sizes,
    mode: Mode,
    api_url: &str,
) -> anyhow::Result<(Vec<Job>, Vec<String>)> {
    let plugin_ids = world::plugin_ids(sizes);
    let inputs = Inputs {
        host: world::host_config(api_url, 50).spec,
        plugins: plugin_ids
            .iter()
            .map(|id| world::plugin(id))
            .collect::<anyhow::Result<_>>()?,
        project: world::project("x", world::project_config(&plugin_ids, true)),
        trust: ProjectTrust::of(PROJECT, &world::project_config(&plugin_ids, true)),
    };
    let namespaces: Vec<String> = (0..sizes.projects)
        .map(|p| format!("{}-{p:02}", mode.prefix()))
        .collect();
    world::namespaces_made(admin, &namespaces).await?;
    let chats: Vec<Chat> = world::chats(sizes)
        .into_iter()
        .map(|mut c| {
            c.namespace = c.namespace.replacen("sc", mode.prefix(), 1);
            c
        })
        .collect();
    world::apply_all(
        admin,
        namespaces
            .iter()
            .map(|ns| world::project(ns, world::project_config(&plugin_ids, true)))
            .collect(),
        16,
    )
    .await?;
    world::apply_all(admin, chats.iter().map(world::channel).collect(), 16).await?;
    let owners: Vec<ConfigMap> = chats
        .iter()
        .map(|c| {
            let mut owner = ConfigMap::default();
            owner.metadata.name = Some(format!("{}{OWNER_PAD}", c.name));
            owner.metadata.namespace = Some(c.namespace.clone());
            owner
        })
        .collect();
    let made: Vec<anyhow::Result<ConfigMap>> = futures::stream::iter(owners)
        .map(|owner| async move {
            let api: Api<ConfigMap> = Api::namespaced(admin.clone(), &owner.namespace().unwrap());
            world::apply(&api, &owner).await
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut owner_refs = BTreeMap::new();
    for owner in made {
        let owner = owner?;
        let reference = owner
            .controller_owner_ref(&())
            .context("a ConfigMap has a uid")?;
        owner_refs.insert(
            (owner.namespace().unwrap_or_default(), owner.name_any()),
            reference,
        );
    }
    let jobs = chats
        .into_iter()
        .map(|chat| {
            let key = (chat.namespace.clone(), format!("{}{OWNER_PAD}", chat.name));
            Job {
                owner: owner_refs[&key].clone(),
                plan: plan(&inputs, &chat),
                chat,
            }
        })
        .collect();
    Ok((jobs, namespaces))
}

/// Deletes the mirrors of Projects and Channels (their children are owned by the ConfigMaps,
/// so nothing else goes).
async fn clean(admin: &Client, namespaces: &[String]) -> anyhow::Result<()> {
    for ns in namespaces {
        let params = DeleteParams::default();
        Api::<Channel>::namespaced(admin.clone(), ns)
            .delete_collection(&params, &Default::default())
            .await?;
        Api::<Project>::namespaced(admin.clone(), ns)
            .delete_collection(&params, &Default::default())
            .await?;
    }
    Ok(())
}

/// Makes `object` as `mode` says.
async fn make<K>(client: &Client, mode: Mode, object: &K, create_only: bool) -> anyhow::Result<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let ns = object.namespace().context("namespaced")?;
    let name = object.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    let made = match (mode, create_only) {
        (Mode::Create, _) | (Mode::Apply, true) => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            api.create(&params, object).await
        }
        (Mode::Apply, false) => {
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(object),
            )
            .await
        }
    };
    made.with_context(|| format!("the bare client making {} {ns}/{name}", K::kind(&())))
}

/// Writes `status` on `name`, as `mode` says.
async fn status<K>(
    api: &Api<K>,
    mode: Mode,
    name: &str,
    status: serde_json::Value,
) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let written = match mode {
        Mode::Create => {
            api.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
        }
        Mode::Apply => {
            let patch = json!({
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "status": status,
            });
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
        }
    };
    written.with_context(|| format!("the bare client writing the status of {name}"))?;
    Ok(())
}

fn condition(kind: &str, reason: &str, message: &str) -> serde_json::Value {
    json!({
        "type": kind, "status": "True", "observedGeneration": 1,
        "lastTransitionTime": model::time::now_rfc3339(),
        "reason": reason, "message": message,
    })
}

/// One chat's writes, in the controller's order; returns (objects, writes).
async fn chat(
    client: &Client,
    mode: Mode,
    api_url: &str,
    self_image: &str,
    job: &Job,
) -> anyhow::Result<(usize, usize)> {
    let ns = &job.chat.namespace;
    let chat = &job.chat.name;
    let (mut objects, mut writes) = (0, 0);
    let mut instances = Vec::new();
    for plugin in &job.plan.enabled {
        let claim = build_data_claim(plugin, PROJECT, chat, ns, job.owner.clone());
        make(client, mode, &relabel(claim, ns), false).await?;
        let mut instance = PluginInstance::new(
            &names::instance_name(plugin, chat),
            PluginInstanceSpec {
                plugin: plugin.clone(),
                channel: chat.clone(),
                project: PROJECT.into(),
            },
        );
        instance.metadata.labels = Some(names::labels(plugin, PROJECT, chat, "instance"));
        instance.metadata.owner_references = Some(vec![job.owner.clone()]);
        let instance = relabel(instance, ns);
        instances.push(make(client, mode, &instance, false).await?);
        objects += 2;
    }
    for schedule in &job.plan.schedules {
        let cronjob = build_cronjob(&CronJobInputs {
            plugin: &schedule.plugin,
            project: PROJECT,
            channel: chat,
            namespace: ns,
            action: &schedule.action,
            timing: &schedule.timing,
            suspend: schedule.suspend,
            entry_hash: &schedule.entry_hash,
            entry_enabled: schedule.entry_enabled,
            self_image,
            api_url,
            owner: job.owner.clone(),
            options: &schedule.options,
            working_tree: None,
        });
        make(client, mode, &relabel(cronjob, ns), false).await?;
        objects += 1;
    }
    let channels: Api<Channel> = Api::namespaced(client.clone(), ns);
    let chat_status = json!({
        "observedGeneration": 1,
        "plugins": job.plan.enabled,
        "appliedSchedules": job.plan.applied,
        "conditions": [condition("SchedulesValid", "SchedulesApplied", "every schedule entry is applied")],
    });
    status(&channels, mode, chat, chat_status).await?;
    let instance_api: Api<PluginInstance> = Api::namespaced(client.clone(), ns);
    for instance in &instances {
        let owner = instance.controller_owner_ref(&()).context("a uid")?;
        let inputs = PodInputs {
            instance: &instance.name_any(),
            namespace: ns,
            owner,
            plugin: &instance.spec.plugin,
            project: PROJECT,
            channel: chat,
            image: "",
            command: &[],
            run_as: RunAs {
                uid: 65532,
                gid: Some(65532),
            },
            image_pull_secret: None,
            memory: None,
            cpu: None,
            api_url,
            working_tree: None,
            gate: None,
        };
        let secret = build_secret(&inputs, &random_hex(), &random_hex());
        make(client, mode, &relabel(secret, ns), true).await?;
        objects += 1;
        let idle = "no container runs until a call, an event, a switch or a schedule needs one";
        let instance_status = json!({
            "observedGeneration": 1, "phase": "Stopped",
            "conditions": [condition("Ready", "Idle", idle)],
        });
        status(&instance_api, mode, &instance.name_any(), instance_status).await?;
    }
    writes += objects + 1 + instances.len();
    Ok((objects, writes))
}

/// A project's status, as the controller writes it.
async fn project(client: &Client, mode: Mode, ns: &str, hash: &str) -> anyhow::Result<()> {
    let api: Api<Project> = Api::namespaced(client.clone(), ns);
    let body = json!({
        "observedGeneration": 1, "configHash": hash,
        "conditions": [condition("Trusted", "Trusted", "the owner trusts the current config")],
    });
    status(&api, mode, PROJECT, body).await
}

fn random_hex() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}

/// Runs the baseline in `mode`: prepares (untimed), writes everything with `concurrency`
/// chats at a time as the bare client (timed), then deletes the mirrors. `self_image` is the
/// controller's own image, which its CronJobs name. `processes` are the control plane's, whose
/// CPU time in the timed part the outcome reports.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    admin: &Client,
    bare: &Client,
    sizes: &Sizes,
    mode: Mode,
    concurrency: usize,
    api_url: &str,
    self_image: &str,
    processes: &[(&str, u32)],
) -> anyhow::Result<Outcome> {
    let (jobs, namespaces) = prepare(admin, sizes, mode, api_url).await?;
    let hash = model::config::config_hash(&world::project_config(&world::plugin_ids(sizes), true));
    let started = Instant::now();
    let cpu = CpuMeter::start(processes.iter().copied());
    // One stream of work, so at most `concurrency` requests are ever in flight.
    let work: Vec<BoxFuture<'_, anyhow::Result<(usize, usize)>>> = jobs
        .iter()
        .map(|job| chat(bare, mode, api_url, self_image, job).boxed())
        .chain(namespaces.iter().map(|ns| {
            let hash = hash.clone();
            async move {
                project(bare, mode, ns, &hash).await?;
                Ok((0, 1))
            }
            .boxed()
        }))
        .collect();
    let results: Vec<_> = futures::stream::iter(work)
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let cpu = cpu.spent();
    let (mut objects, mut writes) = (0, 0);
    for result in results {
        let (o, w) = result?;
        objects += o;
        writes += w;
    }
    clean(admin, &namespaces).await?;
    Ok(Outcome {
        mode,
        objects,
        writes,
        elapsed,
        cpu,
    })
}
