//! Test namespaces enforce Pod Security's `restricted` level (see `namespace`), so the Pods
//! the tests make themselves must meet it: non-root, no privilege escalation, every
//! capability dropped, the runtime's default seccomp profile.

use k8s_openapi::api::core::v1::{Capabilities, Pod, PodSpec, PodTemplateSpec, SecurityContext};
use model::security::restricted_pod;

/// `pod` meeting the `restricted` level.
pub fn restricted(mut pod: Pod) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        restrict(spec);
    }
    pod
}

/// A Pod template (as JSON) meeting the `restricted` level.
pub fn restricted_template(template: serde_json::Value) -> serde_json::Value {
    let mut template: PodTemplateSpec = serde_json::from_value(template).expect("a Pod template");
    if let Some(spec) = template.spec.as_mut() {
        restrict(spec);
    }
    serde_json::to_value(template).expect("a Pod template serializes")
}

fn restrict(spec: &mut PodSpec) {
    // As the Pods we make for our own binary (model::security::NONROOT_UID).
    spec.security_context = Some(restricted_pod(None));
    let containers = spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten());
    // Without the read-only root of our own containers: the tests' Pods may write anywhere.
    for container in containers {
        container.security_context = Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
}
