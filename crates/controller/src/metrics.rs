//! The controller's Prometheus metrics: reconciles, failures by category, durations.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

/// Every metric the controller keeps.
#[derive(Clone)]
pub struct Metrics {
    pub reconciles: Family<ControllerLabels, Counter>,
    pub failures: Family<FailureLabels, Counter>,
    pub duration: Family<ControllerLabels, Histogram>,
    pub writes: Family<WriteLabels, Counter>,
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
            writes: Family::default(),
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
        sub.register(
            "writes",
            "Writes made to the Kubernetes API, by kind and verb",
            metrics.writes.clone(),
        );
        metrics
    }

    pub fn write(&self, kind: &'static str, verb: &'static str) {
        self.writes.get_or_create(&WriteLabels { kind, verb }).inc();
    }
}
