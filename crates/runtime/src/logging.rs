//! Logs and traces. Logs: tracing to stderr, filtered by `RUST_LOG` (default `info,kube=warn`).
//! Traces: when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set, the
//! same spans (those the filter lets through: a `reconcile` per reconcile, a `request` per API
//! request) also go to that collector over OTLP/HTTP (protobuf), batched, as the service named
//! by `OTEL_SERVICE_NAME` or the role's own name. Unset, nothing else is built: no exporter, no
//! thread.
//!
//! | variable                              | what it does                                        |
//! |---------------------------------------|-----------------------------------------------------|
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`  | the full URL spans are posted to, as written        |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT`         | the collector's base URL; spans go to `/v1/traces`  |
//! | `OTEL_SERVICE_NAME`                   | `service.name` instead of the role's                |
//! | `OTEL_EXPORTER_OTLP_HEADERS`          | headers on each export (read by the exporter)       |
//!
//! A span named [`REQUEST_SPAN`] (one per API request) goes to the exporter only, never into
//! log lines: formatting its fields for every request cost the API server 6% of a request's CPU
//! (issue 31's profile of GET /channel).
//!
//! The batch processor exports from a thread of its own with a blocking HTTP client (reqwest's),
//! so exporting never waits on the role's runtime; [`Traces`] flushes what is left when the role
//! returns (SIGTERM).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Installs the subscriber once (logs only); later calls do nothing.
pub fn init() {
    let _ = Traces::off().subscriber().try_init();
}

/// Installs the subscriber once, with spans exported when an OTLP endpoint is set (see the
/// module doc); `service` is the `service.name` unless `OTEL_SERVICE_NAME` says otherwise. Keep
/// the answer until the role returns: dropping it flushes the spans not yet sent.
pub fn init_traced(service: &'static str) -> Traces {
    let export = Export::from_env(|name| std::env::var(name).ok(), service);
    let (traces, failed) = match &export {
        None => (Traces::off(), None),
        Some(export) => match Traces::start(export) {
            Ok(traces) => (traces, None),
            Err(err) => (Traces::off(), Some(err)),
        },
    };
    if traces.subscriber().try_init().is_ok()
        && let Some(export) = export
    {
        match failed {
            None => tracing::info!(
                endpoint = %export.endpoint,
                service = %export.service,
                "exporting traces over OTLP/HTTP"
            ),
            Some(err) => {
                tracing::error!("traces are not exported to {}: {err:#}", export.endpoint)
            }
        }
    }
    traces
}

/// The span exporter, while it lives (none when no endpoint is set); dropping it sends the
/// spans still batched and stops it.
#[must_use = "dropping it stops the trace exporter"]
pub struct Traces {
    provider: Option<SdkTracerProvider>,
}

impl Traces {
    /// No export: logs only.
    pub fn off() -> Self {
        Self { provider: None }
    }

    /// A batch exporter posting to `export`'s endpoint. Call it outside an async runtime: the
    /// blocking HTTP client starts one of its own.
    pub fn start(export: &Export) -> anyhow::Result<Self> {
        Ok(Self {
            provider: Some(export.provider()?),
        })
    }

    /// The subscriber every role installs: `RUST_LOG`'s filter, logs to stderr, and the spans
    /// the filter lets through to the exporter when there is one.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let export = self
            .provider
            .as_ref()
            .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("loop-plugins")));
        tracing_subscriber::registry()
            .with(filter())
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
                        !(meta.is_span() && meta.name() == REQUEST_SPAN)
                    })),
            )
            .with(export)
    }
}

/// The name of the API server's span per request: exported, not logged (see the module doc).
pub const REQUEST_SPAN: &str = "request";

fn filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into())
}

impl Drop for Traces {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            eprintln!("the last spans were not exported: {err}");
        }
    }
}

/// Where spans go and as which service, from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Export {
    /// The full URL spans are posted to.
    pub endpoint: String,
    pub service: String,
}

impl Export {
    /// `None` when neither endpoint variable is set (or both are empty): no export.
    pub fn from_env(var: impl Fn(&str) -> Option<String>, service: &str) -> Option<Self> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let endpoint = match set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            Some(url) => url,
            None => format!(
                "{}/v1/traces",
                set("OTEL_EXPORTER_OTLP_ENDPOINT")?.trim_end_matches('/')
            ),
        };
        let service = set("OTEL_SERVICE_NAME").unwrap_or_else(|| service.to_string());
        Some(Self { endpoint, service })
    }

    fn provider(&self) -> anyhow::Result<SdkTracerProvider> {
        let client = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(self.endpoint.clone())
            .build()?;
        Ok(SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                Resource::builder_empty()
                    .with_service_name(self.service.clone())
                    .build(),
            )
            .build())
    }
}

#[cfg(test)]
mod tests {
    use super::Export;

    fn export(vars: &[(&str, &str)]) -> Option<Export> {
        Export::from_env(
            |name| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            },
            "loop-plugins-controller",
        )
    }

    #[test]
    fn no_endpoint_no_export() {
        assert_eq!(export(&[]), None);
        assert_eq!(export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")]), None);
        assert_eq!(export(&[("OTEL_SERVICE_NAME", "x")]), None);
    }

    #[test]
    fn the_endpoint_variables_and_the_service_name() {
        let base = export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318/")]).unwrap();
        assert_eq!(base.endpoint, "http://otel:4318/v1/traces");
        assert_eq!(base.service, "loop-plugins-controller");
        let traces = export(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://other:4318/spans",
            ),
            ("OTEL_SERVICE_NAME", "mine"),
        ])
        .unwrap();
        assert_eq!(traces.endpoint, "http://other:4318/spans");
        assert_eq!(traces.service, "mine");
    }
}
