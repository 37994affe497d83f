//! The pure half of a plugin's egress: which destinations its owner approved ([`approved`]),
//! whether a namespace's policies close its Pods' egress ([`closes_egress`]) so that a policy
//! of ours is due there ([`due`]), the policy that opens the destinations ([`policy`]), what
//! to do in each namespace ([`plan`]), and what an instance reads of it ([`here`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

use model::manifest::{Capability, Egress as Destination, Manifest};
use model::names;
use model::resolve::approved_capabilities;
use model::resources::Plugin;

/// The component label of the policies.
pub const COMPONENT: &str = "egress";

/// The annotation listing every destination the plugin declares, as written.
pub const DECLARED: &str = "plugins.loop.dev/egress";

/// The annotation listing the destinations the policy opens now (those with a rule: a host
/// that does not resolve has none), which each instance's status shows.
pub const OPEN: &str = "plugins.loop.dev/egress-open";

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

/// Whether a policy of ours is due for plugin `id` among a namespace's `policies`: the plugin
/// has approved destinations (`approved`), and a policy not ours closes its Pods' egress. Where
/// none does, they reach everything already, and a policy of ours would close them off from
/// the API and DNS instead of opening anything.
pub fn due(approved: &[Destination], id: &str, policies: &[Arc<NetworkPolicy>]) -> bool {
    !approved.is_empty() && policies.iter().any(|p| closes_egress(p, id))
}

/// The policy opening `allowed` to plugin `plugin`'s Pods in `namespace`. A destination with
/// no blocks (a host that does not resolve now) has no rule (an empty `to` would open every
/// address); with none at all the policy opens nothing, which adds nothing to what closes the
/// Pods, and still says what was declared and that nothing is open.
pub fn policy(plugin: &Plugin, namespace: &str, allowed: &[Allowed]) -> NetworkPolicy {
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
    let destinations: Vec<&str> = allowed.iter().map(|a| a.destination.as_str()).collect();
    let open: Vec<&str> = allowed
        .iter()
        .filter(|a| !a.blocks.is_empty())
        .map(|a| a.destination.as_str())
        .collect();
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name(&id)),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([
                (names::LABEL_NAME.into(), names::PLUGIN_APP_NAME.into()),
                (names::LABEL_COMPONENT.into(), COMPONENT.into()),
                (names::LABEL_MANAGED_BY.into(), names::MANAGED_BY.into()),
                (names::LABEL_PLUGIN.into(), id.clone()),
            ])),
            annotations: Some(BTreeMap::from([
                (DECLARED.into(), destinations.join(" ")),
                (OPEN.into(), open.join(" ")),
            ])),
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
    }
}

/// Whether a live policy is one this controller makes.
pub fn ours(policy: &NetworkPolicy) -> bool {
    policy
        .meta()
        .labels
        .as_ref()
        .is_some_and(|l| l.get(names::LABEL_COMPONENT).map(String::as_str) == Some(COMPONENT))
}

/// One step of a plugin's egress in a namespace.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Make the policy, or put it right (`live`, as the cache shows it).
    Apply {
        desired: Box<NetworkPolicy>,
        live: Option<Arc<NetworkPolicy>>,
    },
    /// Remove ours: the plugin runs here no more, or nothing of it is due here.
    Remove(Arc<NetworkPolicy>),
}

/// The namespaces of `runs_in` (where plugin `id` has instances) where a policy of ours is
/// [`due`], among `policies` (every policy of those namespaces, and more).
pub fn due_in(
    approved: &[Destination],
    id: &str,
    runs_in: &BTreeSet<String>,
    policies: &[Arc<NetworkPolicy>],
) -> BTreeSet<String> {
    runs_in
        .iter()
        .filter(|namespace| due(approved, id, &within(policies, namespace)))
        .cloned()
        .collect()
}

/// The policies of `namespace`.
fn within(policies: &[Arc<NetworkPolicy>], namespace: &str) -> Vec<Arc<NetworkPolicy>> {
    policies
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .cloned()
        .collect()
}

/// Whether `policy` is plugin `id`'s egress policy (ours, with its plugin label).
fn of_plugin(policy: &NetworkPolicy, id: &str) -> bool {
    ours(policy) && policy.labels().get(names::LABEL_PLUGIN).map(String::as_str) == Some(id)
}

/// The steps that make plugin `plugin`'s egress what it should be: in each namespace of `due`,
/// its policy opening `allowed`; anywhere else, none of ours (`policies` holds ours of this
/// plugin wherever they are). A policy already as desired is still a step: the write door
/// skips it (see `write`).
pub fn plan(
    plugin: &Plugin,
    due: &BTreeSet<String>,
    policies: &[Arc<NetworkPolicy>],
    allowed: &[Allowed],
) -> Vec<Step> {
    let id = plugin.name_any();
    let mine: Vec<&Arc<NetworkPolicy>> = policies.iter().filter(|p| of_plugin(p, &id)).collect();
    let mut steps: Vec<Step> = due
        .iter()
        .map(|namespace| Step::Apply {
            desired: Box::new(policy(plugin, namespace, allowed)),
            live: mine
                .iter()
                .find(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
                .map(|p| Arc::clone(p)),
        })
        .collect();
    steps.extend(
        mine.into_iter()
            .filter(|p| {
                !p.metadata
                    .namespace
                    .as_ref()
                    .is_some_and(|ns| due.contains(ns))
            })
            .map(|p| Step::Remove(p.clone())),
    );
    steps
}

/// A plugin's egress in one namespace, as its instances there read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Here {
    /// What its Pods may reach beyond the host: what our policy here opens (none without one).
    Open(Vec<String>),
    /// A policy of ours is due here and the cache does not show it yet: its Pods wait for it,
    /// so they never run with less (or more) than their approved egress.
    Awaited,
}

/// The egress of `plugin` (admitted, with `manifest`) in a namespace whose policies are
/// `policies`.
pub fn here(plugin: &Plugin, manifest: &Manifest, policies: &[Arc<NetworkPolicy>]) -> Here {
    let id = plugin.name_any();
    match policies.iter().find(|p| of_plugin(p, &id)) {
        Some(policy) => Here::Open(
            policy
                .annotations()
                .get(OPEN)
                .map(|open| open.split_whitespace().map(String::from).collect())
                .unwrap_or_default(),
        ),
        None if due(approved(plugin, manifest), &id, policies) => Here::Awaited,
        None => Here::Open(Vec::new()),
    }
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
        let p = policy(&plugin, "team", &allowed);
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
        let annotations = p.metadata.annotations.unwrap();
        assert_eq!(
            annotations["plugins.loop.dev/egress"],
            "api.github.com:443 10.20.0.0/16:5432,5433 gone.example.com:80"
        );
        assert_eq!(
            annotations["plugins.loop.dev/egress-open"],
            "api.github.com:443 10.20.0.0/16:5432,5433"
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
        let mine = policy(&plugin, "team", &allowed);
        assert!(!closes_egress(&mine, &plugin.name_any()));
    }

    #[test]
    fn nothing_resolved_is_a_policy_opening_nothing() {
        let (plugin, _) = with_egress(true);
        let unresolved = [Allowed {
            destination: "gone.example.com:80".into(),
            blocks: vec![],
            ports: vec![80],
        }];
        let p = policy(&plugin, "team", &unresolved);
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            spec.egress,
            Some(vec![]),
            "no rule: an empty `to` opens all"
        );
        assert_eq!(spec.policy_types, Some(vec!["Egress".to_string()]));
        assert_eq!(
            here(&plugin, &with_egress(true).1, &[Arc::new(p)]),
            Here::Open(vec![])
        );
    }

    /// The chart's policy closing plugin Pods' egress, in `namespace`.
    fn closing(namespace: &str) -> Arc<NetworkPolicy> {
        let mut chart: NetworkPolicy = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "loop-plugins-plugins" },
            "spec": {
                "podSelector": { "matchLabels": { "app.kubernetes.io/name": "loop-plugin" } },
                "policyTypes": ["Egress"],
            },
        }))
        .unwrap();
        chart.metadata.namespace = Some(namespace.into());
        Arc::new(chart)
    }

    fn cidr() -> Vec<Allowed> {
        vec![Allowed {
            destination: "10.20.0.0/16:5432".into(),
            blocks: vec!["10.20.0.0/16".into()],
            ports: vec![5432],
        }]
    }

    /// The steps for `plugin` with instances in `runs_in`.
    fn planned(
        plugin: &Plugin,
        approved: &[Destination],
        runs_in: &BTreeSet<String>,
        policies: &[Arc<NetworkPolicy>],
    ) -> Vec<Step> {
        let id = plugin.name_any();
        plan(
            plugin,
            &due_in(approved, &id, runs_in, policies),
            policies,
            &cidr(),
        )
    }

    fn kinds(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                Step::Apply { desired, live } => format!(
                    "apply {} (live: {})",
                    desired.namespace().unwrap(),
                    live.is_some()
                ),
                Step::Remove(live) => format!("remove {}", live.namespace().unwrap()),
            })
            .collect()
    }

    #[test]
    fn a_policy_is_made_only_where_the_plugin_runs_and_its_pods_are_closed() {
        let (plugin, manifest) = with_egress(true);
        let destinations = approved(&plugin, &manifest);
        let runs_in = BTreeSet::from(["closed".to_string(), "open".to_string()]);
        // Closed where it runs, and closed where it does not run: ours only where it runs.
        let policies = [closing("closed"), closing("elsewhere")];
        let steps = planned(&plugin, destinations, &runs_in, &policies);
        assert_eq!(kinds(&steps), ["apply closed (live: false)"]);
        // Ours, with the cache showing it: applied over what the cache shows (the door skips it
        // when it is as desired).
        let Step::Apply { desired, .. } = &steps[0] else {
            unreachable!()
        };
        let mine = Arc::new(desired.as_ref().clone());
        let policies = [closing("closed"), mine.clone()];
        let steps = planned(&plugin, destinations, &runs_in, &policies);
        assert_eq!(kinds(&steps), ["apply closed (live: true)"]);
        // The approval goes: ours goes.
        let (unapproved, manifest) = with_egress(false);
        let steps = planned(
            &unapproved,
            approved(&unapproved, &manifest),
            &runs_in,
            &policies,
        );
        assert_eq!(kinds(&steps), ["remove closed"]);
        // The plugin runs there no more, or the policy that closed its Pods went: ours goes.
        let steps = planned(&plugin, destinations, &BTreeSet::new(), &policies);
        assert_eq!(kinds(&steps), ["remove closed"]);
        let steps = planned(&plugin, destinations, &runs_in, &[mine]);
        assert_eq!(kinds(&steps), ["remove closed"]);
        // Another plugin's policy is not ours to remove.
        let mut other = with_egress(true).0;
        other.metadata.name = Some("quiz".into());
        let theirs = Arc::new(policy(&other, "closed", &cidr()));
        let steps = planned(&plugin, destinations, &BTreeSet::new(), &[theirs]);
        assert!(steps.is_empty(), "{:?}", kinds(&steps));
    }

    #[test]
    fn an_instance_reads_what_our_policy_opens_and_waits_for_one_that_is_due() {
        let (plugin, manifest) = with_egress(true);
        // Nothing closes its Pods: nothing of ours is due, and nothing opened.
        assert_eq!(here(&plugin, &manifest, &[]), Here::Open(vec![]));
        // Closed: ours is due, and awaited until the cache shows it.
        let closed = [closing("team")];
        assert_eq!(here(&plugin, &manifest, &closed), Here::Awaited);
        let mine = Arc::new(policy(&plugin, "team", &cidr()));
        assert_eq!(
            here(&plugin, &manifest, &[closing("team"), mine.clone()]),
            Here::Open(vec!["10.20.0.0/16:5432".into()])
        );
        // Not approved: nothing due, and what ours still opens until it goes is what is open.
        let (unapproved, manifest) = with_egress(false);
        assert_eq!(here(&unapproved, &manifest, &closed), Here::Open(vec![]));
        assert_eq!(
            here(&unapproved, &manifest, &[closing("team"), mine]),
            Here::Open(vec!["10.20.0.0/16:5432".into()])
        );
    }
}
