//! The API server's Prometheus metrics: requests by route, method and status, their
//! durations, and writes to the cluster by kind and outcome.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route's template (`/api/plugin/v1/runs/{run_id}`), `unmatched` for none.
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: &'static str,
    pub result: &'static str,
}

/// Every metric the API server keeps.
#[derive(Clone)]
pub struct Metrics {
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<RouteLabels, Histogram>,
    pub writes: Family<WriteLabels, Counter>,
}

impl Metrics {
    /// Makes the metrics and registers them under `loop_plugins_api_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::unregistered();
        let sub = registry.sub_registry_with_prefix("loop_plugins_api");
        sub.register(
            "requests",
            "Plugin API requests, by route, method and status",
            metrics.requests.clone(),
        );
        sub.register(
            "request_duration_seconds",
            "How long Plugin API requests took, by route and method",
            metrics.duration.clone(),
        );
        sub.register(
            "writes",
            "Writes to the Kubernetes API, by kind and result",
            metrics.writes.clone(),
        );
        metrics
    }

    /// Metrics no registry exports (tests).
    pub fn unregistered() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 16))
            }),
            writes: Family::default(),
        }
    }

    pub fn write(&self, kind: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.writes
            .get_or_create(&WriteLabels { kind, result })
            .inc();
    }
}

/// Counts and times each request by its route template.
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let method = request.method().as_str().to_string();
    let start = Instant::now();
    let response = next.run(request).await;
    metrics
        .duration
        .get_or_create(&RouteLabels {
            route: route.clone(),
            method: method.clone(),
        })
        .observe(start.elapsed().as_secs_f64());
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
