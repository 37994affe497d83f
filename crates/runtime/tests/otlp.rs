//! Spans reach an OTLP/HTTP collector: a receiver written here (POST /v1/traces, protobuf bodies
//! decoded with opentelemetry-proto's types) on a loopback port, the exporter the roles start when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, a `reconcile` span recorded through the roles'
//! subscriber, and the exporter dropped as a role does on SIGTERM, which must flush it.

use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use loop_plugins_runtime::logging::{Export, Traces};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;

fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref() {
            Some(AnyValue {
                value: Some(Value::StringValue(s)),
            }) => Some(s.clone()),
            _ => None,
        })
}

#[test]
fn a_reconcile_span_reaches_the_collector_with_its_service_and_fields() {
    // The exporter's reqwest client needs the process's TLS provider, which a binary's main
    // installs; this test is the binary.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let receiver = tokio::runtime::Runtime::new().unwrap();
    let (sent, mut received) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let listener = receiver
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let sent = sent.clone();
            async move {
                let _ = sent.send(body);
                StatusCode::OK
            }
        }),
    );
    receiver.spawn(async move { axum::serve(listener, app).await.unwrap() });

    // As the controller's environment would say it: the base URL, the path added.
    let endpoint = format!("http://{address}");
    let export = Export::from_env(
        |name| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| endpoint.clone()),
        "loop-plugins-controller",
    )
    .unwrap();
    let traces = Traces::start(&export).unwrap();
    tracing::subscriber::with_default(traces.subscriber(), || {
        let span = tracing::info_span!(
            "reconcile",
            controller = "plugin",
            namespace = "team-a",
            name = "echo"
        );
        let _entered = span.enter();
        tracing::info!("reconciled");
    });
    // The batch is not due yet (5 s): only the flush on drop sends it now.
    drop(traces);

    let body = receiver
        .block_on(async { tokio::time::timeout(Duration::from_secs(10), received.recv()).await })
        .expect("the collector got a batch")
        .unwrap();
    let request = ExportTraceServiceRequest::decode(body).unwrap();
    let resource_spans = &request.resource_spans[0];
    let resource = resource_spans.resource.as_ref().unwrap();
    assert_eq!(
        string(&resource.attributes, "service.name").as_deref(),
        Some("loop-plugins-controller")
    );
    let spans: Vec<_> = resource_spans
        .scope_spans
        .iter()
        .flat_map(|s| &s.spans)
        .collect();
    let reconcile = spans
        .iter()
        .find(|s| s.name == "reconcile")
        .unwrap_or_else(|| panic!("no reconcile span in {spans:?}"));
    for (key, value) in [
        ("controller", "plugin"),
        ("namespace", "team-a"),
        ("name", "echo"),
    ] {
        assert_eq!(
            string(&reconcile.attributes, key).as_deref(),
            Some(value),
            "{key} in {:?}",
            reconcile.attributes
        );
    }
    assert!(
        reconcile.events.iter().any(|e| e.name == "reconciled"),
        "the span's log line rides along as an event: {:?}",
        reconcile.events
    );
}
