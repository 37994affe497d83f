//! What every route of the server shares: the one error body, `{"error": {"code", "message"}}`
//! (each API has its own codes, as its contract lists them), the middleware that gives every
//! error answer that shape whoever made it, and the stack of layers around the whole server
//! (a span per request, request metrics).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::json;
use tower_http::trace::{DefaultOnResponse, OnResponse, TraceLayer};
use tracing::Span;

/// An API's error codes: each with its one status, and one for a bare status made outside the
/// handlers (a rejection, a layer, an unknown route).
pub trait ErrorCode: Copy + std::fmt::Debug + PartialEq + Send + Sync + 'static {
    fn as_str(self) -> &'static str;
    fn status(self) -> StatusCode;
    fn for_status(status: StatusCode) -> Self;
}

/// An error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorAnswer<C> {
    pub code: C,
    pub message: String,
    /// Seconds until trying again makes sense (`Retry-After`).
    pub retry_after: Option<u64>,
    /// The status a plugin answered, when the error is the plugin's.
    pub plugin_status: Option<u16>,
}

impl<C: ErrorCode> ErrorAnswer<C> {
    pub fn new(code: C, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after: None,
            plugin_status: None,
        }
    }

    /// Says when to try again (at least 1 s).
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds.max(1));
        self
    }

    pub fn status(&self) -> StatusCode {
        self.code.status()
    }
}

impl<C: ErrorCode> std::fmt::Display for ErrorAnswer<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl<C: ErrorCode> std::error::Error for ErrorAnswer<C> {}

impl<C: ErrorCode> IntoResponse for ErrorAnswer<C> {
    fn into_response(self) -> Response {
        let status = self.code.status();
        let mut error = json!({ "code": self.code.as_str(), "message": self.message });
        if let Some(s) = self.plugin_status {
            error["plugin_status"] = json!(s);
        }
        let mut response = (status, Json(json!({ "error": error }))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Marks an answer passed through from a plugin (`/x`), which keeps its own status and body.
#[derive(Clone, Copy, Debug)]
pub struct Passthrough;

/// Gives every error answer of `router` the one shape with `C`'s codes, whoever made it (the
/// router's 405, a body or time limit, an extractor's rejection), but a plugin's passed through.
pub fn shape_errors<C: ErrorCode, S: Clone + Send + Sync + 'static>(
    router: Router<S>,
) -> Router<S> {
    router.layer(middleware::from_fn(shape::<C>))
}

/// The middleware of [`shape_errors`], for a router that adds it with its other layers.
pub async fn shape<C: ErrorCode>(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let passthrough = response.extensions().get::<Passthrough>().is_some();
    if passthrough || !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let shaped = ErrorAnswer::new(C::for_status(status), message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let (_, body): (_, Body) = shaped.into_parts();
    Response::from_parts(parts, body)
}

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

/// Requests to the server, both APIs, by route template.
#[derive(Clone)]
pub struct RequestMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<RouteLabels, Histogram>,
}

impl RequestMetrics {
    /// Registered under `loop_plugins_api_*`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::unregistered();
        let sub = registry.sub_registry_with_prefix("loop_plugins_api");
        sub.register(
            "requests",
            "Requests to the API server (Plugin API and host API), by route, method and status",
            metrics.requests.clone(),
        );
        sub.register(
            "request_duration_seconds",
            "How long requests took, by route and method",
            metrics.duration.clone(),
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
        }
    }
}

async fn track(
    State(metrics): State<Arc<RequestMetrics>>,
    request: Request,
    next: Next,
) -> Response {
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

/// The layers around the whole server: a span per request, and its count and duration by route
/// (outermost first, one stack added once). `/healthz` is added outside them.
pub fn stack(router: Router, metrics: Arc<RequestMetrics>) -> Router {
    let layers = tower::ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(metrics, track))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(|response: &Response, latency: Duration, span: &Span| {
                    span.record("status", response.status().as_u16());
                    DefaultOnResponse::default().on_response(response, latency, span);
                }),
        );
    router
        .layer(layers)
        .route("/healthz", axum::routing::get(|| async { "ok" }))
}

/// The span of one request, named `request` (a span exporter sends it as is): its method, the
/// route it matched (the template, `/v1/plugins/{name}`, never the path with its names or the
/// query), and the status once answered. No header value and no body: tokens and settings stay
/// out of logs and traces.
fn request_span(request: &Request) -> Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    tracing::info_span!(
        runtime::logging::REQUEST_SPAN,
        method = %request.method(),
        route,
        status = tracing::field::Empty,
    )
}

/// A request body as `T`: a JSON object, as both APIs' documents describe every body. (serde
/// would also read a struct from an array of its fields by position: `[true]` for
/// `{"hold": true}`.) The error says what is wrong, for the API's `invalid_body`.
pub fn json_object<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some_and(|b| *b != b'{') {
        return Err("the body is not a valid request: it must be a JSON object".to_string());
    }
    // The field a refusal is about is named first (`worktree: invalid type ...`).
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            format!("the body is not a valid request: {inner}")
        } else {
            format!("the body is not a valid request: {path}: {inner}")
        }
    })?;
    de.end()
        .map_err(|e| format!("the body is not a valid request: {e}"))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing_subscriber::layer::{Context, SubscriberExt};

    use super::{RequestMetrics, stack};

    type Fields = BTreeMap<String, String>;

    /// Each span's name and fields, as an exporter would get them.
    #[derive(Clone, Default)]
    struct Spans(Arc<Mutex<BTreeMap<u64, (String, Fields)>>>);

    struct Values<'a>(&'a mut Fields);

    impl Visit for Values<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_string(), value.to_string());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0
                .insert(field.name().to_string(), format!("{value:?}"));
        }
    }

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Spans {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
            let mut fields = Fields::new();
            attrs.record(&mut Values(&mut fields));
            let name = attrs.metadata().name().to_string();
            self.0.lock().unwrap().insert(id.into_u64(), (name, fields));
        }
        fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
            if let Some((_, fields)) = self.0.lock().unwrap().get_mut(&id.into_u64()) {
                values.record(&mut Values(fields));
            }
        }
    }

    /// One `request` span per request with the method, the route's template and the status;
    /// nothing of the path's names, the query or the headers.
    #[tokio::test]
    async fn a_request_has_a_span_with_its_route_not_its_path() {
        let spans = Spans::default();
        let _default =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
        let router = Router::new().route(
            "/v1/plugins/{name}",
            axum::routing::get(|| async { StatusCode::NO_CONTENT }),
        );
        let app = stack(router, Arc::new(RequestMetrics::unregistered()));
        let request = Request::get("/v1/plugins/secret-name?token=query-secret")
            .header("authorization", "Bearer header-secret")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);

        let spans = spans.0.lock().unwrap();
        let requests: Vec<&Fields> = spans
            .values()
            .filter(|(name, _)| name == "request")
            .map(|(_, fields)| fields)
            .collect();
        assert_eq!(requests.len(), 1, "{spans:?}");
        let expected: Fields = [
            ("method", "GET"),
            ("route", "/v1/plugins/{name}"),
            ("status", "204"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(requests[0], &expected);
        let everything = format!("{spans:?}");
        for secret in ["secret-name", "query-secret", "header-secret"] {
            assert!(!everything.contains(secret), "{secret} in {everything}");
        }
    }
}
