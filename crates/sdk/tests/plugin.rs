//! A plugin written with the SDK, served on a loopback port: the server does what its module
//! doc's table says. (That a plugin of nothing but SDK handlers passes `loop-plugins
//! conformance` is tested where the check lives, `crates/conformance/tests/follow.rs`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::routing::get;
use loop_plugin_sdk::{
    ActionContext, ActionRequest, BuildError, Plugin, SwitchState, ToolError, ToolRequest,
    ToolResult,
};
use serde_json::{Value, json};

const SECRET: &str = "s3cret";
const MANIFEST: &str = include_str!("../../../examples/echo-plugin/plugin.json");

fn manifest() -> loop_plugin_sdk::manifest::Manifest {
    loop_plugin_sdk::manifest::parse_str(MANIFEST).unwrap()
}

/// The echo plugin's manifest, served by SDK handlers.
fn echo(cancelled: Arc<AtomicBool>) -> Plugin {
    let idle = |_: ActionRequest, _: ActionContext| async {};
    Plugin::new(manifest())
        .action("ping", idle)
        .action("tick", move |_, cx: ActionContext| {
            let cancelled = cancelled.clone();
            async move {
                cx.cancelled.cancelled().await;
                cancelled.store(true, Ordering::SeqCst);
            }
        })
        .tool("echo", |req: ToolRequest| async move {
            match req.input.get("text").and_then(Value::as_str) {
                Some(text) => Ok(ToolResult::json(&json!({"echo": text})).unwrap()),
                None => Err(ToolError::new("text is missing")),
            }
        })
        .switch("mode", |req| async move {
            SwitchState {
                on: req.on,
                title: Some(format!("Mode is {}", if req.on { "on" } else { "off" })),
                ..Default::default()
            }
        })
        .x(axum::Router::new().route("/hello", get(|| async { "hello" })))
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn serve(
    plugin: Plugin,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let server = plugin.build(SECRET).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server
            .serve(listener, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (url, stop, task)
}

#[tokio::test]
async fn tool_errors_become_results_and_x_is_the_authors() {
    let (url, _stop, _task) = serve(echo(Arc::default())).await;
    let client = client();
    let answer: Value = client
        .post(format!("{url}/tools/echo"))
        .bearer_auth(SECRET)
        .json(&json!({"input": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        answer,
        json!({"content": [{"type": "text", "text": "text is missing"}], "is_error": true})
    );
    let hello = client
        .get(format!("{url}/x/hello"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(hello.text().await.unwrap(), "hello");
    let refused = client.get(format!("{url}/x/hello")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
}

#[tokio::test]
async fn shutdown_cancels_background_actions_and_waits_for_them() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let (url, stop, task) = serve(echo(cancelled.clone())).await;
    let accepted = client()
        .post(format!("{url}/actions/tick"))
        .bearer_auth(SECRET)
        .json(&json!({"trigger": "manual"}))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);
    assert!(
        !cancelled.load(Ordering::SeqCst),
        "the action runs until shutdown"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        cancelled.load(Ordering::SeqCst),
        "serve returned before the action saw its cancel"
    );
}

#[tokio::test]
async fn work_an_event_hands_off_is_cancelled_and_waited_for_at_shutdown() {
    // The echo plugin, but its event handler hands its work to the background and answers
    // at once, as the host waits for events.
    let finished = Arc::new(AtomicBool::new(false));
    let plugin = echo(Arc::default());
    let background = plugin.background();
    let seen = finished.clone();
    let plugin = plugin.on_event(move |_event| {
        let seen = seen.clone();
        background.go(move |cancelled| async move {
            cancelled.cancelled().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            seen.store(true, Ordering::SeqCst);
        });
        async {}
    });
    let (url, stop, task) = serve(plugin).await;
    let taken = client()
        .post(format!("{url}/events"))
        .bearer_auth(SECRET)
        .json(&json!({"type": "message.created", "data": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(taken.status(), 204);
    assert!(!finished.load(Ordering::SeqCst), "it runs until shutdown");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(
        finished.load(Ordering::SeqCst),
        "serve returned before the handed-off work finished"
    );
}

#[test]
fn handlers_must_fit_the_manifest() {
    let err = Plugin::new(manifest())
        .action("ping", |_, _| async {})
        .action("pong", |_, _| async {})
        .build(SECRET)
        .err()
        .unwrap();
    let BuildError(problems) = err;
    for expected in [
        "a handler for action pong, which the manifest does not declare",
        "the manifest declares action tick, which has no handler",
        "the manifest declares tool echo, which has no handler",
        "the manifest declares switch mode, which has no handler",
    ] {
        assert!(
            problems.iter().any(|p| p == expected),
            "{expected}: {problems:#?}"
        );
    }
    assert!(echo(Arc::default()).build("").is_err());
}

#[tokio::test]
async fn middleware_runs_in_order_after_the_secret_and_may_answer_itself() {
    use axum::extract::Request;
    use axum::middleware::Next;
    use axum::response::IntoResponse;
    use std::sync::Mutex;

    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (first, second) = (seen.clone(), seen.clone());
    let plugin = echo(Arc::default())
        .middleware(move |req: Request, next: Next| {
            first
                .lock()
                .unwrap()
                .push(format!("first {}", req.uri().path()));
            next.run(req)
        })
        .middleware(move |req: Request, next: Next| {
            second
                .lock()
                .unwrap()
                .push(format!("second {}", req.uri().path()));
            async move {
                if req.uri().path() == "/x/closed" {
                    return axum::http::StatusCode::GONE.into_response();
                }
                next.run(req).await
            }
        });
    let (url, _stop, _task) = serve(plugin).await;
    let client = client();
    let refused = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert!(seen.lock().unwrap().is_empty(), "a refused call reached it");
    for (path, status) in [
        ("/healthz", 200),
        ("/x/hello", 200),
        ("/x/closed", 410),
        ("/nope", 404),
    ] {
        let res = client
            .get(format!("{url}{path}"))
            .bearer_auth(SECRET)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), status, "{path}");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "first /healthz",
            "second /healthz",
            "first /x/hello",
            "second /x/hello",
            "first /x/closed",
            "second /x/closed",
            "first /nope",
            "second /nope",
        ]
    );
}

#[tokio::test]
async fn x_takes_the_contracts_8_mb() {
    use axum::body::Bytes;
    use axum::routing::post;

    let plugin = echo(Arc::default()).x(axum::Router::new().route(
        "/size",
        post(|body: Bytes| async move { body.len().to_string() }),
    ));
    let (url, _stop, _task) = serve(plugin).await;
    let client = client();
    let max = loop_plugin_sdk::server::MAX_X_BODY;
    let res = client
        .post(format!("{url}/x/size"))
        .bearer_auth(SECRET)
        .body(vec![b'a'; max])
        .send()
        .await
        .unwrap();
    assert_eq!(res.text().await.unwrap(), max.to_string());
    let res = client
        .post(format!("{url}/x/size"))
        .bearer_auth(SECRET)
        .body(vec![b'a'; max + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
}

#[tokio::test]
async fn shutting_down_ends_a_request_that_holds_on() {
    // A long poll under /x: shutdown waits for requests in flight, so it ends the poll.
    let plugin = echo(Arc::default());
    let background = plugin.background();
    let plugin = plugin.x(axum::Router::new().route(
        "/poll",
        get(move || {
            let shutting_down = background.shutting_down();
            async move {
                tokio::select! {
                    () = shutting_down => "shutting down",
                    () = tokio::time::sleep(Duration::from_secs(3600)) => "an hour",
                }
            }
        }),
    ));
    let (url, stop, task) = serve(plugin).await;
    let poll = tokio::spawn(
        client()
            .get(format!("{url}/x/poll"))
            .bearer_auth(SECRET)
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("shutdown waited out the poll")
        .unwrap();
    let answer = poll.await.unwrap().unwrap();
    assert_eq!(answer.text().await.unwrap(), "shutting down");
}
