//! The controller's Prometheus metrics: reconciles, failures by category, durations, queue
//! depth (counted by `queue`), writes, admission's refusals by stage and agent runs by how
//! they ended. What the cluster holds
//! (instances by phase, quota used) the API server counts from its index at each scrape
//! (`server::gauges`): it runs on every replica, the controller's index only on the leader.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub controller: &'static str,
    pub category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: &'static str,
    pub verb: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    /// The admission stage that refused (`Manifest`, `Signature`, `Capabilities`, ...).
    pub stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The kind, as the API server names it (`Plugin`, `Secret`, ...).
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `Succeeded` or `Failed`.
    pub outcome: &'static str,
}

/// The controllers, as the `controller` label names them.
pub const CONTROLLERS: [&str; 6] = ["plugin", "egress", "chat", "instance", "project", "run"];

/// Every metric the controller keeps.
#[derive(Clone)]
pub struct Metrics {
    pub reconciles: Family<ControllerLabels, Counter>,
    pub failures: Family<FailureLabels, Counter>,
    pub duration: Family<ControllerLabels, Histogram>,
    pub queue_depth: Family<ControllerLabels, Gauge>,
    pub writes: Family<WriteLabels, Counter>,
    pub admission_refusals: Family<StageLabels, Counter>,
    pub runs_ended: Family<OutcomeLabels, Counter>,
    pub unreadable: Family<KindLabels, Gauge>,
}

impl Metrics {
    /// Makes the metrics and registers them under `loop_plugins_controller_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconciles: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 14))
            }),
            queue_depth: Family::default(),
            writes: Family::default(),
            admission_refusals: Family::default(),
            runs_ended: Family::default(),
            unreadable: Family::default(),
        };
        let sub = registry.sub_registry_with_prefix("loop_plugins_controller");
        sub.register("reconciles", "Reconciles run", metrics.reconciles.clone());
        sub.register(
            "reconcile_failures",
            "Reconciles that failed, by category",
            metrics.failures.clone(),
        );
        sub.register(
            "reconcile_duration_seconds",
            "How long reconciles took",
            metrics.duration.clone(),
        );
        // Every controller's from the start: an empty queue is a series at 0, not none.
        for controller in CONTROLLERS {
            let _ = metrics
                .queue_depth
                .get_or_create(&ControllerLabels { controller });
        }
        sub.register(
            "queue_depth",
            "Objects a change woke that have not begun to reconcile, by controller",
            metrics.queue_depth.clone(),
        );
        sub.register(
            "writes",
            "Writes made to the Kubernetes API, by kind and verb",
            metrics.writes.clone(),
        );
        // Each stage and outcome from zero: a first refusal (or run) after a start shows as
        // an increase, which it would not if its series began at 1.
        for stage in model::resources::AdmissionStage::ALL {
            let _ = metrics.admission_refusals.get_or_create(&StageLabels {
                stage: stage.name(),
            });
        }
        for outcome in ["Succeeded", "Failed"] {
            let _ = metrics.runs_ended.get_or_create(&OutcomeLabels { outcome });
        }
        sub.register(
            "admission_refusals",
            "Plugins admission came to refuse, by the stage that refused (once per new verdict)",
            metrics.admission_refusals.clone(),
        );
        sub.register(
            "runs_ended",
            "Agent runs that ended, by outcome (Succeeded or Failed)",
            metrics.runs_ended.clone(),
        );
        metrics.unreadable_counts(&Default::default());
        sub.register(
            "unreadable_objects",
            "Objects the controller leaves out because they do not parse as their type, by kind",
            metrics.unreadable.clone(),
        );
        metrics
    }

    pub fn write(&self, kind: &'static str, verb: &'static str) {
        self.writes.get_or_create(&WriteLabels { kind, verb }).inc();
    }

    /// Admission came to refuse a plugin at `stage`.
    pub fn refused(&self, stage: &'static str) {
        self.admission_refusals
            .get_or_create(&StageLabels { stage })
            .inc();
    }

    /// The objects left out now, by kind: every kind the index may watch has a series.
    pub fn unreadable_counts(&self, counts: &std::collections::BTreeMap<String, i64>) {
        let kinds = index::kinds::KINDS.iter().map(|k| k.to_string());
        for kind in kinds.chain(counts.keys().cloned()) {
            let count = counts.get(&kind).copied().unwrap_or(0);
            self.unreadable
                .get_or_create(&KindLabels { kind })
                .set(count);
        }
    }

    /// An agent run ended (`Succeeded` or `Failed`).
    pub fn run_ended(&self, outcome: &'static str) {
        self.runs_ended
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_ended_runs_queues_and_unreadable_objects_start_at_zero_for_each_label() {
        let mut registry = Registry::default();
        Metrics::new(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"loop_plugins_controller_admission_refusals_total{stage="Host"} 0"#,
            r#"loop_plugins_controller_admission_refusals_total{stage="Names"} 0"#,
            r#"loop_plugins_controller_runs_ended_total{outcome="Succeeded"} 0"#,
            r#"loop_plugins_controller_runs_ended_total{outcome="Failed"} 0"#,
            r#"loop_plugins_controller_queue_depth{controller="chat"} 0"#,
            r#"loop_plugins_controller_queue_depth{controller="run"} 0"#,
            r#"loop_plugins_controller_unreadable_objects{kind="Plugin"} 0"#,
            r#"loop_plugins_controller_unreadable_objects{kind="Secret"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
