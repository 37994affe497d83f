//! The host API's own Prometheus metric, under `loop_plugins_host_*`: caller checks, by
//! whether the cluster was asked or the cache answered. Requests are counted for the whole
//! server (`crate::http`), calls to plugins by `crate::calls::metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// The host API's metrics.
#[derive(Clone, Default)]
pub struct HostMetrics {
    pub reviews: Family<ResultLabels, Counter>,
}

impl HostMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry
            .sub_registry_with_prefix("loop_plugins_host")
            .register(
                "reviews",
                "Caller checks, by whether the cluster was asked (reviewed) or the cache answered",
                m.reviews.clone(),
            );
        m
    }

    /// Metrics no registry exports (tests).
    pub fn unregistered() -> Self {
        Self::default()
    }
}
