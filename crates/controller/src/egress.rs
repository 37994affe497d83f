//! Each plugin's egress, as a NetworkPolicy in each namespace where its containers run: the
//! destinations its manifest's `egress` lists, when the owner approved `network.egress`, and
//! nothing else. NetworkPolicies add up: the chart's policy for plugin pods
//! (`networkPolicy.enabled`, in each of `projectNamespaces`) closes everything beyond the API
//! and DNS, and this one opens exactly the approved destinations to this plugin's Pods.
//!
//! So it is made only where a policy already closes plugin Pods' egress ([`closes_egress`]).
//! Where none does, they reach everything already, and a policy of ours would close them off
//! from the API and DNS instead of opening anything.
//!
//! A NetworkPolicy names IP blocks, not host names (kube-router, like most engines, has no
//! DNS-name rules), so a host is resolved here, by the controller's resolver, to the
//! addresses it has now, each a /32 or /128 block; they are resolved again, and the policy
//! put right, every [`REFRESH`]. A host whose addresses change between two resolutions (a
//! CDN, a round-robin with a short TTL) may be refused until the next one: name an IP block
//! for such a destination.
//!
//! The policy is owned by the Plugin (removed with it) and named `loop-plugin-egress-<id>`.
//! Pure: [`approved`], [`closes_egress`], [`policy`]; thin: [`ensure`] (what it last made
//! sure of is `egress_seen`'s).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::error::{Error, Result};
use model::manifest::{Capability, Egress as Destination, Manifest};
use model::names::{self, FIELD_MANAGER};
use model::resolve::approved_capabilities;
use model::resources::Plugin;

/// How long a namespace's policy for a plugin, and the addresses of its hosts, are taken as
/// they were last seen before they are looked at again.
pub const REFRESH: Duration = Duration::from_secs(300);

/// How long a host's resolution may take (a resolver that does not answer must not hold the
/// instance's reconcile).
pub const RESOLVE_LIMIT: Duration = Duration::from_secs(2);

/// Whether the plugin's approved egress names a host, whose addresses are looked up again
/// every [`REFRESH`].
pub fn names_hosts(plugin: &Plugin, manifest: &Manifest) -> bool {
    approved(plugin, manifest).iter().any(|d| d.host.is_some())
}

/// The component label of the policies.
pub const COMPONENT: &str = "egress";

/// The destinations the plugin's Pods may reach: the manifest's `egress` when the owner
/// approved `network.egress`, else none.
pub fn approved<'a>(plugin: &Plugin, manifest: &'a Manifest) -> &'a [Destination] {
    if approved_capabilities(plugin, manifest).contains(&Capability::NetworkEgress) {
        &manifest.egress
    } else {
        &[]
    }
}

/// The policy's name for plugin `id`.
pub fn name(id: &str) -> String {
    format!("loop-plugin-egress-{id}")
}

/// One destination as the policy allows it: IP blocks and TCP ports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Allowed {
    /// What the manifest wrote (`api.github.com:443`), for the policy's annotation.
    pub destination: String,
    pub blocks: Vec<String>,
    pub ports: Vec<u16>,
}

/// The blocks of an address: `/32` or `/128`.
pub fn block_of(address: IpAddr) -> String {
    match address {
        IpAddr::V4(a) => format!("{a}/32"),
        IpAddr::V6(a) => format!("{a}/128"),
    }
}

/// The labels of plugin `id`'s Pods that a policy may select them by.
fn pod_labels(id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::LABEL_NAME.into(), names::PLUGIN_APP_NAME.into()),
        (names::LABEL_COMPONENT.into(), "plugin".into()),
        (names::LABEL_PLUGIN.into(), id.into()),
    ])
}

/// Whether `policy` (not one of ours) closes the egress of plugin `id`'s Pods: it is of type
/// Egress and its selector's labels are among theirs. A selector with expressions is not read
/// (it counts as not selecting them: then no policy of ours is made, which closes nothing).
pub fn closes_egress(policy: &NetworkPolicy, id: &str) -> bool {
    if ours(policy) {
        return false;
    }
    let Some(spec) = &policy.spec else {
        return false;
    };
    let egress = match &spec.policy_types {
        Some(types) => types.iter().any(|t| t == "Egress"),
        None => spec.egress.is_some(),
    };
    let Some(selector) = &spec.pod_selector else {
        return false;
    };
    if selector
        .match_expressions
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        return false;
    }
    let labels = pod_labels(id);
    egress
        && selector
            .match_labels
            .iter()
            .flatten()
            .all(|(k, v)| labels.get(k) == Some(v))
}

/// The policy opening `allowed` to plugin `plugin`'s Pods in `namespace`; `None` when nothing
/// is allowed (no policy: the plugin reaches nothing beyond the host).
pub fn policy(plugin: &Plugin, namespace: &str, allowed: &[Allowed]) -> Option<NetworkPolicy> {
    let id = plugin.name_any();
    let rules: Vec<NetworkPolicyEgressRule> = allowed
        .iter()
        .filter(|a| !a.blocks.is_empty())
        .map(|a| NetworkPolicyEgressRule {
            to: Some(
                a.blocks
                    .iter()
                    .map(|cidr| NetworkPolicyPeer {
                        ip_block: Some(IPBlock {
                            cidr: cidr.clone(),
                            except: None,
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ports: Some(
                a.ports
                    .iter()
                    .map(|p| NetworkPolicyPort {
                        protocol: Some("TCP".into()),
                        port: Some(IntOrString::Int(i32::from(*p))),
                        end_port: None,
                    })
                    .collect(),
            ),
        })
        .collect();
    if rules.is_empty() {
        return None;
    }
    let destinations: Vec<&str> = allowed.iter().map(|a| a.destination.as_str()).collect();
    Some(NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name(&id)),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([
                (names::LABEL_NAME.into(), names::PLUGIN_APP_NAME.into()),
                (names::LABEL_COMPONENT.into(), COMPONENT.into()),
                (names::LABEL_MANAGED_BY.into(), names::MANAGED_BY.into()),
                (names::LABEL_PLUGIN.into(), id.clone()),
            ])),
            annotations: Some(BTreeMap::from([(
                "plugins.loop.dev/egress".into(),
                destinations.join(" "),
            )])),
            // Removed with the Plugin, which waits for nothing of it (no blockOwnerDeletion).
            owner_references: plugin.controller_owner_ref(&()).map(|mut o| {
                o.block_owner_deletion = None;
                vec![o]
            }),
            ..Default::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (names::LABEL_PLUGIN.into(), id),
                    (names::LABEL_COMPONENT.into(), "plugin".into()),
                ])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Egress".into()]),
            egress: Some(rules),
            ingress: None,
        }),
    })
}

/// Makes sure plugin `plugin`'s policy in `namespace` is what its approved egress says (made,
/// put right, or removed), at most once per [`REFRESH`] while nothing changes; returns the
/// destinations it opens there (what the instance's status shows). `shown` is what the
/// instance's status showed: a plugin with no approved egress and nothing shown costs no
/// call (most plugins), and one whose approval went (the status still shows it open, whatever
/// this controller remembers across restarts) has its policy looked for and removed.
pub async fn ensure(
    ctx: &Context,
    plugin: &Plugin,
    manifest: &Manifest,
    namespace: &str,
    shown: &[String],
) -> Result<Vec<String>> {
    let id = plugin.name_any();
    let key = (namespace.to_string(), id.clone());
    let destinations = approved(plugin, manifest);
    let wanted_once = fingerprint(&(plugin.uid(), destinations));
    if destinations.is_empty() && shown.is_empty() {
        // Remembered all the same: approved again, the egress is looked at again.
        ctx.egress.record(key, wanted_once, Vec::new());
        return Ok(Vec::new());
    }
    if let Some(open) = ctx.egress.fresh(&key, wanted_once, REFRESH) {
        return Ok(open);
    }
    let api: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), namespace);
    let name = name(&id);
    let policies = api
        .list(&Default::default())
        .await
        .map_err(|source| Error::Apply {
            kind: "NetworkPolicy",
            name: name.clone(),
            source,
        })?
        .items;
    let closed = policies.iter().any(|p| closes_egress(p, &id));
    // Hosts are resolved only where a policy of ours is made: elsewhere it opens nothing.
    let mut allowed = Vec::new();
    if closed {
        for d in destinations {
            allowed.push(Allowed {
                destination: d.destination(),
                blocks: blocks(d).await,
                ports: d.ports.clone(),
            });
        }
    }
    let desired = policy(plugin, namespace, &allowed);
    let live = policies.into_iter().find(|p| p.name_any() == name);
    match (&desired, &live) {
        (Some(d), Some(l))
            if d.spec == l.spec && d.metadata.annotations == l.metadata.annotations => {}
        (Some(d), _) => {
            tracing::info!(plugin = %id, namespace, egress = ?allowed, "applying the plugin's egress policy");
            ctx.metrics.write("NetworkPolicy", "apply");
            let _turn = ctx.writes.permit().await;
            api.patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(d),
            )
            .await
            .map_err(|source| Error::Apply {
                kind: "NetworkPolicy",
                name: name.clone(),
                source,
            })?;
        }
        (None, Some(l)) if ours(l) => {
            tracing::info!(plugin = %id, namespace, "removing the plugin's egress policy: it has no approved egress");
            ctx.metrics.write("NetworkPolicy", "delete");
            let _turn = ctx.writes.permit().await;
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(source) => {
                    return Err(Error::Apply {
                        kind: "NetworkPolicy",
                        name,
                        source,
                    });
                }
            }
        }
        (None, _) => {}
    }
    // Open: the destinations with a rule (a host that does not resolve has none yet).
    let open: Vec<String> = desired
        .map(|_| {
            allowed
                .iter()
                .filter(|a| !a.blocks.is_empty())
                .map(|a| a.destination.clone())
                .collect()
        })
        .unwrap_or_default();
    ctx.egress.record(key, wanted_once, open.clone());
    Ok(open)
}

/// Whether a live policy is one this controller makes.
fn ours(policy: &NetworkPolicy) -> bool {
    policy
        .meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.get(names::LABEL_COMPONENT).map(String::as_str) == Some(COMPONENT))
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
            let mut blocks: Vec<String> = addresses.map(|a| block_of(a.ip())).collect();
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

fn fingerprint<T: std::hash::Hash>(value: &T) -> u64 {
    use std::hash::{DefaultHasher, Hasher};
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fixtures;

    fn with_egress(approve: bool) -> (Plugin, Manifest) {
        let mut m = fixtures::echo_manifest();
        m["capabilities"]
            .as_array_mut()
            .unwrap()
            .push("network.egress".into());
        m["egress"] = serde_json::json!([
            { "host": "api.github.com", "ports": [443] },
            { "cidr": "10.20.0.0/16", "ports": [5432, 5433] },
        ]);
        let approved: &[&str] = if approve { &["network.egress"] } else { &[] };
        let mut plugin = fixtures::plugin_with(m.clone(), approved);
        plugin.metadata.uid = Some("uid-1".into());
        let manifest = model::manifest::from_value(&m).expect("a valid manifest");
        (plugin, manifest)
    }

    #[test]
    fn only_an_approved_capability_opens_the_destinations() {
        let (plugin, manifest) = with_egress(true);
        assert_eq!(approved(&plugin, &manifest).len(), 2);
        let (plugin, manifest) = with_egress(false);
        assert!(approved(&plugin, &manifest).is_empty());
    }

    #[test]
    fn the_policy_opens_each_block_on_its_ports_to_the_plugins_pods_only() {
        let (plugin, _) = with_egress(true);
        let allowed = [
            Allowed {
                destination: "api.github.com:443".into(),
                blocks: vec![
                    block_of("140.82.112.5".parse().unwrap()),
                    block_of("2606:50c0::1".parse().unwrap()),
                ],
                ports: vec![443],
            },
            Allowed {
                destination: "10.20.0.0/16:5432,5433".into(),
                blocks: vec!["10.20.0.0/16".into()],
                ports: vec![5432, 5433],
            },
            // Not resolved now: no rule (an empty `to` would open every address).
            Allowed {
                destination: "gone.example.com:80".into(),
                blocks: vec![],
                ports: vec![80],
            },
        ];
        let p = policy(&plugin, "team", &allowed).expect("a policy");
        let id = plugin.name_any();
        assert_eq!(p.metadata.name.as_deref(), Some(name(&id).as_str()));
        assert_eq!(p.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(
            p.metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-1"
        );
        let spec = p.spec.unwrap();
        assert_eq!(spec.policy_types, Some(vec!["Egress".to_string()]));
        assert!(spec.ingress.is_none());
        let selector = spec.pod_selector.unwrap().match_labels.unwrap();
        assert_eq!(selector[names::LABEL_PLUGIN], id);
        assert_eq!(selector[names::LABEL_COMPONENT], "plugin");
        let rules = spec.egress.unwrap();
        let read: Vec<(Vec<String>, Vec<i32>)> = rules
            .iter()
            .map(|r| {
                (
                    r.to.iter()
                        .flatten()
                        .map(|peer| peer.ip_block.as_ref().unwrap().cidr.clone())
                        .collect(),
                    r.ports
                        .iter()
                        .flatten()
                        .map(|p| match p.port {
                            Some(IntOrString::Int(n)) => n,
                            _ => 0,
                        })
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            read,
            [
                (
                    vec![
                        "140.82.112.5/32".to_string(),
                        "2606:50c0::1/128".to_string()
                    ],
                    vec![443]
                ),
                (vec!["10.20.0.0/16".to_string()], vec![5432, 5433]),
            ]
        );
        assert!(
            rules
                .iter()
                .flat_map(|r| r.ports.iter().flatten())
                .all(|p| p.protocol.as_deref() == Some("TCP"))
        );
        assert_eq!(
            p.metadata.annotations.unwrap()["plugins.loop.dev/egress"],
            "api.github.com:443 10.20.0.0/16:5432,5433 gone.example.com:80"
        );
    }

    #[test]
    fn only_a_policy_of_type_egress_selecting_plugin_pods_closes_them() {
        let chart: NetworkPolicy = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "loop-plugins-plugins" },
            "spec": {
                "podSelector": { "matchLabels": { "app.kubernetes.io/name": "loop-plugin" } },
                "policyTypes": ["Ingress", "Egress"],
                "egress": [],
            },
        }))
        .unwrap();
        assert!(closes_egress(&chart, "echo"));
        let mut ingress_only = chart.clone();
        ingress_only.spec.as_mut().unwrap().policy_types = Some(vec!["Ingress".into()]);
        assert!(!closes_egress(&ingress_only, "echo"));
        let mut other_plugin = chart.clone();
        other_plugin.spec.as_mut().unwrap().pod_selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                names::LABEL_PLUGIN.to_string(),
                "quiz".to_string(),
            )])),
            ..Default::default()
        });
        assert!(!closes_egress(&other_plugin, "echo"));
        assert!(closes_egress(&other_plugin, "quiz"));
        // Every pod of the namespace: theirs too.
        let mut everyone = chart.clone();
        everyone.spec.as_mut().unwrap().pod_selector = Some(LabelSelector::default());
        assert!(closes_egress(&everyone, "echo"));
        // Ours opens; it closes nothing of its own accord here.
        let (plugin, _) = with_egress(true);
        let allowed = [Allowed {
            destination: "10.20.0.0/16:5432".into(),
            blocks: vec!["10.20.0.0/16".into()],
            ports: vec![5432],
        }];
        let mine = policy(&plugin, "team", &allowed).unwrap();
        assert!(!closes_egress(&mine, &plugin.name_any()));
    }

    #[test]
    fn nothing_allowed_is_no_policy() {
        let (plugin, _) = with_egress(false);
        assert!(policy(&plugin, "team", &[]).is_none());
        let unresolved = [Allowed {
            destination: "gone.example.com:80".into(),
            blocks: vec![],
            ports: vec![80],
        }];
        assert!(policy(&plugin, "team", &unresolved).is_none());
    }

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
