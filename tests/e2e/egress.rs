//! A plugin's declared egress as the controller makes it (issue 30): the full plugin lists
//! `api.github.com:443` and `10.20.0.0/16:5432`, with `network.egress`. The controller makes
//! its NetworkPolicy only in a namespace where a policy already closes plugin Pods' egress
//! (the chart's, applied here as the chart renders it in `projectNamespaces`; made after the
//! plugin, it is seen by the controller's watch), opening exactly the approved destinations,
//! and takes it away when the approval goes. Whether the
//! cluster enforces it is `host::`'s test on kind; here the objects are checked.

use anyhow::{Context, ensure};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Patch, PatchParams, PostParams};
use model::names;
use model::resources::{ChannelKind, Plugin, PluginInstance};
use serde_json::json;

use crate::api::api_support::{chat, full_plugin, world};
use crate::controller_support::{WAIT, plugin_id, shared};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![test(
        "egress::an_approved_egress_opens_exactly_its_destinations_where_plugin_pods_are_closed",
        approved_egress,
    )]
}

fn policy_name(id: &str) -> String {
    format!("loop-plugin-egress-{id}")
}

/// The chart's policy for plugin pods, as it renders in a project namespace: egress closed but
/// for what its rules allow (here nothing: the API and DNS rules do not matter to this test).
fn closing_policy() -> anyhow::Result<NetworkPolicy> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": "loop-plugins-plugins" },
        "spec": {
            "podSelector": { "matchLabels": { "app.kubernetes.io/name": "loop-plugin" } },
            "policyTypes": ["Ingress", "Egress"],
        },
    }))?)
}

/// The approved capabilities of Plugin `id` set to `approved`.
async fn approve(ns: &Ns, id: &str, approved: &[String]) -> anyhow::Result<()> {
    kube::Api::<Plugin>::all(ns.client())
        .patch(
            id,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "approvedCapabilities": approved } })),
        )
        .await?;
    Ok(())
}

async fn approved_egress(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = plugin_id(&ns, "eg");
    let plugin = full_plugin(&id, None)?;
    let all = plugin.spec.approved_capabilities.clone();
    ensure!(all.iter().any(|c| c == "network.egress"), "{all:?}");
    let without: Vec<String> = all
        .iter()
        .filter(|c| *c != "network.egress")
        .cloned()
        .collect();
    let policies = ns.api::<NetworkPolicy>();

    // No policy closes plugin pods here: the plugin reaches everything already, and a policy
    // of ours would close it off instead. Its instance's Secret is made once nothing of its
    // egress is awaited, so once it is there the controller has decided.
    world(
        &ns,
        &[plugin],
        &[chat("general", ChannelKind::Channel, None)],
    )
    .await?;
    ensure!(
        policies.get_opt(&policy_name(&id)).await?.is_none(),
        "a policy of ours where nothing closes plugin pods"
    );

    // The chart's policy closes them: the controller sees it (it watches every policy), and
    // ours opens the approved destinations, with nothing else changed.
    policies
        .create(&PostParams::default(), &closing_policy()?)
        .await?;
    let made = wait::exists(&policies, &policy_name(&id), WAIT).await?;
    let spec = made.spec.clone().context("spec")?;
    ensure!(
        spec.policy_types == Some(vec!["Egress".to_string()]) && spec.ingress.is_none(),
        "{spec:?}"
    );
    let selector = spec
        .pod_selector
        .and_then(|s| s.match_labels)
        .unwrap_or_default();
    ensure!(
        selector.get("plugins.loop.dev/plugin") == Some(&id)
            && selector
                .get("app.kubernetes.io/component")
                .map(String::as_str)
                == Some("plugin"),
        "{selector:?}"
    );
    // The block as written; api.github.com does not resolve on these machines, so it has no
    // rule (an empty one would open every address), but it is listed as declared.
    let rules = serde_json::to_value(spec.egress.unwrap_or_default())?;
    ensure!(
        rules
            == json!([{
                "to": [{ "ipBlock": { "cidr": "10.20.0.0/16" } }],
                "ports": [{ "protocol": "TCP", "port": 5432 }],
            }]),
        "{rules}"
    );
    let annotations = made.metadata.annotations.clone().unwrap_or_default();
    let annotation = |key: &str| annotations.get(key).map(String::as_str);
    ensure!(
        annotation("plugins.loop.dev/egress") == Some("api.github.com:443 10.20.0.0/16:5432")
            && annotation("plugins.loop.dev/egress-open") == Some("10.20.0.0/16:5432"),
        "{annotations:?}"
    );
    let owner = made.metadata.owner_references.clone().unwrap_or_default();
    ensure!(
        owner.len() == 1 && owner[0].kind == "Plugin" && owner[0].name == id,
        "{owner:?}"
    );

    // The instance says what its Pods may reach: what has a rule.
    let instance = names::instance_name(&id, "general");
    let shows = |open: &'static [&'static str]| {
        move |i: &PluginInstance| {
            i.status
                .as_ref()
                .is_some_and(|s| s.egress.iter().map(String::as_str).eq(open.iter().copied()))
        }
    };
    wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "the instance showing its open destination",
        WAIT,
        shows(&["10.20.0.0/16:5432"]),
    )
    .await?;

    // The owner takes the approval back: the policy goes, and the instance says so.
    approve(&ns, &id, &without).await?;
    wait::deleted(&policies, &policy_name(&id), WAIT).await?;
    wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "the instance showing nothing open",
        WAIT,
        shows(&[]),
    )
    .await?;
    Ok(())
}
