//! The Plugin API's own Prometheus metric: writes to the cluster by kind and outcome.
//! Requests are counted for the whole server (`crate::http`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: &'static str,
    pub result: &'static str,
}

/// The Plugin API's metrics.
#[derive(Clone, Default)]
pub struct Metrics {
    pub writes: Family<WriteLabels, Counter>,
}

impl Metrics {
    /// Makes the metrics and registers them under `loop_plugins_api_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry
            .sub_registry_with_prefix("loop_plugins_api")
            .register(
                "writes",
                "Writes to the Kubernetes API, by kind and result",
                metrics.writes.clone(),
            );
        metrics
    }

    /// Metrics no registry exports (tests).
    pub fn unregistered() -> Self {
        Self::default()
    }

    pub fn write(&self, kind: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.writes
            .get_or_create(&WriteLabels { kind, result })
            .inc();
    }
}
