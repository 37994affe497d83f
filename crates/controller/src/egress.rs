//! The egress reconciler: each plugin's egress, as a NetworkPolicy in each namespace where its
//! containers run: the destinations its manifest's `egress` lists, when the owner approved
//! `network.egress`, and nothing else. NetworkPolicies add up: the chart's policy for plugin
//! pods (`networkPolicy.enabled`, in each of `projectNamespaces`) closes everything beyond the
//! API and DNS, and this one opens exactly the approved destinations to this plugin's Pods.
//!
//! So it is made only where a policy already closes plugin Pods' egress (`policy::due`). Where
//! none does, they reach everything already, and a policy of ours would close them off from the
//! API and DNS instead of opening anything.
//!
//! A NetworkPolicy names IP blocks, not host names (kube-router, like most engines, has no
//! DNS-name rules), so a host is resolved here, by the controller's resolver, to the addresses
//! it has now, each a /32 or /128 block; they are resolved again, and the policy put right,
//! every [`REFRESH`]. A host whose addresses change between two resolutions (a CDN, a
//! round-robin with a short TTL) may be refused until the next one: name an IP block for such a
//! destination.
//!
//! The policy is a child like any other: owned by the Plugin (removed with it), named
//! `loop-plugin-egress-<id>`, watched by the index (every NetworkPolicy: those that close plugin
//! Pods' egress decide where ours is due), and written through the write door. A reconcile of a
//! Plugin is named steps: [`gather`] from the index, [`resolve`] the hosts where a policy is
//! due (the one thing read beyond the index), `policy::plan` (pure), [`sync`]. What wakes it
//! (its policies by their owner, the others of a namespace it runs in, its instances coming
//! and going) is in `controllers`.
//!
//! An instance reads its plugin's policy from the index (`policy::here`): its status shows what
//! the policy opens, and its Pod waits for a policy that is due, so a plugin never runs with
//! other than its approved egress.

pub(crate) mod policy;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::{Failures, Result, WriteError};
use model::manifest::{Egress as Destination, Manifest};
use model::resources::Plugin;
use policy::{Allowed, Step};
pub use policy::{Here, here, name, ours};

/// How long the addresses of a plugin's hosts are taken as they were last resolved before
/// they are resolved again.
pub const REFRESH: Duration = Duration::from_secs(300);

/// How long a host's resolution may take (a resolver that does not answer must not hold the
/// reconcile).
pub const RESOLVE_LIMIT: Duration = Duration::from_secs(2);

pub async fn reconcile(plugin: Arc<Plugin>, ctx: Arc<Context>) -> Result<Action> {
    if plugin.meta().deletion_timestamp.is_some() {
        // Owner references take its policies.
        return Ok(Action::await_change());
    }
    let facts = gather(&ctx, &plugin);
    let approved = facts
        .manifest
        .as_deref()
        .map(|manifest| policy::approved(&plugin, manifest))
        .unwrap_or_default();
    let due = policy::due_in(
        approved,
        &plugin.name_any(),
        &facts.runs_in,
        &facts.policies,
    );
    // Hosts are resolved only where a policy of ours is made: elsewhere it opens nothing.
    let allowed = if due.is_empty() {
        Vec::new()
    } else {
        resolve(approved).await
    };
    let steps = policy::plan(&plugin, &due, &facts.policies, &allowed);
    sync(&ctx, &plugin, steps).await?;
    let names_hosts = approved.iter().any(|d| d.host.is_some());
    Ok(if names_hosts && !due.is_empty() {
        Action::requeue(REFRESH)
    } else {
        Action::await_change()
    })
}

/// What a plugin's egress is decided from.
struct Facts {
    /// The manifest admission passed; `None` while the plugin is not admitted (it runs
    /// nowhere, so none of its policies is due).
    manifest: Option<Arc<Manifest>>,
    /// The namespaces where it has instances.
    runs_in: BTreeSet<String>,
    /// Every policy of those namespaces, and the plugin's own wherever they are.
    policies: Vec<Arc<NetworkPolicy>>,
}

/// Reads what the plugin's egress is decided from, from the index.
fn gather(ctx: &Context, plugin: &Plugin) -> Facts {
    let id = plugin.name_any();
    let manifest = admission::admit(&ctx.host(), plugin, &ctx.manifests.of(plugin)).ok();
    let runs_in: BTreeSet<String> = ctx
        .stores
        .instances
        .state()
        .iter()
        .filter(|i| i.spec.plugin == id)
        .filter_map(|i| i.namespace())
        .collect();
    let policies = ctx
        .stores
        .network_policies
        .state()
        .into_iter()
        .filter(|p| {
            p.metadata
                .namespace
                .as_ref()
                .is_some_and(|ns| runs_in.contains(ns))
                || (ours(p) && p.labels().get(model::names::LABEL_PLUGIN) == Some(&id))
        })
        .collect();
    Facts {
        manifest,
        runs_in,
        policies,
    }
}

/// Each approved destination with its IP blocks now.
async fn resolve(approved: &[Destination]) -> Vec<Allowed> {
    let mut allowed = Vec::with_capacity(approved.len());
    for d in approved {
        allowed.push(Allowed {
            destination: d.destination(),
            blocks: blocks(d).await,
            ports: d.ports.clone(),
        });
    }
    allowed
}

/// Carries out `steps` through the write door: every one is tried, and the reconcile then
/// fails with the one that decides when to look again.
async fn sync(ctx: &Context, plugin: &Plugin, steps: Vec<Step>) -> Result<(), WriteError> {
    let mut failures = Failures::default();
    for step in steps {
        match step {
            Step::Apply { desired, live } => {
                failures.check(ctx.writes.apply(desired.as_ref(), live.as_deref()).await);
            }
            Step::Remove(live) => {
                let removed = failures.check(ctx.writes.delete(live.as_ref()).await);
                if removed == Some(true) {
                    tracing::info!(plugin = %plugin.name_any(), namespace = ?live.namespace(), "removed the plugin's egress policy: none is due there");
                }
            }
        }
    }
    failures.into_result()
}

/// A destination's IP blocks: its CIDR, or its host's addresses now (none when it does not
/// resolve: that destination is not reachable until it does).
async fn blocks(d: &Destination) -> Vec<String> {
    if let Some(cidr) = &d.cidr {
        return vec![cidr.clone()];
    }
    let Some(host) = &d.host else {
        return Vec::new();
    };
    let lookup = tokio::net::lookup_host((host.as_str(), 0));
    match tokio::time::timeout(RESOLVE_LIMIT, lookup)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("no answer within 2 s")))
    {
        Ok(addresses) => {
            let mut blocks: Vec<String> = addresses.map(|a| policy::block_of(a.ip())).collect();
            blocks.sort();
            blocks.dedup();
            blocks
        }
        Err(e) => {
            tracing::warn!(%host, error = %e, "an egress host does not resolve; it is not reachable until it does");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_block_is_itself_and_a_host_its_addresses() {
        let block = Destination {
            host: None,
            cidr: Some("10.20.0.0/16".into()),
            ports: vec![1],
        };
        assert_eq!(blocks(&block).await, ["10.20.0.0/16"]);
        let host = Destination {
            host: Some("localhost".into()),
            cidr: None,
            ports: vec![1],
        };
        let found = blocks(&host).await;
        assert!(found.contains(&"127.0.0.1/32".to_string()), "{found:?}");
        let nowhere = Destination {
            host: Some("no-such-host.invalid".into()),
            cidr: None,
            ports: vec![1],
        };
        assert!(blocks(&nowhere).await.is_empty());
    }
}
