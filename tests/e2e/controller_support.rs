//! What the controller's e2e tests share: the controller (a process of the run on the local
//! control plane, the chart's Deployment on an existing cluster; restartable either way), a
//! lock for tests that change cluster-wide state, fixtures for plugins, projects and chats,
//! and waits over lists driven by watches.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context;
use devcluster::LocalImage;
use devcluster::process::{Process, ProcessSpec};
use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use model::config::{PluginConfig, ScheduleEntry, config_hash};
use model::resources::{
    App, Channel, ChannelKind, ChannelSpec, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    HostPlugins, Plugin, Project, ProjectSpec, RegistryConfig, RegistryMirror,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::support::{Ns, Target, lock_wait, target};

pub mod in_cluster;

/// How long an instance stays up after its last activity, in these tests.
pub const IDLE_TIMEOUT: &str = "8s";
/// The same on an existing cluster, where calls and Pods take longer. A first start there
/// waits for the instance's volume (local-path provisions it in 8 to 60 s on 2 cores), longer
/// than this: the controller keeps a Pod that is still starting and counts idleness from its
/// readiness (`pod_wanted`). Before it did, this was 45 s, and
/// `controller::a_switch_that_is_on_starts_the_pod_at_start_then_idle_applies` still failed
/// once when the volume took longer.
pub const IDLE_TIMEOUT_EXISTING: &str = "15s";
pub const WAIT: Duration = Duration::from_secs(60);

/// Tests that change cluster-wide state (HostConfig, the controller process) take it for
/// writing; every other controller test holds it for reading.
static CLUSTER_STATE: RwLock<()> = RwLock::const_new(());
static CONTROLLER: OnceLock<Mutex<Option<Process>>> = OnceLock::new();

/// The lock for reading; the wait for it does not count against the test's time limit.
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    lock_wait(CLUSTER_STATE.read()).await
}

/// The lock for writing; the wait for it does not count against the test's time limit.
pub async fn exclusive() -> RwLockWriteGuard<'static, ()> {
    lock_wait(CLUSTER_STATE.write()).await
}

/// Makes sure the controller runs, with the CRDs installed, the HostConfig of these tests and
/// the images the stand-in needs. Call once at the start of each controller test.
pub async fn setup(ns: &Ns) -> anyhow::Result<()> {
    ns.cluster().ensure_crds().await?;
    if let Some(existing) = ns.cluster().existing() {
        static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
        return READY
            .get_or_try_init(|| async {
                apply_host(ns.client(), host_spec(true)).await?;
                in_cluster::leader(ns.client(), existing, None).await?;
                anyhow::Ok(())
            })
            .await
            .map(|_| ());
    }
    let images = ns.images()?;
    images.insert(
        &ns.cluster().plugin_images().self_repository(),
        LocalImage::new(testkit::binary()),
    );
    let mut running = CONTROLLER.get_or_init(|| Mutex::new(None)).lock().await;
    if running.is_none() {
        apply_host(ns.client(), host_spec(true)).await?;
        *running = Some(start_controller(ns).await?);
        crate::host::start_fanout_replica(ns).await?;
    }
    Ok(())
}

/// The HostConfig these tests run under. Its `apiUrl`: on the local control plane a port
/// nothing answers on (the tests that need the API start their own and say so), on an
/// existing cluster what the run was told (or the chart's own).
pub fn host_spec(enabled: bool) -> HostConfigSpec {
    let api_url = match target() {
        Target::Local => Some("http://127.0.0.1:9".into()),
        Target::Existing(existing) => existing.plugin_api_url.clone(),
    };
    HostConfigSpec {
        plugins: HostPlugins {
            enabled,
            idle_timeout: match target() {
                Target::Local => IDLE_TIMEOUT,
                Target::Existing(_) => IDLE_TIMEOUT_EXISTING,
            }
            .into(),
            registry: registry_config(),
            ..Default::default()
        },
        api_url,
        // The suite's agents call without waiting for a person; the approval tests
        // (`approvals::`) set profiles of their own.
        risk_profiles: std::collections::BTreeMap::from([(
            "default".to_string(),
            model::resources::RiskProfile {
                auto_approve: vec!["*".into()],
                ..Default::default()
            },
        )]),
        ..Default::default()
    }
}

/// How the controller reaches the run's registry: as this machine does (a loopback registry
/// is plain HTTP), unless `LOOP_PLUGINS_E2E_REGISTRY_MIRROR=<name>=<address>` says the
/// cluster reaches it at another address (kind: `localhost:5001=kind-registry:5000`).
pub fn registry_config() -> RegistryConfig {
    let mirrors = std::env::var("LOOP_PLUGINS_E2E_REGISTRY_MIRROR")
        .ok()
        .and_then(|m| {
            let (registry, address) = m.split_once('=')?;
            Some(vec![RegistryMirror {
                registry: registry.into(),
                address: address.into(),
                plain_http: true,
            }])
        })
        .unwrap_or_default();
    RegistryConfig {
        mirrors,
        ..Default::default()
    }
}

pub async fn apply_host(client: Client, spec: HostConfigSpec) -> anyhow::Result<()> {
    let api: Api<HostConfig> = Api::all(client);
    let host = HostConfig::new(HOST_CONFIG_NAME, spec);
    api.patch(
        HOST_CONFIG_NAME,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&host),
    )
    .await?;
    Ok(())
}

/// The chart's release the controller runs under, in this namespace: the controller runs as
/// the chart's own ServiceAccount with the chart's own RBAC, so a missing permission fails a
/// test, and the audit log tells its requests apart from the tests'.
pub const CONTROLLER_NAMESPACE: &str = "loop-plugins-system";
pub const RELEASE: &str = "e2e";
/// Binds ServiceAccount `account` of the test's namespace to the chart's approver ClusterRole
/// there, as an operator binds the people who approve in a project's namespace.
/// The chart's ClusterRole `<fullname>-<suffix>` (`project-editor`, `project-trustee`, ...).
pub fn chart_role(ns: &Ns, suffix: &str) -> String {
    match ns.cluster().existing() {
        Some(existing) => format!("{}-{suffix}", existing.fullname()),
        None => format!("{RELEASE}-loop-plugins-{suffix}"),
    }
}

/// Binds the chart's ClusterRole `<fullname>-<suffix>` to ServiceAccount `account` of the
/// test's namespace, in that namespace.
pub async fn bind_chart_role(ns: &Ns, account: &str, suffix: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: chart_role(ns, suffix),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(format!("{account}-{suffix}"));
    apply(ns, &binding).await?;
    Ok(())
}

pub async fn bind_approver(ns: &Ns, account: &str) -> anyhow::Result<()> {
    bind_chart_role(ns, account, "approver").await
}

/// The chart's fan-out Lease for that release (`loop-plugins.fanoutLeaseName`): every API
/// server of the local suite, processes and in-process ones, elects the one that does the
/// fan-out on it, as the chart's replicas do.
pub const FANOUT_LEASE: &str = "e2e-loop-plugins-api";
/// The chart's ServiceAccount for that release.
pub const CONTROLLER_ACCOUNT: &str = "e2e-loop-plugins";

/// The controller's username in the audit log.
pub fn controller_user() -> String {
    format!("system:serviceaccount:{CONTROLLER_NAMESPACE}:{CONTROLLER_ACCOUNT}")
}

/// A kubeconfig for the chart's ServiceAccount, after applying the chart's RBAC.
async fn controller_kubeconfig(ns: &Ns) -> anyhow::Result<PathBuf> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};

    let client = ns.client();
    let apply = PatchParams::apply("e2e").force();
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(CONTROLLER_NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .patch(CONTROLLER_NAMESPACE, &apply, &Patch::Apply(&namespace))
        .await?;
    let docs = crate::chart::render(RELEASE, CONTROLLER_NAMESPACE, &[]).await?;
    crate::chart::apply(ns.cluster(), &crate::chart::rbac(&docs), false).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), CONTROLLER_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(24 * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(CONTROLLER_ACCOUNT, &PostParams::default(), &request)
        .await?;
    let token = token
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    let dev = ns.cluster().dev()?;
    let path = dev.run_dir().join("controller.kubeconfig");
    let plane = dev.control_plane();
    devcluster::kubeconfig::write(
        &path,
        plane.server(),
        plane.ca_pem(),
        CONTROLLER_ACCOUNT,
        &token,
    )?;
    Ok(path)
}

/// Where the controller process of this run serves `/metrics`: one loopback port for the
/// run, kept across restarts, so a scraper (watch::) finds it.
pub fn controller_metrics_addr() -> std::net::SocketAddr {
    static ADDR: OnceLock<std::net::SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        // Free now; the controller binds it a moment later (nothing else here takes ports
        // by number).
        let port = devcluster::free_port().expect("a free loopback port");
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    })
}

/// Starts the controller process. Without leader election: one replica runs here, and a
/// replica that misses its renewals on a loaded 2-core machine would stop reconciling for the
/// rest of the run; `chart::` tests leader election on a real Lease on its own.
async fn start_controller(ns: &Ns) -> anyhow::Result<Process> {
    let dev = ns.cluster().dev()?;
    let kubeconfig = controller_kubeconfig(ns).await?;
    let log = dev.run_dir().join("controller.log");
    let mut spec = ProcessSpec::new("controller", testkit::binary(), log);
    spec.append_log = true;
    spec.env
        .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    spec.env.push((
        "RUST_LOG".into(),
        "info,kube=warn,loop_plugins_controller=debug,loop_plugins_server=debug,loop_plugins_runtime=debug".into(),
    ));
    let self_image = ns.cluster().plugin_images().self_image().await?;
    let spec = spec.args([
        "controller".to_string(),
        format!("--self-image={self_image}"),
        "--api-url=http://127.0.0.1:9".to_string(),
        format!("--metrics-addr={}", controller_metrics_addr()),
        format!("--namespace={CONTROLLER_NAMESPACE}"),
    ]);
    Ok(Process::spawn(&spec).await?)
}

/// Kills the controller (SIGKILL, no goodbye), runs `after_kill`, and starts it again. On an
/// existing cluster: deletes the leading Pod with no grace period (its containers get
/// SIGKILL), and waits for another Pod to take the Lease.
pub async fn restart_controller(
    ns: &Ns,
    after_kill: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    if let Some(existing) = ns.cluster().existing() {
        let killed = in_cluster::kill_leader(ns.client(), existing, ns.cluster().run_dir()).await?;
        after_kill.await;
        in_cluster::leader(ns.client(), existing, Some(&killed)).await?;
        return Ok(());
    }
    let mut running = CONTROLLER.get_or_init(|| Mutex::new(None)).lock().await;
    if let Some(mut process) = running.take() {
        process.kill();
    }
    after_kill.await;
    *running = Some(start_controller(ns).await?);
    Ok(())
}

/// Which controller runs now: the process's pid here, or the release's Pods with their
/// restart counts on an existing cluster. It changes when a controller dies, so a test that
/// feeds the controller something hostile checks it stayed the same.
pub async fn controller_incarnation(ns: &Ns) -> anyhow::Result<String> {
    if let Some(existing) = ns.cluster().existing() {
        return in_cluster::incarnation(ns.client(), existing).await;
    }
    let mut running = CONTROLLER.get_or_init(|| Mutex::new(None)).lock().await;
    match running.as_mut() {
        Some(process) => match process.try_wait() {
            None => Ok(format!("pid {}", process.pid())),
            Some(status) => Ok(format!("exited: {status}")),
        },
        None => Ok("not started".into()),
    }
}

/// A Plugin for this test: the echo plugin's manifest under a name of its own, its tool
/// renamed `<id>-echo`. Tool names are registered across admitted plugins, the first in
/// package-name order holding each (admission's Names stage), so the suite's many plugins each need their own; the
/// tests that call the tool use [`echo_tool_plugin`]. Its image is made when it is installed
/// ([`install`]), from its manifest as the test leaves it.
pub fn echo_plugin(id: &str) -> anyhow::Result<Plugin> {
    let mut plugin = echo_tool_plugin(id)?;
    rename_tools(&mut plugin, |t| format!("{id}-{t}"));
    Ok(plugin)
}

pub use testkit::plugins::rename_tools;

/// The echo plugin's manifest as it is, its tool named `echo` (the one the echo binary
/// serves), under `id`. Only one admitted plugin may hold the name: hold [`claim_echo_tool`]
/// while using it.
pub fn echo_tool_plugin(id: &str) -> anyhow::Result<Plugin> {
    let text = include_str!("../../examples/echo-plugin/plugin.json").replacen(
        "\"id\": \"echo\"",
        &format!("\"id\": \"{id}\""),
        1,
    );
    Ok(Plugin::from_manifest(
        &text,
        &unpublished(id),
        vec![],
        true,
    )?)
}

static ECHO_TOOL: Mutex<()> = Mutex::const_new(());

/// The tool name `echo`, for one test at a time: waits for the test before, then deletes any
/// Plugin still declaring a tool `echo` (a finished or failed test's), so the caller's
/// [`echo_tool_plugin`] is the one admission registers it for.
pub async fn claim_echo_tool(ns: &Ns) -> anyhow::Result<tokio::sync::MutexGuard<'static, ()>> {
    let guard = ECHO_TOOL.lock().await;
    // The Plugin kind must be served: a test may claim before anything else set up.
    ns.cluster().ensure_crds().await?;
    let api: Api<Plugin> = Api::all(ns.client());
    for p in api.list(&Default::default()).await?.items {
        let declares = p
            .spec
            .manifest
            .rest
            .get("tools")
            .and_then(|t| t.as_array())
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == "echo"));
        if declares && p.metadata.deletion_timestamp.is_none() {
            api.delete(&p.name_any(), &Default::default()).await?;
        }
    }
    Ok(guard)
}

/// The image a Plugin names until [`install`] publishes its own.
pub fn unpublished(id: &str) -> String {
    use sha2::{Digest, Sha256};
    format!(
        "unpublished.e2e/{id}@sha256:{}",
        hex::encode(Sha256::digest(id.as_bytes()))
    )
}

/// A plugin id unique to the test's namespace.
pub fn plugin_id(ns: &Ns, suffix: &str) -> String {
    let tail = ns.name().rsplit('-').next().unwrap_or("x");
    format!("e{suffix}-{tail}")
}

/// Installs `plugin` as `plugin install` would leave it: its image made and pushed first
/// (one that ships its manifest, the echo plugin's binary as entrypoint), then the Plugin
/// applied pinned to that image's digest.
pub async fn install(ns: &Ns, plugin: &Plugin) -> anyhow::Result<Plugin> {
    install_as(ns, plugin, testkit::images::ECHO).await
}

/// [`install`], the image's entrypoint `program` (the stand-in plays it with its binary).
pub async fn install_as(
    ns: &Ns,
    plugin: &Plugin,
    program: testkit::images::Program,
) -> anyhow::Result<Plugin> {
    let mut plugin = plugin.clone();
    ns.cluster()
        .plugin_images()
        .publish_as(program, &mut plugin)
        .await?;
    let api: Api<Plugin> = Api::all(ns.client());
    Ok(api
        .patch(
            &plugin.name_any(),
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&plugin),
        )
        .await?)
}

/// One plugin's project entry.
pub fn entry(enabled: bool, schedules: &[(&str, ScheduleEntry)]) -> PluginConfig {
    PluginConfig {
        enabled: Some(enabled),
        settings: BTreeMap::new(),
        secret_settings: BTreeMap::new(),
        risk_profile: None,
        schedules: schedules
            .iter()
            .map(|(a, e)| (a.to_string(), e.clone()))
            .collect(),
    }
}

/// A project with this config (not trusted by itself: see [`apply_trusted`]).
pub fn project(name: &str, plugins: BTreeMap<String, PluginConfig>) -> Project {
    Project::new(name, ProjectSpec { plugins })
}

/// Applies a project with this config, then trusts it as the owner does, with the operator
/// verb (`loop-plugins project trust`): the same-named ProjectTrust, owned by the Project.
pub async fn apply_trusted(
    ns: &Ns,
    name: &str,
    plugins: BTreeMap<String, PluginConfig>,
) -> anyhow::Result<Project> {
    let applied = apply(ns, &project(name, plugins)).await?;
    let expected = config_hash(&applied.spec.plugins);
    operator::trust_project(ns.client(), ns.name(), name, Some(&expected))
        .await
        .with_context(|| format!("trusting project {name}"))?;
    Ok(applied)
}

pub fn channel(name: &str, project: &str, kind: ChannelKind, parent: Option<&str>) -> Channel {
    Channel::new(
        name,
        ChannelSpec {
            project: project.into(),
            kind,
            parent: parent.map(Into::into),
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    )
}

/// Server-side applies a namespaced object in the test's namespace.
pub async fn apply<K>(ns: &Ns, object: &K) -> anyhow::Result<K>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + Serialize + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let api = ns.api::<K>();
    let name = object.name_any();
    api.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", K::kind(&Default::default())))
}

/// Waits until `cond` holds over every object `api` lists (with `labels`), re-checking on each
/// watch event; returns the objects.
pub async fn list_until<K, F>(
    api: &Api<K>,
    labels: Option<&str>,
    what: &str,
    timeout: Duration,
    cond: F,
) -> anyhow::Result<Vec<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    F: Fn(&[K]) -> bool,
{
    let (store, writer) = reflector::store::<K>();
    let mut config = watcher::Config::default();
    if let Some(labels) = labels {
        config = config.labels(labels);
    }
    let stream = watcher(api.clone(), config)
        .default_backoff()
        .reflect(writer);
    futures::pin_mut!(stream);
    let snapshot = || {
        store
            .state()
            .iter()
            .map(|o| (**o).clone())
            .collect::<Vec<K>>()
    };
    let result = tokio::time::timeout(timeout, async {
        while let Some(event) = stream.next().await {
            if let Ok(
                watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_),
            ) = event
            {
                let all = snapshot();
                if cond(&all) {
                    return Some(all);
                }
            }
        }
        None
    })
    .await;
    match result {
        Ok(Some(all)) => Ok(all),
        _ => {
            let names: Vec<String> = snapshot().iter().map(|o| o.name_any()).collect();
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last seen: {names:?}")
        }
    }
}

/// Records demand on an instance the way the API server does: its last activity is now.
pub async fn record_demand(ns: &Ns, instance: &str) -> anyhow::Result<()> {
    let api = ns.api::<model::resources::PluginInstance>();
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)?
        .to_string();
    let patch = serde_json::json!({ "status": { "lastActivity": now } });
    api.patch_status(instance, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Records demand on an instance every 2 seconds (a quarter of the tests' idle timeout), as
/// a chat in steady use would, until the guard is dropped.
pub fn keep_active(ns: &Ns, instance: &str) -> KeepActive {
    let (ns, instance) = (ns.clone(), instance.to_string());
    KeepActive(tokio::spawn(async move {
        loop {
            if let Err(err) = record_demand(&ns, &instance).await {
                tracing::warn!(%err, "recording demand");
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }))
}

/// Stops recording demand when dropped.
pub struct KeepActive(tokio::task::JoinHandle<()>);

impl Drop for KeepActive {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Who holds `lease` (None: nobody, or released).
pub fn lease_holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Writes the Lease's holder (None: released), renewed now, as the elector does: a
/// conditional replace, read again on a conflict.
pub async fn set_lease_holder(
    leases: &Api<Lease>,
    name: &str,
    holder: Option<&str>,
) -> anyhow::Result<()> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    loop {
        let mut lease = leases.get(name).await?;
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = holder.map(str::to_string);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        match leases.replace(name, &PostParams::default(), &lease).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => continue,
            Err(e) => anyhow::bail!("writing Lease {name}'s holder: {e}"),
        }
    }
}

/// Runs `loop-plugins ARGS` as the cluster's admin; (success, stdout, stderr).
pub async fn cli(ns: &Ns, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
    cli_as(ns, &admin_kubeconfig(ns)?, args).await
}

/// The kubeconfig the suite itself uses: the local control plane's admin, or `KUBECONFIG`.
pub fn admin_kubeconfig(ns: &Ns) -> anyhow::Result<PathBuf> {
    Ok(match ns.cluster().local() {
        Some(dev) => dev.kubeconfig().to_path_buf(),
        None => std::env::var_os("KUBECONFIG").context("KUBECONFIG")?.into(),
    })
}

/// `cli` with another kubeconfig (another identity).
pub async fn cli_as(
    ns: &Ns,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> anyhow::Result<(bool, String, String)> {
    let out = tokio::process::Command::new(testkit::binary())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", ns.cluster().run_dir())
        .output()
        .await?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Waits until the controller has made `plugin`'s instance in `chat` (Stopped, its Secret
/// written): what a run's tool call needs. A real plugin starts runs from its own container,
/// which exists only once its instance does; a test that makes an AgentRun itself waits first.
pub async fn instance_made(ns: &Ns, plugin: &str, chat: &str) -> anyhow::Result<()> {
    let instance = model::names::instance_name(plugin, chat);
    crate::support::wait::matches(
        &ns.api::<model::resources::PluginInstance>(),
        &instance,
        "the instance made (Stopped)",
        WAIT,
        |i: &model::resources::PluginInstance| {
            i.status.as_ref().and_then(|s| s.phase)
                == Some(model::resources::InstancePhase::Stopped)
        },
    )
    .await?;
    crate::support::wait::exists(
        &ns.api::<k8s_openapi::api::core::v1::Secret>(),
        &model::names::secret_name(&instance),
        WAIT,
    )
    .await?;
    Ok(())
}
