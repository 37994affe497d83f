//! One Pod's life on the stand-in: its address and volumes, its init containers one after the
//! other, then its containers; its status after every change; and, once it is deleted, its
//! processes stopped and the Pod deleted for good.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher::watch_object;
use kube::{Api, Resource, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::Shared;
use super::container::{self, ContainerRun, Event};
use super::env::{self, EnvError, PodFacts};
use super::identity;
use super::incluster;
use super::status::{ContainerRecord, Phase, PodRecord, RestartPolicy, pod_status};
use super::volumes::{self, Fetcher, VolumeDirs, VolumeError};

/// The folder where a Pod's container logs go: `<root>/logs/<namespace>/<pod>/<container>.log`.
pub fn log_path(root: &Path, namespace: &str, pod: &str, container: &str) -> PathBuf {
    root.join("logs")
        .join(namespace)
        .join(pod)
        .join(format!("{container}.log"))
}

/// Runs the Pod whose latest state `pods` carries (None once it is gone from the cluster).
pub async fn run(shared: Arc<Shared>, mut pods: watch::Receiver<Option<Pod>>) {
    let Some(pod) = pods.borrow_and_update().clone() else {
        return;
    };
    let mut worker = Worker::new(shared, pod);
    if !is_deleting(&worker.pod) && !is_finished(&worker.pod) {
        tokio::select! {
            () = worker.live() => {}
            () = deleted(&mut pods) => {}
        }
    }
    // Ended (or never to run again): wait for the deletion, then clean up.
    deleted(&mut pods).await;
    let still_there = pods.borrow().clone();
    worker.finish(still_there).await;
}

/// Completes once the Pod has a deletionTimestamp or is gone.
async fn deleted(pods: &mut watch::Receiver<Option<Pod>>) {
    let _ = pods
        .wait_for(|pod| pod.as_ref().is_none_or(is_deleting))
        .await;
}

fn is_deleting(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

struct Worker {
    shared: Arc<Shared>,
    pod: Pod,
    api: Api<Pod>,
    uid: String,
    namespace: String,
    name: String,
    dir: PathBuf,
    facts: PodFacts,
    record: PodRecord,
    last_reported: Option<serde_json::Value>,
    stop: watch::Sender<bool>,
    containers: JoinSet<()>,
    events: mpsc::Sender<Event>,
    events_rx: mpsc::Receiver<Event>,
}

impl Worker {
    fn new(shared: Arc<Shared>, pod: Pod) -> Self {
        let uid = pod.uid().unwrap_or_default();
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api = Api::namespaced(shared.client.clone(), &namespace);
        let dir = shared.root.join("pods").join(&uid);
        let spec = pod.spec.clone().unwrap_or_default();
        let record = PodRecord {
            pod_ip: String::new(),
            host_ip: "127.0.0.1".into(),
            start_time: Timestamp::now(),
            restart_policy: RestartPolicy::parse(spec.restart_policy.as_deref()),
            init: spec
                .init_containers
                .iter()
                .flatten()
                .map(|c| ContainerRecord::new(&c.name, c.image.as_deref().unwrap_or_default()))
                .collect(),
            main: spec
                .containers
                .iter()
                .map(|c| ContainerRecord::new(&c.name, c.image.as_deref().unwrap_or_default()))
                .collect(),
            failure: None,
            transitions: Default::default(),
        };
        let facts = PodFacts {
            name: name.clone(),
            namespace: namespace.clone(),
            uid: uid.clone(),
            node_name: shared.node.clone(),
            service_account: spec
                .service_account_name
                .clone()
                .unwrap_or_else(|| "default".into()),
            pod_ip: String::new(),
            host_ip: "127.0.0.1".into(),
            labels: pod.labels().clone(),
            annotations: pod.annotations().clone(),
        };
        let (events, events_rx) = mpsc::channel(64);
        Self {
            shared,
            pod,
            api,
            uid,
            namespace,
            name,
            dir,
            facts,
            record,
            last_reported: None,
            stop: watch::channel(false).0,
            containers: JoinSet::new(),
            events,
            events_rx,
        }
    }

    /// The file a container's termination message goes to.
    fn termination_log(&self, container: &str) -> PathBuf {
        self.dir.join("termination").join(container)
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Runs the Pod until its containers end for good.
    async fn live(&mut self) {
        let ip = self.shared.addresses.allocate(&self.uid);
        self.record.pod_ip = ip.to_string();
        self.facts.pod_ip = ip.to_string();
        self.report().await;

        let Some(dirs) = self.prepare_volumes().await else {
            return;
        };
        let spec = self.pod.spec.clone().unwrap_or_default();

        let init_policy = match self.record.restart_policy {
            RestartPolicy::Never => RestartPolicy::Never,
            _ => RestartPolicy::OnFailure,
        };
        for (index, container) in spec.init_containers.iter().flatten().enumerate() {
            self.start(container, &dirs, init_policy, None).await;
            loop {
                self.next_event().await;
                match &self.record.init[index].phase {
                    Phase::Terminated(e) if e.exit_code == 0 => break,
                    Phase::Terminated(_) if init_policy == RestartPolicy::Never => return,
                    _ => {}
                }
            }
        }
        for container in &spec.containers {
            let probe = probe_port(container).map(|port| SocketAddr::new(IpAddr::V4(ip), port));
            self.start(container, &dirs, self.record.restart_policy, probe)
                .await;
        }
        while !self.record.finished() {
            self.next_event().await;
        }
    }

    /// Writes the volumes, waiting for the Secrets, ConfigMaps and claims they need.
    async fn prepare_volumes(&mut self) -> Option<VolumeDirs> {
        let fetcher = Fetcher::new(self.shared.client.clone(), &self.namespace);
        let mut backoff = Duration::from_millis(200);
        loop {
            match volumes::prepare(
                &fetcher,
                &self.pod,
                &self.facts,
                &self.dir,
                &self.shared.claims_dir(),
            )
            .await
            {
                Ok(dirs) => return Some(dirs),
                Err(VolumeError::Missing { kind, name, key }) => {
                    let message = format!(
                        "waiting for {kind} {name:?}{}",
                        key.as_ref()
                            .map(|k| format!(" key {k:?}"))
                            .unwrap_or_default()
                    );
                    self.wait_all("ContainerCreating", &message).await;
                    self.object_change(kind, &name, key.is_some()).await;
                }
                Err(e @ (VolumeError::Unsupported { .. } | VolumeError::Io { .. })) => {
                    self.record.failure = Some(("VolumeError".into(), e.to_string()));
                    self.report().await;
                    return None;
                }
                Err(e @ VolumeError::Kube { .. }) => {
                    tracing::warn!(pod = %self.key(), error = %e, "preparing volumes");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }

    /// Starts one container's supervisor, once its image is known and its env can be built.
    async fn start(
        &mut self,
        container: &Container,
        dirs: &VolumeDirs,
        restart: RestartPolicy,
        probe: Option<SocketAddr>,
    ) {
        let name = container.name.clone();
        let image = container.image.clone().unwrap_or_default();
        let fetcher = Fetcher::new(self.shared.client.clone(), &self.namespace);
        let mut backoff = Duration::from_millis(500);
        let (local, invocation, mounts) = loop {
            let Some(local) = self.shared.images.resolve(&image) else {
                let message = format!(
                    "no local program plays image {image:?} (mapped: {})",
                    self.shared.images.repositories().join(", ")
                );
                self.wait_one(&name, "ErrImagePull", &message).await;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            };
            let mounts = match volumes::mounts(container, dirs) {
                Ok(mut mounts) => {
                    // The termination message's path is a file of the Pod's folder: the
                    // process's env and args naming it are rewritten like a volume's.
                    if let Some(path) = &container.termination_message_path {
                        let file = self.termination_log(&name);
                        let made = file.parent().map(std::fs::create_dir_all).transpose();
                        if let Err(e) = made.and_then(|_| std::fs::write(&file, b"")) {
                            tracing::warn!(pod = %self.key(), file = %file.display(), error = %e, "making the termination message file");
                        }
                        mounts.push((path.clone(), file));
                    }
                    mounts
                }
                Err(e) => {
                    self.record.failure = Some(("VolumeError".into(), e.to_string()));
                    self.report().await;
                    std::future::pending::<()>().await;
                    unreachable!("pending never completes");
                }
            };
            let sources = match fetcher.env_sources(&[container]).await {
                Ok(sources) => sources,
                Err(e) => {
                    tracing::warn!(pod = %self.key(), error = %e, "reading env sources");
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            match env::invocation(container, &self.facts, &sources, &mounts) {
                Ok(invocation) => break (local, invocation, mounts),
                Err(EnvError::Missing {
                    kind,
                    name: object,
                    key,
                }) => {
                    self.wait_one(
                        &name,
                        "CreateContainerConfigError",
                        &format!("{kind} {object:?} not found"),
                    )
                    .await;
                    self.object_change(kind, &object, key.is_some()).await;
                }
                Err(e @ EnvError::UnsupportedField(_)) => {
                    self.wait_one(&name, "CreateContainerConfigError", &e.to_string())
                        .await;
                    std::future::pending::<()>().await;
                }
            }
        };
        let work = self.dir.join("work").join(&name);
        let cwd = container
            .working_dir
            .as_deref()
            .map(|w| PathBuf::from(env::rewrite_paths(w, &mounts)))
            .filter(|w| w.starts_with(&self.shared.root))
            .unwrap_or(work.clone());
        let tmp = self.dir.join("tmp");
        for dir in [&cwd, &work, &tmp] {
            let _ = std::fs::create_dir_all(dir);
        }
        // The ServiceAccount's credentials as a kubeconfig: see [`incluster`].
        let server = format!("https://127.0.0.1:{}", self.shared.apiserver_port);
        let kubeconfig = match incluster::account_folder(&mounts)
            .map(|folder| incluster::write(&work, &server, folder, &self.namespace))
            .transpose()
        {
            Ok(kubeconfig) => kubeconfig,
            Err(e) => {
                let message = format!(
                    "writing the in-cluster kubeconfig under {}: {e}",
                    work.display()
                );
                self.wait_one(&name, "CreateContainerConfigError", &message)
                    .await;
                std::future::pending::<()>().await;
                unreachable!("pending never completes");
            }
        };
        let mut process_env = vec![
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            ),
            ("HOME".to_string(), work.to_string_lossy().into_owned()),
            ("TMPDIR".to_string(), tmp.to_string_lossy().into_owned()),
            ("HOSTNAME".to_string(), self.name.clone()),
            (
                "KUBERNETES_SERVICE_HOST".to_string(),
                "127.0.0.1".to_string(),
            ),
            (
                "KUBERNETES_SERVICE_PORT".to_string(),
                self.shared.apiserver_port.to_string(),
            ),
            (
                "KUBERNETES_SERVICE_PORT_HTTPS".to_string(),
                self.shared.apiserver_port.to_string(),
            ),
        ];
        if let Some(kubeconfig) = kubeconfig {
            process_env.push((
                "KUBECONFIG".to_string(),
                kubeconfig.to_string_lossy().into_owned(),
            ));
        }
        // The Pod's own env wins, as it would over what a runtime sets.
        for (k, v) in invocation.env {
            process_env.retain(|(name, _)| *name != k);
            process_env.push((k, v));
        }
        let grace = self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .map_or(container::MAX_GRACE, |s| {
                Duration::from_secs(s.max(0) as u64)
            });
        // A command whose first word is a file in one of the Pod's volumes (the gate an init
        // container copied there) runs that file; otherwise the image's program plays it.
        let in_volume = |word: &str| {
            let path = std::path::Path::new(word);
            path.is_file() && mounts.iter().any(|(_, dir)| path.starts_with(dir))
        };
        let (program, argv) = local.process(&invocation.command, &invocation.args, in_volume);
        // As root and asked to: the container's runAsUser, its folders handed to it.
        let user = if self.shared.run_as_pod_users {
            identity::user(&self.pod, container)
        } else {
            None
        };
        // The programs too: linked where the user can run them, if they sit where they cannot
        // (the one started, and the image's program where the gate runs it by name).
        let (program, argv) = match &user {
            Some(_) => {
                let programs = self.shared.root.join("programs");
                let runnable = |p: &Path| {
                    identity::runnable_by_anyone(p, &programs).unwrap_or_else(|e| {
                        tracing::warn!(pod = %self.key(), program = %p.display(), error = %e, "making a program runnable by the container's user");
                        p.to_path_buf()
                    })
                };
                let image_program = runnable(&local.program);
                let argv = argv
                    .into_iter()
                    .map(|w| {
                        if Path::new(&w) == local.program {
                            image_program.to_string_lossy().into_owned()
                        } else {
                            w
                        }
                    })
                    .collect::<Vec<_>>();
                (runnable(&program), argv)
            }
            None => (program, argv),
        };
        if let Some(user) = &user {
            for dir in mounts.iter().map(|(_, d)| d).chain([&work, &tmp, &cwd]) {
                if let Err(e) = identity::give(dir, user) {
                    tracing::warn!(pod = %self.key(), dir = %dir.display(), error = %e, "handing a folder to the container's user");
                }
            }
        }
        let run = ContainerRun {
            name: name.clone(),
            argv,
            program: program.clone(),
            env: process_env,
            cwd,
            log: log_path(&self.shared.root, &self.namespace, &self.name, &name),
            probe,
            restart,
            grace,
            user: user.map(|u| (u.uid, u.gid, u.groups)),
            termination_log: container
                .termination_message_path
                .as_ref()
                .map(|_| self.termination_log(&name)),
        };
        if let Some(c) = self.container_mut(&name) {
            c.image_id = format!("local://{}", program.display());
        }
        self.containers.spawn(container::supervise(
            run,
            self.events.clone(),
            self.stop.subscribe(),
            self.shared.running.clone(),
        ));
    }

    /// Applies the next container event to the record and reports it.
    async fn next_event(&mut self) {
        let Some(event) = self.events_rx.recv().await else {
            return std::future::pending().await;
        };
        match event {
            Event::Started { name, pid, at } => {
                if let Some(c) = self.container_mut(&name) {
                    c.phase = Phase::Running { started_at: at };
                    c.container_id = Some(format!("local://{pid}"));
                    c.ready = false;
                }
            }
            Event::Ready { name } => {
                if let Some(c) = self.container_mut(&name) {
                    c.ready = true;
                }
            }
            Event::Exited {
                name,
                ended,
                restarting,
            } => {
                if let Some(c) = self.container_mut(&name) {
                    c.ready = false;
                    if restarting {
                        c.last_ended = Some(ended);
                        c.restart_count += 1;
                        c.phase = Phase::Waiting {
                            reason: "CrashLoopBackOff".into(),
                            message: format!("back-off restarting container {name}"),
                        };
                    } else {
                        c.phase = Phase::Terminated(ended);
                    }
                }
            }
        }
        self.report().await;
    }

    fn container_mut(&mut self, name: &str) -> Option<&mut ContainerRecord> {
        self.record
            .init
            .iter_mut()
            .chain(self.record.main.iter_mut())
            .find(|c| c.name == name)
    }

    /// Marks every container that has not started as waiting for `reason`.
    async fn wait_all(&mut self, reason: &str, message: &str) {
        for c in self
            .record
            .init
            .iter_mut()
            .chain(self.record.main.iter_mut())
        {
            if matches!(c.phase, Phase::Waiting { .. }) {
                c.phase = Phase::Waiting {
                    reason: reason.into(),
                    message: message.into(),
                };
            }
        }
        self.report().await;
    }

    async fn wait_one(&mut self, name: &str, reason: &str, message: &str) {
        if let Some(c) = self.container_mut(name) {
            c.phase = Phase::Waiting {
                reason: reason.into(),
                message: message.into(),
            };
        }
        self.report().await;
    }

    /// Waits (by watch) until the object exists, or, when it exists but lacks a key, changes.
    async fn object_change(&self, kind: &str, name: &str, existing: bool) {
        let client = self.shared.client.clone();
        let skip = usize::from(existing);
        match kind {
            "Secret" => {
                let api: Api<Secret> = Api::namespaced(client, &self.namespace);
                next_present(watch_object(api, name), skip).await;
            }
            "ConfigMap" => {
                let api: Api<ConfigMap> = Api::namespaced(client, &self.namespace);
                next_present(watch_object(api, name), skip).await;
            }
            _ => {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(client, &self.namespace);
                next_present(watch_object(api, name), skip).await;
            }
        }
    }

    /// Patches the Pod's status when it differs from the last one reported.
    async fn report(&mut self) {
        let status = pod_status(&mut self.record, Timestamp::now());
        let body = serde_json::json!({ "status": status });
        if self.last_reported.as_ref() == Some(&body) {
            return;
        }
        let params = PatchParams::default();
        match self
            .api
            .patch_status(&self.name, &params, &Patch::Strategic(&body))
            .await
        {
            Ok(_) => self.last_reported = Some(body),
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => tracing::warn!(pod = %self.key(), error = %e, "reporting pod status"),
        }
    }

    /// Stops the containers, reports how they ended, deletes the Pod for good and cleans up.
    async fn finish(mut self, still_there: Option<Pod>) {
        self.stop.send_replace(true);
        let deadline = container::MAX_GRACE + Duration::from_secs(2);
        let drained = tokio::time::timeout(deadline, async {
            while self.containers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            self.containers.abort_all();
        }
        while let Ok(event) = self.events_rx.try_recv() {
            if let Event::Exited { name, ended, .. } = event
                && let Some(c) = self.container_mut(&name)
            {
                c.phase = Phase::Terminated(ended);
            }
        }
        if let Some(pod) = still_there {
            if !self.record.pod_ip.is_empty() {
                self.report().await;
            }
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: pod.meta().uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match self.api.delete(&self.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => {}
                Err(e) => tracing::warn!(pod = %self.key(), error = %e, "deleting the pod"),
            }
        }
        self.shared.addresses.release(&self.uid);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits for the `skip`+1-th state of the object in which it exists.
async fn next_present<K, S>(stream: S, skip: usize)
where
    S: futures::Stream<Item = Result<Option<K>, kube::runtime::watcher::Error>>,
{
    let stream = stream
        .filter_map(|item| async move { item.ok().flatten() })
        .skip(skip);
    futures::pin_mut!(stream);
    stream.next().await;
}

/// The port that tells readiness: the readiness probe's, else the first container port.
pub fn probe_port(container: &Container) -> Option<u16> {
    let ports = container.ports.as_deref().unwrap_or_default();
    let resolve = |port: &IntOrString| match port {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u16::try_from(p.container_port).ok()),
    };
    if let Some(probe) = &container.readiness_probe {
        if let Some(tcp) = &probe.tcp_socket {
            return resolve(&tcp.port);
        }
        if let Some(get) = &probe.http_get {
            return resolve(&get.port);
        }
        if let Some(grpc) = &probe.grpc {
            return u16::try_from(grpc.port).ok();
        }
        return None;
    }
    ports
        .first()
        .and_then(|p| u16::try_from(p.container_port).ok())
}
