//! The API server's spans reach an OpenTelemetry collector, from the real binary: a receiver
//! written here (OTLP/HTTP, `POST /v1/traces`, protobuf decoded with opentelemetry-proto's
//! types) on a loopback port, and `loop-plugins api` started with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` naming it. A host API call with a made-up chat and a token
//! that is not one comes back as a `request` span naming the route's template and the status,
//! and neither the chat's name nor the token is anywhere in what was exported.

use std::time::Duration;

use anyhow::{Context, ensure};
use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;

use crate::api::api_support::ApiServer;
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "traces::the_api_servers_request_spans_reach_an_otlp_collector_without_ids_or_tokens",
            request_spans,
        )
        .timeout(Duration::from_secs(120))
        .local_only("starts its own API server process with the collector's address"),
    ]
}

fn string(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref() {
            Some(AnyValue {
                value: Some(Value::StringValue(s)),
            }) => Some(s.clone()),
            Some(AnyValue {
                value: Some(Value::IntValue(n)),
            }) => Some(n.to_string()),
            _ => None,
        })
}

async fn request_spans(ns: Ns) -> anyhow::Result<()> {
    let (sent, mut received) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let collector = listener.local_addr()?;
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
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let api = ApiServer::start_with(
        &ns,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{collector}"))],
    )
    .await?;
    let chat = format!("chat-{}-3f9a", ns.name());
    let token = format!("not-a-token-{}-77c1", ns.name());
    let url = format!(
        "http://{}/api/host/v1/namespaces/{}/channels/{chat}/plugins/echo/panels",
        api.addr(),
        ns.name()
    );
    let answer = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .get(&url)
        .bearer_auth(&token)
        .send()
        .await?;
    ensure!(answer.status() == 401, "{}", answer.status());

    // The batch goes every 5 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let found = loop {
        let body = tokio::time::timeout_at(deadline, received.recv())
            .await
            .with_context(|| {
                format!(
                    "no request span of the route reached the collector within 30 s; seen: {seen:?}"
                )
            })?
            .context("the collector stopped")?;
        ensure!(
            !contains(&body, chat.as_bytes()) && !contains(&body, token.as_bytes()),
            "the export carries the chat's name or the token"
        );
        let request = ExportTraceServiceRequest::decode(body)?;
        let mut hit = None;
        for resource_spans in &request.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| string(&r.attributes, "service.name"));
            for span in resource_spans.scope_spans.iter().flat_map(|s| &s.spans) {
                let route = string(&span.attributes, "route");
                seen.push(format!("{} {route:?}", span.name));
                if span.name == "request"
                    && route.as_deref()
                        == Some(
                            "/api/host/v1/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/panels",
                        )
                {
                    hit = Some((service.clone(), span.clone()));
                }
            }
        }
        if let Some(hit) = hit {
            break hit;
        }
    };
    let (service, span) = found;
    ensure!(
        service.as_deref() == Some("loop-plugins-api"),
        "service.name {service:?}"
    );
    ensure!(
        string(&span.attributes, "method").as_deref() == Some("GET")
            && string(&span.attributes, "status").as_deref() == Some("401"),
        "{:?}",
        span.attributes
    );
    serving.abort();
    Ok(())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
