//! Our CRDs on a real API server: applied server-side with the built kubectl, one valid object
//! of each kind accepted, and the CEL rules refusing what they should.

use anyhow::{Context, ensure};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use model::resources::{
    AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project, ProjectTrust,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "crds::apply_server_side_with_kubectl_and_become_established",
            apply_server_side_with_kubectl_and_become_established,
        ),
        test(
            "crds::one_object_of_each_kind_is_accepted",
            one_object_of_each_kind_is_accepted,
        ),
        test(
            "crds::cel_rules_refuse_invalid_objects",
            cel_rules_refuse_invalid_objects,
        ),
    ]
}

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

async fn apply_server_side_with_kubectl_and_become_established(ns: Ns) -> anyhow::Result<()> {
    let cluster = ns.cluster();
    let kubectl = cluster.kubectl();
    let crds = cluster.crds_dir();
    let out = kubectl
        .run(["apply", "--server-side", "-f", &crds.to_string_lossy()])
        .await?;
    ensure!(
        out.contains("plugins.plugins.loop.dev serverside-applied"),
        "kubectl said: {out}"
    );
    devcluster::install_crds(kubectl, &ns.client(), &crds).await?;
    let listed = ns.kubectl(["get", "crds", "-o", "name"]).await?;
    for crd in model::crdgen::all() {
        let name = crd.metadata.name.unwrap_or_default();
        ensure!(
            listed.contains(&name),
            "kubectl get crds lacks {name}: {listed}"
        );
    }
    // The printer columns and short names work through kubectl.
    let plugins = ns.kubectl(["get", "plg"]).await?;
    ensure!(
        plugins.is_empty() || plugins.contains("VERSION"),
        "kubectl get plg: {plugins}"
    );
    Ok(())
}

/// Creates `value` as a `K`, failing with the API server's message.
async fn create<K>(api: &Api<K>, value: serde_json::Value) -> anyhow::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let object: K =
        serde_json::from_value(value.clone()).with_context(|| format!("deserializing {value}"))?;
    api.create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {value}"))
}

/// Creates `value` as a `K` and expects a refusal (422) whose message holds `reason`.
async fn refused<K>(api: &Api<K>, value: serde_json::Value, reason: &str) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(value.clone())?;
    match api.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(s)) if s.code == 422 => {
            ensure!(
                s.message.contains(reason),
                "refused, but for another reason: {}",
                s.message
            );
            Ok(())
        }
        other => anyhow::bail!("expected a refusal ({reason}), got {other:?}"),
    }
}

fn plugin(name: &str, id: &str, image: &str) -> serde_json::Value {
    json!({
        "apiVersion": "plugins.loop.dev/v1alpha1",
        "kind": "Plugin",
        "metadata": { "name": name },
        "spec": {
            "image": image,
            "manifest": { "id": id, "version": "1.0.0", "name": "Echo", "description": "says it back" },
            "approvedCapabilities": []
        }
    })
}

/// A plugin id unique to this test's namespace (Plugins are cluster-wide).
fn plugin_id(ns: &Ns) -> String {
    let suffix: String = ns
        .name()
        .chars()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("echo-{suffix}")
}

async fn one_object_of_each_kind_is_accepted(ns: Ns) -> anyhow::Result<()> {
    ns.cluster().ensure_crds().await?;
    let client = ns.client();

    let host: Api<HostConfig> = Api::all(client.clone());
    let config = json!({
        "apiVersion": "plugins.loop.dev/v1alpha1",
        "kind": "HostConfig",
        "metadata": { "name": "default" },
        "spec": { "plugins": { "enabled": true, "dailyRuns": 50 } }
    });
    // Its own field manager: the controller tests own the rest of this shared singleton.
    host.patch(
        "default",
        &PatchParams::apply("e2e-crds"),
        &Patch::Apply(&config),
    )
    .await
    .context("applying HostConfig default")?;

    let id = plugin_id(&ns);
    let plugins: Api<Plugin> = Api::all(client.clone());
    create(
        &plugins,
        plugin(&id, &id, &format!("example.com/echo@{DIGEST}")),
    )
    .await?;

    create(
        &ns.api::<Project>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "Project",
            "metadata": { "name": "demo" },
            "spec": { "plugins": { id.clone(): { "enabled": true, "settings": { "greeting": "hi" } } } }
        }),
    )
    .await?;
    create(
        &ns.api::<ProjectTrust>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "ProjectTrust",
            "metadata": { "name": "demo" },
            "spec": { "hash": format!("sha256:{}", "0".repeat(64)) }
        }),
    )
    .await?;
    for channel in [
        json!({ "metadata": { "name": "general" }, "spec": { "project": "demo", "kind": "channel" } }),
        json!({ "metadata": { "name": "idea" }, "spec": { "project": "demo", "kind": "thread", "parent": "general" } }),
    ] {
        let mut channel = channel;
        channel["apiVersion"] = json!("plugins.loop.dev/v1alpha1");
        channel["kind"] = json!("Channel");
        create(&ns.api::<Channel>(), channel).await?;
    }
    create(
        &ns.api::<PluginInstance>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "PluginInstance",
            "metadata": { "name": format!("{id}-general") },
            "spec": { "plugin": id.clone(), "channel": "general", "project": "demo" }
        }),
    )
    .await?;
    create(
        &ns.api::<AgentRun>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "AgentRun",
            "metadata": { "name": "run-1" },
            "spec": {
                "plugin": id.clone(), "channel": "general", "thread": format!("plugin:{id}"),
                "agent": "summarize", "prompt": "Summarize the thread."
            }
        }),
    )
    .await?;

    let listed = ns.kubectl(["get", "loop-plugins", "-o", "name"]).await?;
    for kind in [
        "project.",
        "projecttrust.",
        "channel.",
        "plugininstance.",
        "agentrun.",
    ] {
        ensure!(
            listed.contains(kind),
            "kubectl get loop-plugins lacks a {kind}: {listed}"
        );
    }
    plugins.delete(&id, &DeleteParams::default()).await?;
    Ok(())
}

async fn cel_rules_refuse_invalid_objects(ns: Ns) -> anyhow::Result<()> {
    ns.cluster().ensure_crds().await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    let id = plugin_id(&ns);
    refused(
        &plugins,
        plugin(&id, &id, "example.com/echo:latest"),
        "pinned by digest",
    )
    .await?;
    refused(
        &plugins,
        plugin(&id, "someone-else", &format!("example.com/echo@{DIGEST}")),
        "must equal its manifest id",
    )
    .await?;
    refused(
        &ns.api::<Channel>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "Channel",
            "metadata": { "name": "orphan" },
            "spec": { "project": "demo", "kind": "thread" }
        }),
        "names its parent channel",
    )
    .await?;
    refused(
        &ns.api::<ProjectTrust>(),
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "ProjectTrust",
            "metadata": { "name": "demo" }, "spec": { "hash": "md5:abc" }
        }),
        "sha256:<64 hex>",
    )
    .await?;
    let hosts: Api<HostConfig> = Api::all(ns.client());
    refused(
        &hosts,
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "HostConfig",
            "metadata": { "name": "other" }, "spec": {}
        }),
        "must be named default",
    )
    .await?;
    Ok(())
}
