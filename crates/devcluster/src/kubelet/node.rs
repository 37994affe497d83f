//! The stand-in's Node: registered Ready, kept alive by renewing its Lease like a kubelet does,
//! so the node lifecycle controller never taints it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use crate::error::{Error, Result};

/// The field manager of everything the stand-in writes.
pub const MANAGER: &str = "loop-plugins-devkubelet";
/// How long the Lease holds; renewed every quarter of it, as the kubelet does.
const LEASE_SECONDS: i32 = 40;

/// Creates (or takes over) the Node and marks it Ready.
pub async fn register(client: &Client, name: &str) -> Result<Node> {
    let api: Api<Node> = Api::all(client.clone());
    let params = PatchParams::apply(MANAGER).force();
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name.to_string()),
                ("kubernetes.io/os".to_string(), "linux".to_string()),
                (
                    "kubernetes.io/arch".to_string(),
                    std::env::consts::ARCH.to_string(),
                ),
                (
                    "loop-plugins.dev/devkubelet".to_string(),
                    "true".to_string(),
                ),
            ])),
            ..Default::default()
        },
        ..Default::default()
    };
    api.patch(name, &params, &Patch::Apply(&node))
        .await
        .map_err(Error::kube(format!("registering Node {name}")))?;

    let now = Time(Timestamp::now());
    let condition = |type_: &str, status: &str, reason: &str| NodeCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        last_heartbeat_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
        ..Default::default()
    };
    let capacity = BTreeMap::from([
        ("cpu".to_string(), Quantity("64".into())),
        ("memory".to_string(), Quantity("256Gi".into())),
        ("pods".to_string(), Quantity("1000".into())),
        ("ephemeral-storage".to_string(), Quantity("1Ti".into())),
    ]);
    let status = NodeStatus {
        conditions: Some(vec![
            condition("Ready", "True", "KubeletReady"),
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID"),
        ]),
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: "127.0.0.1".into(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: name.to_string(),
            },
        ]),
        capacity: Some(capacity.clone()),
        allocatable: Some(capacity),
        node_info: Some(NodeSystemInfo {
            architecture: std::env::consts::ARCH.to_string(),
            operating_system: "linux".into(),
            os_image: "loop-plugins devkubelet (local processes)".into(),
            kernel_version: String::new(),
            container_runtime_version: "local://0".into(),
            kubelet_version: "v0.0.0-devkubelet".into(),
            machine_id: name.to_string(),
            system_uuid: name.to_string(),
            boot_id: name.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let patch = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name },
        "status": status,
    });
    api.patch_status(name, &params, &Patch::Apply(&patch))
        .await
        .map_err(Error::kube(format!("reporting Node {name} Ready")))
}

/// Renews the Node's Lease in kube-node-lease for as long as the task runs.
pub async fn heartbeat(client: Client, node: Node) {
    let name = node.name_any();
    let api: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let params = PatchParams::apply(MANAGER).force();
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: name.clone(),
        uid: node.uid().unwrap_or_default(),
        ..Default::default()
    };
    let mut tick = tokio::time::interval(Duration::from_secs((LEASE_SECONDS / 4) as u64));
    loop {
        tick.tick().await;
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(name.clone()),
                lease_duration_seconds: Some(LEASE_SECONDS),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..Default::default()
            }),
        };
        if let Err(e) = api.patch(&name, &params, &Patch::Apply(&lease)).await {
            tracing::warn!(node = %name, error = %e, "renewing the node lease failed");
        }
    }
}
