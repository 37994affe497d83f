//! How far the controller got: watches (as the admin) on what is declared and on the
//! instances and chats of the run's namespaces; what each chat should have is the controller's
//! own pure plan of it (`controller::plan::plan_chat`) over the declared objects, so the check
//! holds after any config change. Converged means every chat's status and every instance's
//! status say so, for the generation they are at, and no instance is left that no chat wants.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::CronJob;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use controller::cronjob::existing_task;
use controller::plan::{ChatInputs, ExistingTask, PluginFacts, PluginView, plan_chat};
use index::Manifests;
use model::names;
use model::resolve::ProjectView;
use model::resources::{
    AppliedSchedule, Channel, ConditionStatus, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    InstancePhase, Plugin, PluginInstance, Project, ProjectTrust,
};

/// What one chat should have, by the controller's plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatWants {
    pub namespace: String,
    pub name: String,
    /// Plugins enabled here, each with an instance and a /data claim.
    pub plugins: Vec<String>,
    /// The CronJobs it should have: name → (suspended, the entry's hash).
    pub cronjobs: BTreeMap<String, (bool, String)>,
    /// The CronJobs it may keep as they are (entries that do not parse), by name.
    pub kept: BTreeSet<String>,
    /// The entries the chat's status should record.
    pub applied: Vec<AppliedSchedule>,
    /// Plugins it waits for admission's verdict on: not converged while any.
    pub awaiting: Vec<String>,
}

/// How far the world is from converged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    pub chats: usize,
    pub chats_converged: usize,
    pub instances: usize,
    pub instances_converged: usize,
    /// Instances no chat wants (not deleted yet).
    pub unwanted_instances: usize,
}

impl Progress {
    pub fn converged(&self) -> bool {
        self.chats_converged == self.chats
            && self.instances_converged == self.instances
            && self.unwanted_instances == 0
    }

    /// Converged statuses, chats and instances together.
    pub fn done(&self) -> usize {
        self.chats_converged + self.instances_converged
    }

    pub fn total(&self) -> usize {
        self.chats + self.instances
    }
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chats {}/{}, instances {}/{}",
            self.chats_converged, self.chats, self.instances_converged, self.instances
        )?;
        if self.unwanted_instances > 0 {
            write!(f, ", {} unwanted instances", self.unwanted_instances)?;
        }
        Ok(())
    }
}

/// The watches.
pub struct Tracker {
    pub host: Store<HostConfig>,
    pub plugins: Store<Plugin>,
    pub projects: Store<Project>,
    pub project_trusts: Store<ProjectTrust>,
    pub channels: Store<Channel>,
    pub instances: Store<PluginInstance>,
    pub cronjobs: Store<CronJob>,
    namespaces: BTreeSet<String>,
    /// Each chat's wants with the versions of the objects they were planned from: progress
    /// is polled twice a second, and planning a thousand chats each time would take the CPU
    /// the run measures.
    planned: std::sync::Mutex<HashMap<(String, String), (String, ChatWants)>>,
    /// The plugins' manifests, parsed once per version as the controller does.
    manifests: Manifests,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned + Send + Sync,
    K: 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o| o.meta_mut().managed_fields = None)
        .reflect(writer)
        .applied_objects();
    tasks.push(tokio::spawn(async move {
        futures::pin_mut!(stream);
        while stream.next().await.is_some() {}
    }));
    store
}

impl Tracker {
    /// Starts the watches on the run's `namespaces` and waits for their first lists.
    pub async fn start(client: &Client, namespaces: &[String]) -> anyhow::Result<Self> {
        let mut tasks = Vec::new();
        let managed = || watcher::Config::default().labels(names::MANAGED_SELECTOR);
        let tracker = Self {
            host: reflect(Api::all(client.clone()), Default::default(), &mut tasks),
            plugins: reflect(Api::all(client.clone()), Default::default(), &mut tasks),
            projects: reflect(Api::all(client.clone()), Default::default(), &mut tasks),
            project_trusts: reflect(Api::all(client.clone()), Default::default(), &mut tasks),
            channels: reflect(Api::all(client.clone()), Default::default(), &mut tasks),
            instances: reflect(Api::all(client.clone()), managed(), &mut tasks),
            cronjobs: reflect(Api::all(client.clone()), managed(), &mut tasks),
            namespaces: namespaces.iter().cloned().collect(),
            planned: Default::default(),
            manifests: Default::default(),
            tasks,
        };
        futures::try_join!(
            tracker.host.wait_until_ready(),
            tracker.plugins.wait_until_ready(),
            tracker.projects.wait_until_ready(),
            tracker.project_trusts.wait_until_ready(),
            tracker.channels.wait_until_ready(),
            tracker.instances.wait_until_ready(),
            tracker.cronjobs.wait_until_ready(),
        )?;
        Ok(tracker)
    }

    fn ours(&self, namespace: Option<String>) -> bool {
        namespace.is_some_and(|ns| self.namespaces.contains(&ns))
    }

    fn host_spec(&self) -> HostConfigSpec {
        self.host
            .get(&reflector::ObjectRef::new(HOST_CONFIG_NAME))
            .map(|h| h.spec.clone())
            .unwrap_or_default()
    }

    /// The CronJobs by (namespace, chat).
    fn cronjobs_by_chat(&self) -> BTreeMap<(String, String), Vec<std::sync::Arc<CronJob>>> {
        let mut by_chat: BTreeMap<(String, String), Vec<std::sync::Arc<CronJob>>> = BTreeMap::new();
        for cronjob in self.cronjobs.state() {
            if let (Some(ns), Some(chat)) = (
                cronjob.namespace(),
                cronjob.labels().get(names::LABEL_CHANNEL).cloned(),
            ) {
                by_chat.entry((ns, chat)).or_default().push(cronjob);
            }
        }
        by_chat
    }

    /// What every chat of the run's namespaces should have, by the controller's plan (planned
    /// again only when an object it is planned from changed).
    pub fn wants(&self) -> Vec<ChatWants> {
        let host = self.host_spec();
        let plugins = self.plugins.state();
        let facts =
            PluginFacts::installed(&host, plugins.iter().map(|p| p.as_ref()), &self.manifests);
        let views: Vec<PluginView> = facts.iter().map(PluginFacts::view).collect();
        let cronjobs = self.cronjobs_by_chat();
        let mut global: Vec<String> = plugins
            .iter()
            .map(|p| version_of(Some(p.as_ref())))
            .collect();
        global.sort();
        global.push(version_of(self.host.state().first().map(|h| h.as_ref())));
        let global = global.concat();
        let mut planned = self.planned.lock().expect("the plans' lock");
        let mut all = Vec::new();
        for chat in self.channels.state() {
            if !self.ours(chat.namespace()) || chat.meta().deletion_timestamp.is_some() {
                continue;
            }
            let ns = chat.namespace().unwrap_or_default();
            let name = chat.name_any();
            let project = self
                .projects
                .get(&reflector::ObjectRef::new(&chat.spec.project).within(&ns));
            let trust = self
                .project_trusts
                .get(&reflector::ObjectRef::new(&chat.spec.project).within(&ns));
            let theirs = cronjobs
                .get(&(ns.clone(), name.clone()))
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut version = format!(
                "{global}{}{}{}",
                version_of(Some(chat.as_ref())),
                version_of(project.as_deref()),
                version_of(trust.as_deref())
            );
            // The store's order is not stable: the CronJobs' versions go in sorted.
            let mut versions: Vec<String> = theirs
                .iter()
                .map(|c| version_of(Some(c.as_ref())))
                .collect();
            versions.sort();
            version.extend(versions);
            let key = (ns, name);
            if let Some((at, wants)) = planned.get(&key)
                && *at == version
            {
                all.push(wants.clone());
                continue;
            }
            let applied = chat
                .status
                .as_ref()
                .map(|s| s.applied_schedules.clone())
                .unwrap_or_default();
            let existing: BTreeMap<(String, String), ExistingTask> =
                theirs.iter().filter_map(|c| existing_task(c)).collect();
            let plan = plan_chat(&ChatInputs {
                channel: &chat.spec,
                project: project
                    .as_deref()
                    .map(|p| ProjectView::new(p, trust.as_deref())),
                host: &host,
                plugins: &views,
                existing_cronjobs: &existing,
                applied: &applied,
                now: jiff::Timestamp::now(),
            });
            let (namespace, name) = key.clone();
            let wants = ChatWants {
                cronjobs: plan
                    .schedules
                    .iter()
                    .map(|s| {
                        (
                            names::cronjob_name(&s.plugin, &name, &s.action),
                            (s.suspend, s.entry_hash.clone()),
                        )
                    })
                    .collect(),
                kept: plan
                    .keep
                    .iter()
                    .map(|(plugin, action)| names::cronjob_name(plugin, &name, action))
                    .collect(),
                namespace,
                name,
                plugins: plan.enabled.clone(),
                applied: plan.applied.clone(),
                awaiting: plan.awaiting.clone(),
            };
            all.push(wants.clone());
            planned.insert(key, (version, wants));
        }
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        all
    }

    /// How far the world is from converged now.
    pub fn progress(&self) -> Progress {
        let wants = self.wants();
        let channels: BTreeMap<(String, String), std::sync::Arc<Channel>> = self
            .channels
            .state()
            .into_iter()
            .filter(|c| self.ours(c.namespace()))
            .map(|c| ((c.namespace().unwrap_or_default(), c.name_any()), c))
            .collect();
        let instances: BTreeMap<(String, String), std::sync::Arc<PluginInstance>> = self
            .instances
            .state()
            .into_iter()
            .filter(|i| self.ours(i.namespace()))
            .map(|i| ((i.namespace().unwrap_or_default(), i.name_any()), i))
            .collect();
        let cronjobs = self.cronjobs_by_chat();
        let mut progress = Progress::default();
        let mut wanted = BTreeSet::new();
        for want in &wants {
            progress.chats += 1;
            let key = (want.namespace.clone(), want.name.clone());
            let theirs = cronjobs.get(&key).map(Vec::as_slice).unwrap_or_default();
            if channels.get(&key).is_some_and(|c| chat_converged(c, want))
                && cronjobs_match(theirs, want)
            {
                progress.chats_converged += 1;
            }
            for plugin in &want.plugins {
                progress.instances += 1;
                let name = names::instance_name(plugin, &want.name);
                let key = (want.namespace.clone(), name);
                if instances.get(&key).is_some_and(|i| instance_converged(i)) {
                    progress.instances_converged += 1;
                }
                wanted.insert(key);
            }
        }
        progress.unwanted_instances = instances.keys().filter(|k| !wanted.contains(*k)).count();
        progress
    }

    /// Waits until converged, printing progress every `every`; fails after `limit`. Returns
    /// how long it took.
    pub async fn wait_converged(
        &self,
        what: &str,
        limit: Duration,
        every: Duration,
    ) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let mut last_print = Instant::now();
        loop {
            let progress = self.progress();
            if progress.converged() {
                return Ok(started.elapsed());
            }
            if started.elapsed() > limit {
                bail!("{what}: not converged after {limit:?}: {progress}");
            }
            if last_print.elapsed() >= every {
                eprintln!(
                    "  {what}: {progress} after {:.0} s",
                    started.elapsed().as_secs_f64()
                );
                last_print = Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// An object's identity and version, `-` for none: what a plan was made from.
fn version_of<K: Resource>(object: Option<&K>) -> String {
    match object {
        Some(o) => format!(
            "{}@{};",
            o.meta().uid.as_deref().unwrap_or_default(),
            o.meta().resource_version.as_deref().unwrap_or_default()
        ),
        None => "-;".into(),
    }
}

/// A chat's status records its plan for its generation.
pub fn chat_converged(chat: &Channel, want: &ChatWants) -> bool {
    let Some(status) = &chat.status else {
        return false;
    };
    let sorted = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
    want.awaiting.is_empty()
        && status.observed_generation == chat.metadata.generation
        && sorted(&status.plugins) == sorted(&want.plugins)
        && status.applied_schedules == want.applied
        && status
            .conditions
            .iter()
            .any(|c| c.r#type == "SchedulesValid" && c.status == ConditionStatus::True)
}

/// A chat's CronJobs are the ones its plan applies, each as planned, and no other (but
/// those it keeps as they are).
pub fn cronjobs_match(cronjobs: &[std::sync::Arc<CronJob>], want: &ChatWants) -> bool {
    let live: BTreeMap<String, &CronJob> = cronjobs
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| (c.name_any(), c.as_ref()))
        .collect();
    let planned = want.cronjobs.iter().all(|(name, (suspend, hash))| {
        live.get(name).is_some_and(|c| {
            c.spec.suspend.unwrap_or(false) == *suspend
                && c.annotations().get(controller::cronjob::ANNOTATION_ENTRY) == Some(hash)
        })
    });
    planned
        && live
            .keys()
            .all(|name| want.cronjobs.contains_key(name) || want.kept.contains(name))
}

/// An instance's status says where its container is for its generation, and nothing stops it
/// from running.
pub fn instance_converged(instance: &PluginInstance) -> bool {
    let Some(status) = &instance.status else {
        return false;
    };
    instance.metadata.deletion_timestamp.is_none()
        && status.observed_generation == instance.metadata.generation
        && matches!(
            status.phase,
            Some(InstancePhase::Stopped | InstancePhase::Running)
        )
        && status
            .conditions
            .iter()
            .any(|c| c.r#type == "Ready" && c.status == ConditionStatus::True)
}
