//! Which changes of a child or a chat wake a reconciler (`wake`): what the cluster writes on
//! its own wakes nobody; what we set, edited by anyone, does. And which objects a change
//! wakes: one test per mapping.

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::fixtures::{
    NS, channel, closing_policy, echo_plugin, egress_plugin, instance, project, served, trust,
};
use crate::chat::desired_instance;
use crate::cronjob::{CronJobInputs, build_cronjob};
use crate::pod::build_data_claim;
use crate::wake::{
    Fingerprint, chats_of_project, clusters_annotation, every, instances_of_chat,
    instances_of_plugin, instances_of_policy, instances_of_project, plugins_of_policy,
    plugins_sharing_names, project_of_trust,
};
use index::compact::Compact;
use model::resources::{
    InstancePhase, Plugin, PluginInstance, PluginInstanceSpec, PluginInstanceStatus, PluginStatus,
    Project,
};
use model::schedule::Timing;

fn owner() -> OwnerReference {
    channel("general")
        .controller_owner_ref(&())
        .expect("a served chat has a uid")
}

fn claim() -> PersistentVolumeClaim {
    served(build_data_claim("echo", "proj", "general", NS, owner()))
}

fn cronjob() -> CronJob {
    served(build_cronjob(&CronJobInputs {
        plugin: "echo",
        project: "proj",
        channel: "general",
        namespace: NS,
        action: "tidy",
        timing: &Timing::EveryTick("0 * * * *".into()),
        suspend: false,
        entry_hash: "abc",
        entry_enabled: true,
        self_image: "registry.local/loop-plugins@sha256:00",
        api_url: "http://api:8080",
        owner: owner(),
        options: &Default::default(),
        working_tree: None,
    }))
}

/// The fingerprint of `object` as the store keeps it.
fn compact<K>(object: &K) -> u64
where
    K: k8s_openapi::Resource
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    Compact::of(object).fingerprint()
}

#[test]
fn a_claims_binding_wakes_no_chat() {
    let made = claim();
    let mut bound = made.clone();
    bound.metadata.resource_version = Some("7".into());
    bound.annotations_mut().extend([
        ("pv.kubernetes.io/bind-completed".into(), "yes".into()),
        ("pv.kubernetes.io/bound-by-controller".into(), "yes".into()),
    ]);
    bound.spec.as_mut().unwrap().volume_name = Some("pvc-uid-data".into());
    bound.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Bound".into()),
        ..Default::default()
    });
    assert_eq!(compact(&made), compact(&bound));
}

#[test]
fn an_edit_of_what_the_chat_sets_on_a_claim_wakes_it() {
    let made = claim();
    let mut relabelled = made.clone();
    relabelled
        .labels_mut()
        .insert("app.kubernetes.io/managed-by".into(), "someone".into());
    let mut resized = made.clone();
    resized
        .spec
        .as_mut()
        .unwrap()
        .access_modes
        .replace(vec!["ReadWriteMany".into()]);
    let mut annotated = made.clone();
    annotated
        .annotations_mut()
        .insert("example.com/note".into(), "mine".into());
    let mut orphaned = made.clone();
    orphaned.metadata.owner_references = None;
    let mut going = made.clone();
    going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    for changed in [relabelled, resized, annotated, orphaned, going] {
        assert_ne!(compact(&made), compact(&changed), "{changed:?}");
    }
}

#[test]
fn a_cronjobs_runs_wake_no_chat_but_its_spec_does() {
    let made = cronjob();
    let mut ran = made.clone();
    ran.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        ..Default::default()
    });
    assert_eq!(compact(&made), compact(&ran));
    let mut suspended = made.clone();
    suspended.spec.suspend = Some(true);
    assert_ne!(compact(&made), compact(&suspended));
    let mut other_entry = made.clone();
    other_entry
        .annotations_mut()
        .insert(crate::cronjob::ANNOTATION_ENTRY.into(), "def".into());
    assert_ne!(compact(&made), compact(&other_entry));
}

#[test]
fn an_instances_status_wakes_no_chat_but_its_spec_and_labels_do() {
    let made = instance();
    let mut observed = made.clone();
    observed.metadata.resource_version = Some("9".into());
    observed.status = Some(PluginInstanceStatus {
        phase: Some(InstancePhase::Stopped),
        ..Default::default()
    });
    assert_eq!(made.fingerprint(), observed.fingerprint());
    let mut respecced = made.clone();
    respecced.metadata.generation = Some(2);
    let mut relabelled = made.clone();
    relabelled
        .labels_mut()
        .remove("app.kubernetes.io/managed-by");
    for changed in [respecced, relabelled] {
        assert_ne!(made.fingerprint(), changed.fingerprint());
    }
}

#[test]
fn a_chats_status_wakes_no_instance_but_its_spec_and_deletion_do() {
    let made = channel("general");
    let mut observed = made.clone();
    observed.metadata.resource_version = Some("5".into());
    observed.status = Some(model::resources::ChannelStatus {
        observed_generation: Some(1),
        plugins: vec!["echo".into()],
        ..Default::default()
    });
    assert_eq!(made.fingerprint(), observed.fingerprint());
    let mut respecced = made.clone();
    respecced.metadata.generation = Some(2);
    let mut going = made.clone();
    going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    for changed in [respecced, going] {
        assert_ne!(made.fingerprint(), changed.fingerprint());
    }
}

/// What the fingerprints leave out must be nothing a builder sets, or a hand edit of it would
/// wake nobody and stay.
#[test]
fn no_builder_sets_what_the_fingerprints_leave_out() {
    let instance = desired_instance("echo", "proj", "general", NS, owner());
    let claim = claim();
    let cronjob = cronjob();
    let annotations = [
        instance.annotations(),
        claim.annotations(),
        cronjob.annotations(),
    ];
    for key in annotations.iter().flat_map(|a| a.keys()) {
        assert!(!clusters_annotation(key), "a builder sets {key}");
    }
    assert_eq!(claim.spec.as_ref().unwrap().volume_name, None);
}

#[test]
fn annotations_in_the_kubernetes_domains_are_the_clusters() {
    for key in [
        "pv.kubernetes.io/bind-completed",
        "kubernetes.io/change-cause",
        "kubectl.kubernetes.io/last-applied-configuration",
        "volume.beta.kubernetes.io/storage-provisioner",
        "k8s.io/x",
    ] {
        assert!(clusters_annotation(key), "{key}");
    }
    for key in [
        "plugins.loop.dev/schedule-entry",
        "example.com/kubernetes.io",
        "notkubernetes.io/x",
        "plain",
    ] {
        assert!(!clusters_annotation(key), "{key}");
    }
}

#[test]
fn a_chats_change_wakes_its_instances_and_its_threads() {
    let general = channel("general");
    let mut thread = channel("general-t1");
    thread.spec.kind = model::resources::ChannelKind::Thread;
    thread.spec.parent = Some("general".into());
    let other = channel("random");
    let mut elsewhere = channel("general");
    elsewhere.metadata.namespace = Some("other".into());
    let of = |chat: &str, ns: &str| {
        let mut i = PluginInstance::new(
            &format!("echo-{chat}"),
            model::resources::PluginInstanceSpec {
                plugin: "echo".into(),
                channel: chat.into(),
                project: "proj".into(),
            },
        );
        i.metadata.namespace = Some(ns.into());
        i
    };
    let instances = [
        of("general", NS),
        of("general-t1", NS),
        of("random", NS),
        of("general", "other"),
    ];
    let chats = [general.clone(), thread, other, elsewhere];
    let woken = instances_of_chat(&general, chats.iter(), instances.iter());
    assert_eq!(
        woken,
        vec![
            ObjectRef::new("echo-general").within(NS),
            ObjectRef::new("echo-general-t1").within(NS),
        ]
    );
}

/// An instance of `plugin` in chat `chat` of project `project`, in `namespace`.
fn instance_of(plugin: &str, chat: &str, project: &str, namespace: &str) -> PluginInstance {
    let mut i = PluginInstance::new(
        &format!("{plugin}-{chat}"),
        PluginInstanceSpec {
            plugin: plugin.into(),
            channel: chat.into(),
            project: project.into(),
        },
    );
    i.metadata.namespace = Some(namespace.into());
    i
}

/// A Plugin named `name` declaring these tools.
fn plugin_declaring(name: &str, tools: &[&str]) -> Plugin {
    let mut plugin = echo_plugin();
    plugin.metadata.name = Some(name.into());
    let tools: Vec<_> = tools
        .iter()
        .map(|t| serde_json::json!({"name": t, "input_schema": {"type": "object"}}))
        .collect();
    plugin
        .spec
        .manifest
        .rest
        .insert("tools".into(), serde_json::json!(tools));
    plugin
}

#[test]
fn a_change_that_concerns_them_all_wakes_every_object() {
    let chats = [channel("general"), channel("random")];
    assert_eq!(
        every(chats.iter()),
        vec![
            ObjectRef::new("general").within(NS),
            ObjectRef::new("random").within(NS),
        ]
    );
    let plugins = [
        plugin_declaring("echo", &[]),
        plugin_declaring("other", &[]),
    ];
    assert_eq!(
        every(plugins.iter()),
        vec![ObjectRef::new("echo"), ObjectRef::new("other")]
    );
    assert!(every::<Plugin>([]).is_empty());
}

#[test]
fn a_plugins_change_wakes_those_sharing_a_name_and_those_refused_for_one() {
    let changed = plugin_declaring("echo", &["say"]);
    let mut refused = plugin_declaring("late", &["shout"]);
    refused.status = Some(PluginStatus {
        stage: Some("Names".into()),
        ..Default::default()
    });
    let plugins = [
        plugin_declaring("echo", &["say"]),
        plugin_declaring("parrot", &["say"]),
        plugin_declaring("named-echo", &["echo"]),
        refused,
        plugin_declaring("quiet", &["whisper"]),
    ];
    assert_eq!(
        plugins_sharing_names(&changed, plugins.iter()),
        vec![
            ObjectRef::new("parrot"),
            ObjectRef::new("named-echo"),
            ObjectRef::new("late"),
        ]
    );
}

#[test]
fn a_projects_change_wakes_its_chats_in_its_namespace() {
    let mut other_project = channel("elsewhere");
    other_project.spec.project = "other".into();
    let mut other_namespace = channel("general");
    other_namespace.metadata.namespace = Some("other".into());
    let chats = [
        channel("general"),
        other_project,
        other_namespace,
        channel("random"),
    ];
    assert_eq!(
        chats_of_project(Some(NS), "proj", chats.iter()),
        vec![
            ObjectRef::new("general").within(NS),
            ObjectRef::new("random").within(NS),
        ]
    );
}

#[test]
fn a_plugins_change_wakes_its_instances_in_every_chat() {
    let instances = [
        instance_of("echo", "general", "proj", NS),
        instance_of("parrot", "general", "proj", NS),
        instance_of("echo", "general", "proj", "other"),
    ];
    assert_eq!(
        instances_of_plugin(&plugin_declaring("echo", &[]), instances.iter()),
        vec![
            ObjectRef::new("echo-general").within(NS),
            ObjectRef::new("echo-general").within("other"),
        ]
    );
}

#[test]
fn a_projects_change_wakes_the_instances_of_its_chats() {
    let instances = [
        instance_of("echo", "general", "proj", NS),
        instance_of("echo", "random", "other", NS),
        instance_of("parrot", "general", "proj", "other"),
        instance_of("parrot", "random", "proj", NS),
    ];
    assert_eq!(
        instances_of_project(&project(true), instances.iter()),
        vec![
            ObjectRef::new("echo-general").within(NS),
            ObjectRef::new("parrot-random").within(NS),
        ]
    );
    let nameless = Project {
        metadata: Default::default(),
        ..project(true)
    };
    assert!(instances_of_project(&nameless, instances.iter()).is_empty());
}

#[test]
fn a_trusts_change_wakes_its_project() {
    assert_eq!(
        project_of_trust(&trust(true)),
        ObjectRef::<Project>::new("proj").within(NS)
    );
}

/// A plugin's egress policy wakes its owner and that plugin's instances in its namespace;
/// another policy (one that may close plugin Pods' egress) the plugins running in its namespace
/// and every instance there.
#[test]
fn a_policys_change_wakes_its_plugin_or_those_running_in_its_namespace() {
    let instances = [
        instance_of("echo", "general", "proj", NS),
        instance_of("quiz", "general", "proj", NS),
        instance_of("echo", "general", "proj", "elsewhere"),
    ];
    let names = |woken: Vec<ObjectRef<PluginInstance>>| -> Vec<String> {
        woken
            .iter()
            .map(|i| format!("{}/{}", i.namespace.as_deref().unwrap_or_default(), i.name))
            .collect()
    };
    let plugin = egress_plugin(true);
    let ours = crate::egress::policy::policy(&plugin, NS, &[]);
    assert_eq!(
        plugins_of_policy(&ours, &instances),
        [ObjectRef::<Plugin>::new("echo")]
    );
    assert_eq!(
        names(instances_of_policy(&ours, &instances)),
        [format!("{NS}/echo-general")]
    );
    let closing = closing_policy();
    assert_eq!(
        plugins_of_policy(&closing, &instances),
        [ObjectRef::<Plugin>::new("echo"), ObjectRef::new("quiz")]
    );
    assert_eq!(
        names(instances_of_policy(&closing, &instances)),
        [format!("{NS}/echo-general"), format!("{NS}/quiz-general")]
    );
    // Ours without its owner (edited away): it wakes nobody, and is no other policy either.
    let mut orphan = ours.clone();
    orphan.metadata.owner_references = None;
    assert!(plugins_of_policy(&orphan, &instances).is_empty());
    assert!(instances_of_policy(&orphan, &instances).is_empty());
}
