//! A mocked API server for reconcile tests, as kube-rs's controller-rs does it: the client
//! talks to one end of a `tower_test::mock::pair`, and a verifier task takes each request from
//! the other end in order, asserts its method, path, query (field manager) and body, and
//! answers. A call that never comes fails the test by timing out; an unexpected one fails it
//! by its method or path, or, after the last expected call, by finding nobody to answer it.

use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tower_test::mock::Handle;

/// The query of the controller's server-side applies (objects that exist): forced, as its one
/// field manager.
pub const APPLY_QUERY: &str = "&force=true&fieldManager=loop-plugins-controller";
/// The query of a create by the controller, and of a status write (a merge patch).
pub const CREATE_QUERY: &str = "&fieldManager=loop-plugins-controller";
/// How a status is written: a merge patch of what changed (see `merge_patch`).
pub const STATUS_CONTENT_TYPE: &str = "application/merge-patch+json";
/// How kube's finalizer helper adds and removes a finalizer: a JSON patch (RFC 6902) whose
/// `test` operation makes it fail rather than clobber another writer's change.
pub const JSON_PATCH_CONTENT_TYPE: &str = "application/json-patch+json";

/// How the mocked server answers a call.
pub enum Answer {
    /// The request's body, as the object made or applied.
    Echo,
    /// This object, with the request body's `status` put in (a status write).
    WithStatus(Value),
    /// This object, as the API server serves it after the write.
    Object(Value),
    /// A Status of success (a deletion).
    Deleted,
    /// A failure with this code and reason.
    Fail(u16, &'static str),
}

/// Asserts on a request's JSON body.
type BodyCheck = Box<dyn Fn(&Value) + Send>;

/// One call the reconcile must make next.
pub struct Call {
    method: Method,
    path: String,
    query: Option<&'static str>,
    content_type: Option<&'static str>,
    check: Option<BodyCheck>,
    answer: Answer,
}

impl Call {
    /// A server-side apply of the object at `path`.
    pub fn apply(path: impl Into<String>) -> Self {
        Self::new(Method::PATCH, path, Some(APPLY_QUERY), Answer::Echo)
    }

    /// A merge patch of the status of the object at `path` (without `/status`).
    pub fn status(path: impl Into<String>, object: Value) -> Self {
        let path = format!("{}/status", path.into());
        let mut call = Self::new(
            Method::PATCH,
            path,
            Some(CREATE_QUERY),
            Answer::WithStatus(object),
        );
        call.content_type = Some(STATUS_CONTENT_TYPE);
        call
    }

    /// A JSON patch of the object at `path`, as the finalizer helper sends it (no field
    /// manager: it owns no field), answered with `after`.
    pub fn json_patch(path: impl Into<String>, after: Value) -> Self {
        let mut call = Self::new(Method::PATCH, path, Some(""), Answer::Object(after));
        call.content_type = Some(JSON_PATCH_CONTENT_TYPE);
        call
    }

    /// A create in the collection at `path`.
    pub fn create(path: impl Into<String>) -> Self {
        Self::new(Method::POST, path, Some(CREATE_QUERY), Answer::Echo)
    }

    /// A deletion of the object at `path`.
    pub fn delete(path: impl Into<String>) -> Self {
        Self::new(Method::DELETE, path, None, Answer::Deleted)
    }

    /// An Event with this reason about an object in `namespace`.
    pub fn event(namespace: &str, reason: &'static str) -> Self {
        let path = format!("/apis/events.k8s.io/v1/namespaces/{namespace}/events");
        Self::new(Method::POST, path, Some(""), Answer::Echo)
            .body(move |b| assert_eq!(b["reason"], reason, "the Event's reason"))
    }

    fn new(
        method: Method,
        path: impl Into<String>,
        query: Option<&'static str>,
        answer: Answer,
    ) -> Self {
        Self {
            method,
            path: path.into(),
            query,
            content_type: None,
            check: None,
            answer,
        }
    }

    /// The call's method and path.
    pub fn target(&self) -> (String, String) {
        (self.method.to_string(), self.path.clone())
    }

    /// Asserts more of the request's body.
    pub fn body(mut self, check: impl Fn(&Value) + Send + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }

    /// Answers with `answer` instead.
    pub fn answer(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }
}

/// The server end, with the calls it expects.
pub struct ApiServer(pub Handle<Request<Body>, Response<Body>>);

/// The running verifier: [`Verifier::done`] waits until every expected call came.
pub struct Verifier(JoinHandle<Vec<Value>>);

impl ApiServer {
    /// Answers `calls` in order, in a task of its own.
    pub fn expect(self, calls: Vec<Call>) -> Verifier {
        let ApiServer(mut handle) = self;
        Verifier(tokio::spawn(async move {
            let mut bodies = vec![];
            for (i, call) in calls.into_iter().enumerate() {
                let what = format!("call {} ({} {})", i + 1, call.method, call.path);
                let (request, send) = handle
                    .next_request()
                    .await
                    .unwrap_or_else(|| panic!("{what} never came: the client was dropped"));
                let uri = request.uri().clone();
                assert_eq!(request.method(), call.method, "{what}: the method of {uri}");
                assert_eq!(uri.path(), call.path, "{what}: the path");
                if let Some(query) = call.query {
                    assert_eq!(
                        uri.query().unwrap_or_default(),
                        query,
                        "{what}: the query of {uri}"
                    );
                }
                if let Some(content_type) = call.content_type {
                    let sent = request
                        .headers()
                        .get(http::header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default();
                    assert_eq!(sent, content_type, "{what}: the content type");
                }
                let bytes = request.into_body().collect_bytes().await.expect("a body");
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).expect("a JSON body")
                };
                if let Some(check) = &call.check {
                    check(&body);
                }
                let (code, answer) = match call.answer {
                    Answer::Echo => (200, body.clone()),
                    Answer::Object(object) => (200, object),
                    Answer::WithStatus(mut object) => {
                        object["status"] = crate::write::merge_patch::tests::apply(
                            &object["status"],
                            &body["status"],
                        );
                        (200, object)
                    }
                    Answer::Deleted => (
                        200,
                        json!({ "kind": "Status", "apiVersion": "v1", "status": "Success" }),
                    ),
                    Answer::Fail(code, reason) => (
                        code,
                        json!({
                            "kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "code": code, "reason": reason, "message": format!("refused: {reason}"),
                        }),
                    ),
                };
                let response = Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&answer).expect("JSON")))
                    .expect("a response");
                send.send_response(response);
                bodies.push(body);
            }
            bodies
        }))
    }
}

impl Verifier {
    /// Waits (at most a second) until every expected call came; the bodies, in order.
    pub async fn done(self) -> Vec<Value> {
        tokio::time::timeout(Duration::from_secs(1), self.0)
            .await
            .expect("an expected call never came")
            .expect("the verifier's assertions held")
    }
}
