//! The chart on the real control plane: rendered with the built helm, applied with `kubectl
//! apply --server-side`, first with `--dry-run=server` and then for real, into the test's
//! namespace held to the restricted Pod Security level; its ServiceAccounts get the rules the
//! chart grants and nothing more (checked with SubjectAccessReviews). The kustomize base is
//! the chart's default rendering, which tests/chart.rs checks without a cluster. And leader
//! election (src/leader.rs) on a real Lease: one holder at a time, a quick handover on
//! release, the work stopped when the Lease is taken.
//!
//! [`render`], [`rbac`] and [`apply`] also serve tests that run the controller or the API
//! server as a local process under the chart's ServiceAccount.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use devcluster::binaries::{Binaries, repo_root};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::PostParams;
use kube::{Api, Client};
use runtime::leader::{self, LeaderError};
use serde_json::{Value, json};

use crate::support::{Cluster, E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "chart::applies_server_side_with_dry_run_then_for_real",
            applies_server_side_with_dry_run_then_for_real,
        ),
        test(
            "leader::one_holder_at_a_time_and_a_quick_handover_on_release",
            one_holder_at_a_time_and_a_quick_handover_on_release,
        ),
        test(
            "leader::a_taken_lease_stops_the_work",
            a_taken_lease_stops_the_work,
        ),
        test(
            "leader::the_controller_releases_its_lease_on_sigterm",
            the_controller_releases_its_lease_on_sigterm,
        )
        .local_only("runs the controller binary on this machine with the local CA"),
        test(
            "chart::the_installed_replicas_run_on_different_nodes",
            the_installed_replicas_run_on_different_nodes,
        )
        .timeout(Duration::from_secs(300))
        .cluster_only("the local control plane has one node"),
    ]
}

/// The installed release's replicas (two on kind) are Ready on as many nodes: the chart's
/// topology spread puts them apart, so a node drain takes one at a time.
async fn the_installed_replicas_run_on_different_nodes(ns: Ns) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Pod;
    // Alone: the tests that restart the controller delete a replica's Pod, and its successor
    // takes a moment to be Ready (and to be placed).
    let _alone = crate::controller_support::exclusive().await;
    let existing = ns.cluster().existing().context("an existing cluster")?;
    let pods: Api<Pod> = Api::namespaced(ns.client(), &existing.namespace);
    let selector = format!(
        "app.kubernetes.io/name=loop-plugins,app.kubernetes.io/instance={}",
        existing.release
    );
    let ready_replicas = || async {
        let listed = pods
            .list(&kube::api::ListParams::default().labels(&selector))
            .await?;
        let ready: Vec<(String, String)> = listed
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .map(|p| {
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        anyhow::Ok(ready)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let ready = loop {
        let ready = ready_replicas().await?;
        if ready.len() >= 2 || std::time::Instant::now() > deadline {
            break ready;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    };
    ensure!(ready.len() >= 2, "two Ready replicas: {ready:?}");
    let nodes: std::collections::BTreeSet<&str> = ready.iter().map(|(_, n)| n.as_str()).collect();
    ensure!(
        nodes.len() == ready.len(),
        "replicas share a node: {ready:?}"
    );
    Ok(())
}

/// `helm template <release> charts/loop-plugins --namespace <namespace>` with `--set` for
/// each of `values`, with the built helm; the rendered objects.
pub async fn render(release: &str, namespace: &str, values: &[&str]) -> anyhow::Result<Vec<Value>> {
    let helm = Binaries::locate()?.path("helm");
    let cache = std::env::temp_dir().join("loop-plugins-e2e-helm");
    let mut command = tokio::process::Command::new(&helm);
    command
        .args([
            "template",
            release,
            "charts/loop-plugins",
            "--namespace",
            namespace,
        ])
        .current_dir(repo_root())
        .env("HELM_CACHE_HOME", cache.join("cache"))
        .env("HELM_CONFIG_HOME", cache.join("config"))
        .env("HELM_DATA_HOME", cache.join("data"))
        .kill_on_drop(true);
    for value in values {
        command.args(["--set", value]);
    }
    let output = command.output().await.context("running helm")?;
    ensure!(
        output.status.success(),
        "helm template {release}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout)?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).context("parsing helm's output")?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The ServiceAccounts, Roles, ClusterRoles and bindings among `docs`.
pub fn rbac(docs: &[Value]) -> Vec<Value> {
    docs.iter()
        .filter(|d| {
            kind(d) == "ServiceAccount"
                || d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("rbac.authorization.k8s.io/"))
        })
        .cloned()
        .collect()
}

/// `kubectl apply --server-side` of `docs` (as one List), with `--dry-run=server` when asked;
/// kubectl's report. A dry run forces conflicts: the shared HostConfig belongs to other tests,
/// and a dry run changes nothing.
pub async fn apply(cluster: &Cluster, docs: &[Value], dry_run: bool) -> anyhow::Result<String> {
    static FILES: AtomicUsize = AtomicUsize::new(0);
    let n = FILES.fetch_add(1, Ordering::Relaxed);
    let file: PathBuf = cluster.run_dir().join(format!("chart-{n}.json"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    std::fs::write(&file, serde_json::to_vec_pretty(&list)?)?;
    let path = file.to_string_lossy();
    let mut args = vec![
        "apply",
        "--server-side",
        "--field-manager=loop-plugins-e2e",
        "-f",
        &path,
    ];
    if dry_run {
        args.extend(["--dry-run=server", "--force-conflicts"]);
    }
    Ok(cluster.kubectl().run(args).await?)
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A release name of the test's own, so cluster-scoped names don't clash between tests.
fn release_of(ns: &Ns) -> String {
    format!("lp-{}", ns.name().rsplit('-').next().unwrap_or("x"))
}

async fn applies_server_side_with_dry_run_then_for_real(ns: Ns) -> anyhow::Result<()> {
    let cluster = ns.cluster();
    cluster.ensure_crds().await?;
    // Pods the Deployment makes must pass the restricted level.
    ns.kubectl([
        "label",
        "namespace",
        ns.name(),
        "pod-security.kubernetes.io/enforce=restricted",
    ])
    .await?;
    let release = release_of(&ns);
    let project_namespaces = format!("projectNamespaces={{{}}}", ns.name());

    // Everything, HostConfig included, in a dry run.
    let docs = render(&release, ns.name(), &[&project_namespaces]).await?;
    ensure!(
        docs.iter().any(|d| kind(d) == "HostConfig"),
        "no HostConfig rendered"
    );
    let report = apply(cluster, &docs, true).await?;
    let reported = report
        .lines()
        .filter(|l| l.contains("serverside-applied (server dry run)"))
        .count();
    ensure!(
        reported == docs.len(),
        "{reported} of {} objects dry-run applied:\n{report}",
        docs.len()
    );

    // For real, less the HostConfig: the cluster's singleton belongs to the other tests.
    let docs = render(
        &release,
        ns.name(),
        &[&project_namespaces, "hostConfig.create=false"],
    )
    .await?;
    let result = check_applied(&ns, &release, &docs).await;
    // Cluster-scoped objects outlive the namespace: remove them whatever happened.
    let cleanup = ns
        .kubectl([
            "delete",
            "clusterrole,clusterrolebinding",
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
        ])
        .await;
    result?;
    cleanup?;
    Ok(())
}

async fn check_applied(ns: &Ns, release: &str, docs: &[Value]) -> anyhow::Result<()> {
    let report = apply(ns.cluster(), docs, false).await?;
    let reported = report
        .lines()
        .filter(|l| l.ends_with("serverside-applied"))
        .count();
    ensure!(
        reported == docs.len(),
        "{reported} of {} objects applied:\n{report}",
        docs.len()
    );

    let fullname = format!("{release}-loop-plugins");
    ns.get::<ServiceAccount>(&fullname).await?;
    ns.get::<ServiceAccount>(model::names::TRIGGER_SERVICE_ACCOUNT)
        .await?;
    ns.get::<Service>(&format!("{fullname}-api")).await?;
    ns.get::<NetworkPolicy>(&format!("{fullname}-plugins"))
        .await?;
    ns.get::<PodDisruptionBudget>(&fullname).await?;
    ns.get::<Role>(&format!("{fullname}-leader-election"))
        .await?;
    let roles: Api<ClusterRole> = Api::all(ns.client());
    for suffix in [
        "controller",
        "api",
        "trigger",
        "host-api-caller",
        "project-editor",
        "project-trustee",
        "plugin-operator",
    ] {
        roles.get(&format!("{fullname}-{suffix}")).await?;
    }
    // The ReplicaSet's Pods pass the restricted Pod Security level (they need not run here).
    let deployments: Api<Deployment> = ns.api();
    let refusal = |d: &Deployment| {
        d.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "ReplicaFailure"))
            .map(|c| c.message.clone().unwrap_or_default())
    };
    let deployment = wait::matches(
        &deployments,
        &fullname,
        "the Deployment's Pods to be admitted",
        Duration::from_secs(60),
        |d| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0) >= 1 || refusal(d).is_some(),
    )
    .await?;
    if let Some(message) = refusal(&deployment) {
        bail!("the Deployment's Pods were refused: {message}");
    }

    // Every rule granted holds for the ServiceAccount it is bound to; nothing else does.
    let user = |account: &str| format!("system:serviceaccount:{}:{account}", ns.name());
    let controller = user(&fullname);
    let mut granted = 0;
    // The host API callers', the approvers', the project roles and the plugin operator's are
    // for operators to bind; nobody has them.
    let unbound = [
        "-host-api-caller",
        "-approver",
        "-project-editor",
        "-project-trustee",
        "-plugin-operator",
        "-plugin-operator-credentials",
    ];
    let bound = |d: &&Value| {
        matches!(kind(d), "ClusterRole" | "Role") && !unbound.iter().any(|u| name(d).ends_with(u))
    };
    for role in rbac(docs).iter().filter(bound) {
        let (subject, namespace) = match (kind(role), name(role)) {
            (_, n) if n.ends_with("-trigger") => (user("loop-plugins-trigger"), Some(ns.name())),
            ("Role", _) => (controller.clone(), Some(ns.name())),
            _ => (controller.clone(), None),
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            let names = strings(&rule["resourceNames"]);
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        let check = Check {
                            verb: &verb,
                            group: &group,
                            resource: &resource,
                            namespace,
                            name: names.first().map(String::as_str),
                        };
                        ensure!(
                            allowed(ns.client(), &subject, &check).await?,
                            "{subject} may not {check:?}"
                        );
                        granted += 1;
                    }
                }
            }
        }
    }
    ensure!(granted > 40, "only {granted} grants checked");
    let denied = [
        (&controller, Check::cluster("get", "", "secrets")),
        (&controller, Check::cluster("delete", "", "secrets")),
        (&controller, Check::cluster("update", "", "pods")),
        (&controller, Check::cluster("delete", "", "configmaps")),
        (
            &controller,
            Check::cluster("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
        ),
        (
            &controller,
            Check::cluster("delete", "plugins.loop.dev", "plugins"),
        ),
        (
            &controller,
            Check::cluster("update", "plugins.loop.dev", "hostconfigs"),
        ),
        (
            &controller,
            Check::cluster("create", "plugins.loop.dev", "hostconfigs"),
        ),
        (
            &controller,
            Check::cluster("get", "coordination.k8s.io", "leases"),
        ),
        (
            &controller,
            Check {
                verb: "update",
                group: "coordination.k8s.io",
                resource: "leases",
                namespace: Some(ns.name()),
                name: Some("someone-elses-lease"),
            },
        ),
    ];
    for (subject, check) in &denied {
        ensure!(
            !allowed(ns.client(), subject, check).await?,
            "{subject} may {check:?}"
        );
    }
    let trigger = user("loop-plugins-trigger");
    let elsewhere = Check {
        verb: "create",
        group: "plugins.loop.dev",
        resource: "plugininstances/actions",
        namespace: Some("default"),
        name: None,
    };
    ensure!(
        !allowed(ns.client(), &trigger, &elsewhere).await?,
        "{trigger} may {elsewhere:?}"
    );
    ensure!(
        !allowed(ns.client(), &trigger, &Check::cluster("list", "", "pods")).await?,
        "{trigger} may list pods"
    );
    Ok(())
}

/// One access check: a verb on a resource (`resource/subresource`), cluster-wide when
/// `namespace` is None.
#[derive(Debug)]
pub struct Check<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
}

impl<'a> Check<'a> {
    pub fn cluster(verb: &'a str, group: &'a str, resource: &'a str) -> Self {
        Self {
            verb,
            group,
            resource,
            namespace: None,
            name: None,
        }
    }
}

/// Whether `user` (a ServiceAccount) may do `check`, by a SubjectAccessReview.
pub async fn allowed(client: Client, user: &str, check: &Check<'_>) -> anyhow::Result<bool> {
    let (resource, subresource) = match check.resource.split_once('/') {
        Some((r, s)) => (r, Some(s.to_string())),
        None => (check.resource, None),
    };
    let namespace = user.split(':').nth(2).unwrap_or_default();
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_string()),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(check.verb.into()),
                group: Some(check.group.into()),
                resource: Some(resource.into()),
                subresource,
                namespace: check.namespace.map(String::from),
                name: check.name.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client);
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

const LEASE: &str = "e2e-leader";

/// `leader::lead` as a task of its own; `work` returns `value`.
fn spawn_lead<T: Send + 'static>(
    client: Client,
    ns: &Ns,
    identity: &str,
    work: impl Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<Result<T, LeaderError>> {
    let namespace = ns.name().to_string();
    let identity = identity.to_string();
    tokio::spawn(async move { leader::lead(client, &namespace, LEASE, &identity, work).await })
}

async fn holder(ns: &Ns) -> anyhow::Result<Option<String>> {
    let lease: Lease = ns.get(LEASE).await?;
    Ok(lease.spec.and_then(|s| s.holder_identity))
}

async fn one_holder_at_a_time_and_a_quick_handover_on_release(ns: Ns) -> anyhow::Result<()> {
    let (a_leads, a_led) = tokio::sync::oneshot::channel();
    let (stop_a, a_stops) = tokio::sync::oneshot::channel::<()>();
    let a = spawn_lead(ns.client(), &ns, "replica-a", async move {
        let _ = a_leads.send(());
        let _ = a_stops.await;
        "a worked"
    });
    tokio::time::timeout(Duration::from_secs(20), a_led)
        .await
        .context("replica-a never led")??;

    let (b_leads, b_led) = tokio::sync::oneshot::channel();
    let b = spawn_lead(ns.client(), &ns, "replica-b", async move {
        let _ = b_leads.send(tokio::time::Instant::now());
        "b worked"
    });
    // Longer than a renewal and than b's retry: a renews, b waits.
    tokio::time::sleep(leader::RENEW_EVERY + leader::RETRY_EVERY).await;
    ensure!(
        !b.is_finished(),
        "replica-b led while replica-a held the Lease"
    );
    ensure!(
        holder(&ns).await?.as_deref() == Some("replica-a"),
        "the Lease names {:?}",
        holder(&ns).await?
    );

    // a's work ends: it releases, and b takes over at its next look, long before the Lease
    // would have expired.
    let released = tokio::time::Instant::now();
    let _ = stop_a.send(());
    ensure!(a.await?? == "a worked");
    let b_started = tokio::time::timeout(Duration::from_secs(10), b_led)
        .await
        .context("replica-b never led after the release")??;
    let handover = b_started - released;
    ensure!(
        handover < leader::RETRY_EVERY * 3,
        "the handover took {handover:?}"
    );
    ensure!(b.await?? == "b worked");

    let lease: Lease = ns.get(LEASE).await?;
    let spec = lease.spec.context("the Lease has no spec")?;
    ensure!(
        spec.holder_identity.is_none(),
        "replica-b did not release: {spec:?}"
    );
    ensure!(spec.lease_transitions == Some(1), "transitions: {spec:?}");
    Ok(())
}

/// Sets its flag when dropped: the work was stopped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn a_taken_lease_stops_the_work(ns: Ns) -> anyhow::Result<()> {
    let stopped = Arc::new(AtomicBool::new(false));
    let guard = Dropped(stopped.clone());
    let (leads, led) = tokio::sync::oneshot::channel();
    let a = spawn_lead(ns.client(), &ns, "replica-a", async move {
        let _guard = guard;
        let _ = leads.send(());
        std::future::pending::<()>().await
    });
    tokio::time::timeout(Duration::from_secs(20), led)
        .await
        .context("replica-a never led")??;

    // Another replica takes the Lease (as one whose clock ran ahead would), with a
    // conditional replace like the elector's own.
    let leases: Api<Lease> = ns.api();
    crate::controller_support::set_lease_holder(&leases, LEASE, Some("replica-thief")).await?;
    let taken = tokio::time::Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(15), a)
        .await
        .context("replica-a kept working on a Lease it lost")??;
    match result {
        Err(LeaderError::Lost { reason, .. }) => {
            ensure!(reason.contains("replica-thief"), "lost because: {reason}")
        }
        other => bail!("expected the Lease lost, got {other:?}"),
    }
    let noticed = taken.elapsed();
    ensure!(
        noticed <= leader::RENEW_EVERY + Duration::from_secs(2),
        "noticed after {noticed:?}"
    );
    ensure!(stopped.load(Ordering::SeqCst), "the work was not dropped");
    ensure!(
        holder(&ns).await?.as_deref() == Some("replica-thief"),
        "replica-a wrote after losing"
    );
    Ok(())
}

/// The controller process leads, then on SIGTERM (what the kubelet sends a Pod being
/// deleted) releases the Lease before it exits, so the next replica leads at once instead of
/// after the Lease runs out. It runs as a ServiceAccount that may only use Leases in the test's
/// namespace: its reconcilers are refused everything, so it cannot touch what other tests do.
async fn the_controller_releases_its_lease_on_sigterm(ns: Ns) -> anyhow::Result<()> {
    use devcluster::process::{Process, ProcessSpec};
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::rbac::v1::{PolicyRule, RoleBinding, RoleRef, Subject};
    use kube::api::{Patch, PatchParams};

    let account = "leader-only";
    let apply = PatchParams::apply("e2e").force();
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.into());
    ns.api::<ServiceAccount>()
        .patch(account, &apply, &Patch::Apply(&sa))
        .await?;
    let mut role = Role {
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["coordination.k8s.io".into()]),
            resources: Some(vec!["leases".into()]),
            verbs: ["get", "create", "update"].map(String::from).to_vec(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    role.metadata.name = Some(account.into());
    ns.api::<Role>()
        .patch(account, &apply, &Patch::Apply(&role))
        .await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: account.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(account.into());
    ns.api::<RoleBinding>()
        .patch(account, &apply, &Patch::Apply(&binding))
        .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = ns
        .api::<ServiceAccount>()
        .create_token_request(account, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    let dev = ns.cluster().dev()?;
    let kubeconfig = dev
        .run_dir()
        .join(format!("leader-only-{}.kubeconfig", ns.name()));
    let plane = dev.control_plane();
    devcluster::kubeconfig::write(&kubeconfig, plane.server(), plane.ca_pem(), account, &token)?;

    let log = dev.run_dir().join(format!("leader-only-{}.log", ns.name()));
    let mut spec = ProcessSpec::new("controller", testkit::binary(), &log);
    spec.env
        .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    spec.env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    let self_image = ns.cluster().plugin_images().self_image().await?;
    let spec = spec.args([
        "controller".to_string(),
        format!("--leader-election-namespace={}", ns.name()),
        format!("--lease-name={LEASE}"),
        "--leader-identity=replica-sigterm".to_string(),
        format!("--self-image={self_image}"),
        "--api-url=http://127.0.0.1:9".to_string(),
        "--metrics-addr=127.0.0.1:0".to_string(),
    ]);
    let mut controller = Process::spawn(&spec).await?;
    let leases: Api<Lease> = ns.api();
    let held = |l: &Lease| {
        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("replica-sigterm")
    };
    let led = wait::matches(
        &leases,
        LEASE,
        "the controller to lead",
        Duration::from_secs(30),
        held,
    )
    .await;
    if let Err(e) = led {
        controller.kill();
        bail!(
            "{e:#}\ncontroller log:\n{}",
            devcluster::process::tail(&log, 30)
        );
    }
    let status = controller
        .stop(Duration::from_secs(15))
        .await
        .context("the controller did not exit")?;
    let lease = leases.get(LEASE).await?;
    let spec = lease.spec.unwrap_or_default();
    ensure!(
        spec.holder_identity
            .as_deref()
            .unwrap_or_default()
            .is_empty(),
        "the Lease is still held after SIGTERM ({status}): {spec:?}\ncontroller log:\n{}",
        devcluster::process::tail(&log, 30)
    );
    ensure!(status.success(), "the controller exited with {status}");
    Ok(())
}
