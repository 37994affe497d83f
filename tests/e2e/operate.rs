//! The operator's weekly verbs end to end, as a person runs them: `loop-plugins plugin list`
//! `loop-plugins project import` (a desktop `.loop/config.json` with comments, a plugin
//! not installed and values the manifest refuses in it) and `loop-plugins plugin stop` (the
//! container goes now, well before its idle timeout, and the next demand starts it again)
//! and `loop-plugins explain` (the facts the controller decides from, each with its source)
//! against the real API server.

use std::time::Duration;

use anyhow::{Context, ensure};
use kube::ResourceExt;
use model::config::{PluginConfig, config_hash};
use model::resources::{Project, ProjectTrust};
use serde_json::json;

use crate::controller::{instance_name, instances_of, pods_of, world};
use crate::controller_support::{
    IDLE_TIMEOUT, IDLE_TIMEOUT_EXISTING, RELEASE, admin_kubeconfig, cli, cli_as, echo_plugin,
    install, plugin_id, record_demand, setup, shared,
};
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "operate::plugin_list_shows_each_installed_plugin",
            plugin_list,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "operate::project_import_carries_what_applies_and_lists_the_rest",
            project_import,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "operate::plugin_stop_stops_the_container_now_and_the_next_demand_starts_it",
            plugin_stop,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "operate::explain_says_why_the_plugin_runs_and_where_each_value_came_from",
            explain,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "operate::the_charts_plugin_operator_role_is_what_list_stop_and_explain_need",
            operator_role,
        )
        .timeout(Duration::from_secs(180)),
    ]
}

/// The row of `explain`'s table for `topic`, split into (value, why).
fn row<'a>(out: &'a str, topic: &str) -> anyhow::Result<(&'a str, &'a str)> {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{topic}  ")))
        .with_context(|| format!("no {topic} in {out}"))?;
    let rest = line[topic.len()..].trim_start();
    let (value, why) = rest.split_once("  ").unwrap_or((rest, ""));
    Ok((value.trim(), why.trim()))
}

async fn explain(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let tick = model::config::ScheduleEntry::default();
    let id = world(&ns, "expl", &[("tick", tick)]).await?;
    instances_of(&ns, &id, 1).await?;
    let chat = format!("{}/general", ns.name());
    let (ok, out, err) = cli(&ns, &["explain", &id, "--chat", &chat]).await?;
    ensure!(ok, "explain failed: {err}");
    ensure!(row(&out, "host switch")?.0 == "true", "{out}");
    ensure!(row(&out, "admission")?.0 == "Admitted", "{out}");
    ensure!(row(&out, "chat")?.0 == "runs plugins", "{out}");
    ensure!(row(&out, "trust")?.0 == "trusted", "{out}");
    ensure!(
        row(&out, "enabled")? == ("true", "set by the project's trusted config"),
        "{out}"
    );
    ensure!(
        row(&out, "setting verbose")? == ("false", "the manifest's default"),
        "{out}"
    );
    ensure!(
        row(&out, "schedule tick")?.1 == "the project config's entry",
        "{out}"
    );
    ensure!(row(&out, "instance").is_err(), "an instance exists: {out}");
    ensure!(row(&out, "container").is_ok(), "{out}");
    Ok(())
}

/// The idle timeout of the run's HostConfig: what keeps a container up without a stop.
fn idle_timeout(ns: &Ns) -> Duration {
    let text = match ns.cluster().existing() {
        Some(_) => IDLE_TIMEOUT_EXISTING,
        None => IDLE_TIMEOUT,
    };
    seconds(text)
}

fn seconds(text: &str) -> Duration {
    let seconds: u64 = text
        .trim_end_matches('s')
        .parse()
        .expect("an idle timeout in seconds");
    Duration::from_secs(seconds)
}

async fn plugin_stop(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "stop", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &name).await?;
    pods_of(&ns, &name, 1, true).await?;
    // Fresh demand keeps it up for the idle timeout from here; the stop comes in a later
    // second (both are written to the second).
    record_demand(&ns, &name).await?;
    let demanded = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let chat = format!("{}/general", ns.name());
    let (ok, out, err) = cli(&ns, &["plugin", "stop", &id, "--chat", &chat]).await?;
    ensure!(ok, "plugin stop failed: {err}");
    ensure!(
        out.contains(&format!("stopped {}/{name}", ns.name())),
        "{out}"
    );
    pods_of(&ns, &name, 0, false).await?;
    ensure!(
        demanded.elapsed() < idle_timeout(&ns),
        "the Pod went only after {:?}, as idleness would have stopped it",
        demanded.elapsed()
    );
    ensure_stop_recorded(&ns, &name).await?;
    // The next demand (a second after the stop) starts it again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    record_demand(&ns, &name).await?;
    pods_of(&ns, &name, 1, true).await?;
    // Stopping a plugin with no instance in the chat says so.
    let (ok, _, err) = cli(&ns, &["plugin", "stop", "no-such-plugin", "--chat", &chat]).await?;
    ensure!(!ok && err.contains("has no instance"), "{err}");
    Ok(())
}

async fn plugin_list(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "list");
    let plugin = install(&ns, &echo_plugin(&id)?).await?;
    let (ok, out, err) = cli(&ns, &["plugin", "list"]).await?;
    ensure!(ok, "plugin list failed: {err}");
    let header = out.lines().next().unwrap_or_default();
    ensure!(
        header.split_whitespace().collect::<Vec<_>>()
            == ["NAME", "VERSION", "ADMITTED", "STAGE", "REASON", "DIGEST"],
        "header: {out}"
    );
    let row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some(id.as_str()))
        .with_context(|| format!("no row for {id}: {out}"))?;
    ensure!(
        row.split_whitespace().nth(1) == Some("0.1.0"),
        "its version: {row}"
    );
    ensure!(plugin.name_any() == id);
    Ok(())
}

/// The desktop's config, with comments and trailing commas, for plugin `id`: one value of each
/// kind the controller would leave out, and a plugin not installed.
fn desktop_config(id: &str) -> String {
    format!(
        r#"// written by Loop's desktop
{{
  "model": "anything else is not ours",
  "plugins": {{
    "{id}": {{
      "enabled": true, // on here
      "settings": {{ "verbose": true, "loud": true, }},
      "schedules": {{ "tick": {{ "enabled": false }}, "nope": {{}} }},
    }},
    "not-installed-anywhere": {{ "enabled": true }},
  }},
}}
"#
    )
}

async fn project_import(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "imp");
    install(&ns, &echo_plugin(&id)?).await?;
    let dir = ns.cluster().run_dir().join(ns.name()).join("my-app");
    std::fs::create_dir_all(dir.join(".loop"))?;
    let file = dir.join(".loop/config.json");
    std::fs::write(&file, desktop_config(&id))?;
    let file = file.to_str().context("a UTF-8 path")?;

    // --dry-run prints the Project and its trust as YAML and writes nothing.
    let (ok, out, err) = cli(
        &ns,
        &[
            "project",
            "import",
            file,
            "-n",
            ns.name(),
            "--trust",
            "--dry-run",
        ],
    )
    .await?;
    ensure!(ok, "import --dry-run failed: {err}");
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out)?;
    ensure!(
        docs.iter().map(|d| d["kind"].clone()).collect::<Vec<_>>()
            == [json!("Project"), json!("ProjectTrust")],
        "{out}"
    );
    ensure!(docs[0]["metadata"]["name"] == "my-app", "{out}");
    for left in [
        "plugins.not-installed-anywhere: no such plugin is installed",
        &format!("plugins.{id}.settings.loud:"),
        &format!("plugins.{id}.schedules.nope:"),
    ] {
        ensure!(err.contains(left), "{left} not listed: {err}");
    }
    ensure!(
        ns.api::<Project>().get_opt("my-app").await?.is_none(),
        "--dry-run wrote the Project"
    );

    // Imported and trusted: exactly what carries over, and the trust of that version.
    let (ok, out, err) = cli(
        &ns,
        &["project", "import", file, "-n", ns.name(), "--trust"],
    )
    .await?;
    ensure!(ok, "import failed: {err}\n{out}");
    let project = ns.api::<Project>().get("my-app").await?;
    let expected: PluginConfig = serde_json::from_value(json!({
        "enabled": true,
        "settings": { "verbose": true },
        "schedules": { "tick": { "enabled": false } },
    }))?;
    ensure!(
        project.spec.plugins == [(id.clone(), expected)].into(),
        "imported {:?}",
        project.spec.plugins
    );
    let trust = ns.api::<ProjectTrust>().get("my-app").await?;
    ensure!(
        trust.spec.hash == config_hash(&project.spec.plugins),
        "trusted {} of {:?}",
        trust.spec.hash,
        project.spec.plugins
    );
    ensure!(out.contains(&trust.spec.hash), "{out}");
    std::fs::remove_dir_all(ns.cluster().run_dir().join(ns.name()))?;
    Ok(())
}

/// The chart's `<fullname>-plugin-operator` ClusterRole in this cluster: the suite's own
/// rendering of the chart on the local control plane, the release's on an existing cluster.
pub fn operator_role_name(ns: &Ns) -> String {
    match ns.cluster().existing() {
        Some(existing) => format!("{}-plugin-operator", existing.fullname()),
        None => format!("{RELEASE}-loop-plugins-plugin-operator"),
    }
}

/// A kubeconfig for the ServiceAccount `account` of the test's namespace: the suite's cluster
/// (server and CA) and a token of the account.
async fn account_kubeconfig(ns: &Ns, account: &str) -> anyhow::Result<std::path::PathBuf> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts = ns.api::<ServiceAccount>();
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.into());
    accounts.create(&Default::default(), &sa).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(account, &Default::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    let admin = kube::config::Kubeconfig::read_from(admin_kubeconfig(ns)?)?;
    let current = admin
        .current_context
        .clone()
        .context("no current context")?;
    let cluster = admin
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .context("the current context names no cluster")?;
    let clusters: Vec<_> = admin
        .clusters
        .iter()
        .filter(|c| c.name == cluster)
        .collect();
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": clusters,
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": cluster, "user": account}}],
        "current-context": account,
    });
    let path = ns
        .cluster()
        .run_dir()
        .join(format!("{}-{account}.kubeconfig", ns.name()));
    std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
    Ok(path)
}

/// A ServiceAccount bound to the chart's plugin-operator role (and nothing else) lists the
/// plugins, stops one in a chat and explains it; unbound, it is refused each.
async fn operator_role(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "rbac", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    let kubeconfig = account_kubeconfig(&ns, "operator").await?;
    let chat = format!("{}/general", ns.name());
    let verbs: [Vec<&str>; 3] = [
        vec!["plugin", "list"],
        vec!["plugin", "stop", &id, "--chat", &chat],
        vec!["explain", &id, "--chat", &chat],
    ];
    for args in &verbs {
        let (ok, _, err) = cli_as(&ns, &kubeconfig, args).await?;
        ensure!(
            !ok && err.contains("forbidden"),
            "{args:?} without the role: {err}"
        );
    }

    let binding = bind_operator_role(&ns, "operator").await?;
    let outcome = async {
        for args in &verbs {
            // The authorizer's cache takes the binding in a moment.
            let until = tokio::time::Instant::now() + Duration::from_secs(20);
            loop {
                let (ok, out, err) = cli_as(&ns, &kubeconfig, args).await?;
                if ok {
                    if args[1] == "stop" {
                        ensure!(
                            out.contains(&format!("stopped {}/{name}", ns.name())),
                            "{out}"
                        );
                    }
                    break;
                }
                ensure!(
                    err.contains("forbidden") && tokio::time::Instant::now() < until,
                    "{args:?} with the role: {err}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        ensure_stop_recorded(&ns, &name).await?;
        anyhow::Ok(())
    }
    .await;
    binding.remove().await?;
    outcome
}

/// A ClusterRoleBinding of the chart's plugin-operator role to a ServiceAccount of the test's
/// namespace; [`OperatorBinding::remove`] deletes it (it is cluster-scoped: the namespace's
/// deletion leaves it).
pub struct OperatorBinding {
    api: kube::Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding>,
    name: String,
}

impl OperatorBinding {
    pub async fn remove(self) -> anyhow::Result<()> {
        self.api.delete(&self.name, &Default::default()).await?;
        Ok(())
    }
}

/// Binds the chart's plugin-operator ClusterRole to ServiceAccount `account` of `ns`.
pub async fn bind_operator_role(ns: &Ns, account: &str) -> anyhow::Result<OperatorBinding> {
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    let api: kube::Api<ClusterRoleBinding> = kube::Api::all(ns.client());
    let name = format!("{}-{account}-plugin-operator", ns.name());
    let binding = ClusterRoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: operator_role_name(ns),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    api.create(&Default::default(), &binding).await?;
    Ok(OperatorBinding { api, name })
}

/// That `plugin stop` recorded its stop on instance `name` (`status.stoppedAt`).
async fn ensure_stop_recorded(ns: &Ns, name: &str) -> anyhow::Result<()> {
    let stopped = ns
        .api::<model::resources::PluginInstance>()
        .get(name)
        .await?;
    ensure!(
        stopped.status.and_then(|s| s.stopped_at).is_some(),
        "the stop is not recorded on instance {name}"
    );
    Ok(())
}
