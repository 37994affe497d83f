//! `any .../plugins/{plugin}/x/{path}`: the plugin's own HTTP routes, passed through both ways
//! as they came (method, path, query, content type, body), within 30 s and 8 MB each way.

use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, Path, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;

use super::PREFIX;
use super::auth::Permission;
use super::error::HostError;
use super::state::{HostState, what};
use crate::calls::CallKind;
use crate::calls::client::PluginRequest;
use crate::calls::failure;
use crate::http::Passthrough;

/// Checks the caller (RBAC by the method's verb), then forwards the request to the plugin's
/// `/x/{path}` and its answer, of any status, back.
pub async fn forward(
    State(s): State<HostState>,
    Path((ns, chat, plugin, path)): Path<(String, String, String, String)>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = s
        .authorized_target(&headers, (&ns, &chat, &plugin), |ns, i| {
            Permission::x(&method, ns, i)
        })
        .await?;
    let rest = x_rest(uri.path(), &ns, &chat, &plugin, &path);
    let mut forward = format!("/x/{rest}");
    if let Some(q) = uri.query() {
        forward.push('?');
        forward.push_str(q);
    }
    let limits = s.calls.limits();
    let request = PluginRequest {
        kind: CallKind::X,
        method,
        path: forward,
        content_type: headers.get(header::CONTENT_TYPE).cloned(),
        body,
        timeout: limits.x,
        answer_cap: limits.x_body,
    };
    let what = what(&target, &format!("/x/{rest}"));
    let answer = s
        .call_target(&target, &request)
        .await
        .map_err(|e| HostError::from(failure::of_error(&target, &what, &e)))?;
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = answer.status;
    if let Some(ct) = answer.content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response.extensions_mut().insert(Passthrough);
    Ok(response)
}

/// The part of the request's path after `.../x/`, as it came (still percent-encoded); from the
/// decoded `{path}` when the request spelt the names before it otherwise.
fn x_rest(raw: &str, ns: &str, chat: &str, plugin: &str, decoded: &str) -> String {
    let prefix = format!("{PREFIX}/namespaces/{ns}/channels/{chat}/plugins/{plugin}/x/");
    match raw.strip_prefix(&prefix) {
        Some(rest) => rest.to_string(),
        None => decoded
            .replace('%', "%25")
            .replace(' ', "%20")
            .replace('?', "%3F")
            .replace('#', "%23"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_x_path_is_forwarded_as_it_came() {
        let raw = "/api/host/v1/namespaces/x/channels/x/plugins/echo/x/a/x/b%20c";
        assert_eq!(x_rest(raw, "x", "x", "echo", "a/x/b c"), "a/x/b%20c");
        // Names spelt otherwise: from the decoded path.
        let raw = "/api/host/v1/namespaces/%78/channels/x/plugins/echo/x/a b";
        assert_eq!(x_rest(raw, "x", "x", "echo", "a b?"), "a%20b%3F");
    }
}
