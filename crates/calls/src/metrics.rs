//! Calls to plugins in Prometheus, under `loop_plugins_host_*` (the names the host API has
//! always exported): calls by kind and outcome with their latencies, each instance's breaker
//! state, and the waits for stopped containers.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::config::CallKind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub kind: CallKind,
    /// `answered`, or why not: `timeout`, `refused`, `too_large`, `broken`, `breaker_open`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: CallKind,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstanceLabels {
    /// Not `namespace` and `instance`: Prometheus gives every series of a target those labels
    /// (the target's address; the Prometheus Operator: the Pod's namespace), and would move
    /// ours aside to `exported_*`.
    pub instance_namespace: String,
    pub plugin_instance: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// `Open`, `HalfOpen` or `Closed`.
    pub to: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// Every metric of calls to plugins.
#[derive(Clone)]
pub struct CallMetrics {
    pub calls: Family<CallLabels, Counter>,
    pub call_seconds: Family<KindLabels, Histogram>,
    pub breaker_state: Family<InstanceLabels, Gauge>,
    pub breaker_transitions: Family<TransitionLabels, Counter>,
    pub start_wait_seconds: Histogram,
    pub starts: Family<ResultLabels, Counter>,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

impl CallMetrics {
    /// Makes the metrics and registers them under `loop_plugins_host_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::unregistered();
        let sub = registry.sub_registry_with_prefix("loop_plugins_host");
        sub.register(
            "plugin_calls",
            "Calls to plugin containers, by kind and outcome",
            m.calls.clone(),
        );
        sub.register(
            "plugin_call_duration_seconds",
            "How long calls to plugin containers took, by kind",
            m.call_seconds.clone(),
        );
        sub.register(
            "breaker_state",
            "Each instance's breaker: 0 closed, 1 open, 2 half-open",
            m.breaker_state.clone(),
        );
        sub.register(
            "breaker_transitions",
            "Breakers that changed state, by the state entered",
            m.breaker_transitions.clone(),
        );
        sub.register(
            "start_wait_seconds",
            "How long calls waited for a stopped container to become Ready",
            m.start_wait_seconds.clone(),
        );
        sub.register(
            "starts",
            "Calls that waited for a container, by result (ready, timeout, queue_full)",
            m.starts.clone(),
        );
        m
    }

    /// Metrics no registry exports (tests).
    pub fn unregistered() -> Self {
        Self {
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(latency),
            breaker_state: Family::default(),
            breaker_transitions: Family::default(),
            start_wait_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            starts: Family::default(),
        }
    }
}
