//! How every container we make runs: Pod Security's `restricted` level and more (a read-only
//! root filesystem), said for the Pod and for each container, so no default of the runtime or
//! the image decides it. The controller builds plugin Pods, the trigger's CronJobs and the
//! runner's Jobs with these; `loop-plugins conformance IMAGE` runs a plugin's container with a
//! container engine under the same settings. The chart's own Pods say the same in YAML
//! (charts/loop-plugins/templates).

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, SeccompProfile, SecurityContext,
};

use crate::contract::RunAs;

/// The uid our own binary runs as in the Pods we make for it (the trigger's CronJobs, the
/// runner's Jobs): distroless's `nonroot`, our image's USER.
pub const NONROOT_UID: i64 = 65532;

/// A Pod's part: never root, the runtime's default seccomp profile, and who its containers
/// run as. `Some`: a plugin, as its image's USER, whose group also owns the Pod's volumes
/// (fsGroup, so it can write `/data`); `None`: our own binary, as [`NONROOT_UID`] with its
/// image's group.
pub fn restricted_pod(plugin: Option<RunAs>) -> PodSecurityContext {
    let group = plugin.map(RunAs::group);
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(plugin.map_or(NONROOT_UID, |run_as| run_as.uid)),
        run_as_group: group,
        fs_group: group,
        seccomp_profile: Some(runtime_default()),
        ..Default::default()
    }
}

/// Each container's part: no privilege escalation, a read-only root filesystem, never root,
/// no capabilities. A plugin's containers (`Some`) also say its ids and the seccomp profile
/// themselves; ours (`None`) take the Pod's.
pub fn restricted_container(plugin: Option<RunAs>) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        run_as_user: plugin.map(|run_as| run_as.uid),
        run_as_group: plugin.map(RunAs::group),
        seccomp_profile: plugin.map(|_| runtime_default()),
        ..Default::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_runs_as_its_user_and_its_group_owns_the_volumes_ours_as_nonroot() {
        let plugin = RunAs {
            uid: 1000,
            gid: None,
        };
        let pod = restricted_pod(Some(plugin));
        assert_eq!(
            (pod.run_as_user, pod.run_as_group, pod.fs_group),
            (Some(1000), Some(1000), Some(1000))
        );
        let ours = restricted_pod(None);
        assert_eq!(
            (ours.run_as_user, ours.run_as_group, ours.fs_group),
            (Some(NONROOT_UID), None, None)
        );
        for pod in [pod, ours] {
            assert_eq!(pod.run_as_non_root, Some(true));
            assert_eq!(pod.seccomp_profile, Some(runtime_default()));
        }
        let container = restricted_container(Some(plugin));
        assert_eq!(
            (container.run_as_user, container.run_as_group),
            (Some(1000), Some(1000))
        );
        assert_eq!(container.seccomp_profile, Some(runtime_default()));
        let ours = restricted_container(None);
        assert_eq!((ours.run_as_user, &ours.seccomp_profile), (None, &None));
        for container in [container, ours] {
            assert_eq!(container.allow_privilege_escalation, Some(false));
            assert_eq!(container.read_only_root_filesystem, Some(true));
            assert_eq!(container.run_as_non_root, Some(true));
            let drop = container.capabilities.and_then(|c| c.drop);
            assert_eq!(drop, Some(vec!["ALL".to_string()]));
        }
    }
}
