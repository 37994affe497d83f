//! The host API's Prometheus metrics, under `loop_plugins_host_*`: requests by route, calls to
//! plugins by kind and outcome with their latencies, each instance's breaker state, the waits
//! for stopped containers, and the reviews made or reused.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::config::CallKind;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: String,
    pub method: String,
    pub status: u16,
}

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
    pub namespace: String,
    pub instance: String,
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

/// Every metric the host API keeps.
#[derive(Clone)]
pub struct HostMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub calls: Family<CallLabels, Counter>,
    pub call_seconds: Family<KindLabels, Histogram>,
    pub breaker_state: Family<InstanceLabels, Gauge>,
    pub breaker_transitions: Family<TransitionLabels, Counter>,
    pub start_wait_seconds: Histogram,
    pub starts: Family<ResultLabels, Counter>,
    pub reviews: Family<ResultLabels, Counter>,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

impl HostMetrics {
    /// Makes the metrics and registers them under `loop_plugins_host_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::unregistered();
        let sub = registry.sub_registry_with_prefix("loop_plugins_host");
        sub.register(
            "requests",
            "Host API requests, by route, method and status",
            m.requests.clone(),
        );
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
        sub.register(
            "reviews",
            "Caller checks, by whether the cluster was asked (reviewed) or the cache answered",
            m.reviews.clone(),
        );
        m
    }

    /// Metrics no registry exports (tests).
    pub fn unregistered() -> Self {
        Self {
            requests: Family::default(),
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(latency),
            breaker_state: Family::default(),
            breaker_transitions: Family::default(),
            start_wait_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 14)),
            starts: Family::default(),
            reviews: Family::default(),
        }
    }
}

/// Counts each request by its route template.
pub async fn track(
    State(metrics): State<Arc<HostMetrics>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().as_str().to_string();
    let response = next.run(request).await;
    metrics
        .requests
        .get_or_create(&RequestLabels {
            route,
            method,
            status: response.status().as_u16(),
        })
        .inc();
    response
}
