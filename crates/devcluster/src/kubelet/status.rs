//! What the stand-in knows of a Pod's containers, and the PodStatus that follows from it.
//! Pure: the worker keeps a [`PodRecord`] and patches what [`pod_status`] makes of it.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// How a container ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// What the process left in its termination message file, as a kubelet reads it.
    pub message: Option<String>,
}

/// Where a container is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Waiting { reason: String, message: String },
    Running { started_at: Timestamp },
    Terminated(Ended),
}

/// One container as the stand-in saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerRecord {
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub container_id: Option<String>,
    pub phase: Phase,
    pub ready: bool,
    pub restart_count: i32,
    pub last_ended: Option<Ended>,
}

impl ContainerRecord {
    pub fn new(name: &str, image: &str) -> Self {
        Self {
            name: name.to_string(),
            image: image.to_string(),
            image_id: String::new(),
            container_id: None,
            phase: Phase::Waiting {
                reason: "ContainerCreating".into(),
                message: String::new(),
            },
            ready: false,
            restart_count: 0,
            last_ended: None,
        }
    }

    fn succeeded(&self) -> bool {
        matches!(&self.phase, Phase::Terminated(e) if e.exit_code == 0)
    }

    fn failed(&self) -> bool {
        matches!(&self.phase, Phase::Terminated(e) if e.exit_code != 0)
    }
}

/// The Pod's restart policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    pub fn parse(policy: Option<&str>) -> Self {
        match policy {
            Some("Never") => Self::Never,
            Some("OnFailure") => Self::OnFailure,
            _ => Self::Always,
        }
    }

    /// Whether a container that exited with `code` runs again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => code != 0,
            Self::Never => false,
        }
    }
}

/// Everything the stand-in reports about one Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRecord {
    pub pod_ip: String,
    pub host_ip: String,
    pub start_time: Timestamp,
    pub restart_policy: RestartPolicy,
    pub init: Vec<ContainerRecord>,
    pub main: Vec<ContainerRecord>,
    /// The Pod cannot run at all (an unsupported volume, say): reason and message.
    pub failure: Option<(String, String)>,
    /// Each condition's last status and when it took it.
    pub transitions: BTreeMap<&'static str, (bool, Timestamp)>,
}

impl PodRecord {
    pub fn init_done(&self) -> bool {
        self.init.iter().all(ContainerRecord::succeeded)
    }

    /// Pending, Running, Succeeded or Failed, by the Pod lifecycle's rules.
    pub fn phase(&self) -> &'static str {
        if self.failure.is_some() {
            return "Failed";
        }
        let never = self.restart_policy == RestartPolicy::Never;
        if !self.init_done() {
            return if never && self.init.iter().any(ContainerRecord::failed) {
                "Failed"
            } else {
                "Pending"
            };
        }
        let all_ended = self
            .main
            .iter()
            .all(|c| matches!(c.phase, Phase::Terminated(_)));
        if all_ended && !self.main.is_empty() {
            if self.main.iter().all(ContainerRecord::succeeded)
                && self.restart_policy != RestartPolicy::Always
            {
                return "Succeeded";
            }
            if never {
                return "Failed";
            }
        }
        let started = self
            .main
            .iter()
            .any(|c| !matches!(c.phase, Phase::Waiting { .. }) || c.restart_count > 0);
        if started { "Running" } else { "Pending" }
    }

    /// Whether every container runs and is ready.
    pub fn ready(&self) -> bool {
        self.init_done()
            && self
                .main
                .iter()
                .all(|c| c.ready && matches!(c.phase, Phase::Running { .. }))
    }

    /// Whether the Pod has ended for good.
    pub fn finished(&self) -> bool {
        matches!(self.phase(), "Succeeded" | "Failed")
    }
}

/// The PodStatus the record stands for at `now`; a condition's lastTransitionTime moves only
/// when its status flips.
pub fn pod_status(record: &mut PodRecord, now: Timestamp) -> PodStatus {
    let phase = record.phase();
    let finished = matches!(phase, "Succeeded" | "Failed");
    let ready = record.ready();
    let reason_if = |ok: bool, reason: &str| {
        if ok || !finished {
            None
        } else {
            Some(reason.to_string())
        }
    };
    let init_done = record.init_done();
    let transitions = &mut record.transitions;
    let mut condition = |type_: &'static str, ok: bool, reason: Option<String>| {
        let since = match transitions.get(type_) {
            Some((was, since)) if *was == ok => *since,
            _ => {
                transitions.insert(type_, (ok, now));
                now
            }
        };
        PodCondition {
            type_: type_.to_string(),
            status: if ok { "True" } else { "False" }.to_string(),
            last_transition_time: Some(Time(since)),
            reason,
            ..Default::default()
        }
    };
    let containers_reason = if finished {
        Some("PodCompleted".to_string())
    } else {
        None
    };
    let conditions = vec![
        condition("PodScheduled", true, None),
        condition("PodReadyToStartContainers", !finished, None),
        condition(
            "Initialized",
            init_done,
            reason_if(init_done, "PodCompleted"),
        ),
        condition("ContainersReady", ready, containers_reason.clone()),
        condition("Ready", ready, containers_reason),
    ];
    let (reason, message) = match &record.failure {
        Some((r, m)) => (Some(r.clone()), Some(m.clone())),
        None => (None, None),
    };
    PodStatus {
        phase: Some(phase.to_string()),
        reason,
        message,
        pod_ip: Some(record.pod_ip.clone()),
        pod_ips: Some(vec![PodIP {
            ip: record.pod_ip.clone(),
        }]),
        host_ip: Some(record.host_ip.clone()),
        host_ips: Some(vec![HostIP {
            ip: record.host_ip.clone(),
        }]),
        start_time: Some(Time(record.start_time)),
        qos_class: None,
        conditions: Some(conditions),
        init_container_statuses: if record.init.is_empty() {
            None
        } else {
            Some(record.init.iter().map(container_status).collect())
        },
        container_statuses: Some(record.main.iter().map(container_status).collect()),
        ..Default::default()
    }
}

fn container_status(c: &ContainerRecord) -> ContainerStatus {
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        container_id: c.container_id.clone(),
        ready: c.ready && matches!(c.phase, Phase::Running { .. }),
        started: Some(matches!(c.phase, Phase::Running { .. })),
        restart_count: c.restart_count,
        state: Some(state(&c.phase)),
        last_state: c.last_ended.as_ref().map(|e| ContainerState {
            terminated: Some(terminated(e)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn state(phase: &Phase) -> ContainerState {
    match phase {
        Phase::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: (!message.is_empty()).then(|| message.clone()),
            }),
            ..Default::default()
        },
        Phase::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started_at)),
            }),
            ..Default::default()
        },
        Phase::Terminated(ended) => ContainerState {
            terminated: Some(terminated(ended)),
            ..Default::default()
        },
    }
}

fn terminated(e: &Ended) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: e.exit_code,
        signal: e.signal,
        reason: Some(
            if e.exit_code == 0 {
                "Completed"
            } else {
                "Error"
            }
            .to_string(),
        ),
        started_at: Some(Time(e.started_at)),
        finished_at: Some(Time(e.finished_at)),
        message: e.message.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(policy: RestartPolicy) -> PodRecord {
        PodRecord {
            pod_ip: "127.1.0.1".into(),
            host_ip: "127.0.0.1".into(),
            start_time: Timestamp::UNIX_EPOCH,
            restart_policy: policy,
            init: vec![ContainerRecord::new("init", "i")],
            main: vec![ContainerRecord::new("main", "m")],
            failure: None,
            transitions: BTreeMap::new(),
        }
    }

    fn ended(code: i32) -> Phase {
        Phase::Terminated(Ended {
            exit_code: code,
            signal: None,
            started_at: Timestamp::UNIX_EPOCH,
            finished_at: Timestamp::UNIX_EPOCH,
            message: None,
        })
    }

    #[test]
    fn phases_follow_the_pod_lifecycle() {
        let mut r = record(RestartPolicy::Never);
        assert_eq!(r.phase(), "Pending");
        r.init[0].phase = ended(1);
        assert_eq!(r.phase(), "Failed");
        r.init[0].phase = ended(0);
        assert_eq!(r.phase(), "Pending");
        r.main[0].phase = Phase::Running {
            started_at: Timestamp::UNIX_EPOCH,
        };
        assert_eq!(r.phase(), "Running");
        assert!(!r.ready());
        r.main[0].ready = true;
        assert!(r.ready());
        r.main[0].phase = ended(0);
        assert_eq!(r.phase(), "Succeeded");
        r.main[0].phase = ended(2);
        assert_eq!(r.phase(), "Failed");
        r.restart_policy = RestartPolicy::OnFailure;
        assert_eq!(r.phase(), "Running");
        r.restart_policy = RestartPolicy::Always;
        r.main[0].phase = ended(0);
        assert_eq!(r.phase(), "Running");
    }

    #[test]
    fn status_reports_ip_conditions_and_exit_codes() {
        let mut r = record(RestartPolicy::Never);
        r.init[0].phase = ended(0);
        r.main[0].phase = ended(3);
        let status = pod_status(&mut r, Timestamp::UNIX_EPOCH);
        assert_eq!(status.phase.as_deref(), Some("Failed"));
        assert_eq!(status.pod_ip.as_deref(), Some("127.1.0.1"));
        let main = &status.container_statuses.unwrap()[0];
        assert_eq!(
            main.state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .exit_code,
            3
        );
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.status, "False");
    }
}
