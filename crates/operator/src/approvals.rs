//! `loop-plugins approvals`, `approve` and `deny`: where a person answers an agent's tool
//! call from the shell. Through the host API, with the person's own token (RBAC decides: the
//! approver role's `approve` on toolcallapprovals), never around it: deciding is the host
//! API's, which writes the decision once and records it as an Event.
//!
//! The table and the lines are pure ([`table`], [`line()`]); [`HostApi`] is the thin client.

use std::time::Duration;

use serde_json::{Value, json};

/// Why a verb failed.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalsError {
    #[error("the host API at {api}: {source}")]
    Unreachable {
        api: String,
        #[source]
        source: reqwest::Error,
    },
    /// The host API refused: its code and message (`forbidden`, `approval_decided`, ...).
    #[error("{code}: {message}")]
    Refused { code: String, message: String },
    #[error(
        "no ToolCallApproval {name} in namespace {namespace} (loop-plugins approvals -n {namespace})"
    )]
    NotFound { namespace: String, name: String },
    #[error("the host API answered {status}: {body}")]
    Unexpected { status: u16, body: String },
}

/// The host API, as a person's token reaches it.
pub struct HostApi {
    api: String,
    token: String,
    http: reqwest::Client,
}

/// A person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Once,
    Always,
    Deny,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Once => "once",
            Answer::Always => "always",
            Answer::Deny => "deny",
        }
    }
}

impl HostApi {
    pub fn new(api: &str, token: &str) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            api: api.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("an HTTP client"),
        }
    }

    async fn get(&self, path: &str) -> Result<Value, ApprovalsError> {
        let response = self
            .http
            .get(format!("{}/api/host/v1{path}", self.api))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|source| self.unreachable(source))?;
        answer(response).await
    }

    fn unreachable(&self, source: reqwest::Error) -> ApprovalsError {
        ApprovalsError::Unreachable {
            api: self.api.clone(),
            source,
        }
    }

    /// The approvals of `namespace` (every namespace the token may list them in for `None`).
    pub async fn list(
        &self,
        namespace: Option<&str>,
        pending: bool,
    ) -> Result<Vec<Value>, ApprovalsError> {
        let query = if pending { "?pending=true" } else { "" };
        let path = match namespace {
            Some(ns) => format!("/namespaces/{ns}/approvals{query}"),
            None => format!("/approvals{query}"),
        };
        let listed = self.get(&path).await?;
        Ok(listed["approvals"].as_array().cloned().unwrap_or_default())
    }

    /// Decides approval `name` of `namespace`: found in the list (for its chat), then decided.
    pub async fn decide(
        &self,
        namespace: &str,
        name: &str,
        answer: Answer,
        reason: Option<&str>,
    ) -> Result<Value, ApprovalsError> {
        let all = self.list(Some(namespace), false).await?;
        let found =
            all.iter()
                .find(|a| a["name"] == name)
                .ok_or_else(|| ApprovalsError::NotFound {
                    namespace: namespace.into(),
                    name: name.into(),
                })?;
        let chat = found["chat"].as_str().unwrap_or_default();
        let mut body = json!({ "answer": answer.as_str() });
        if let Some(reason) = reason {
            body["reason"] = json!(reason);
        }
        let response = self
            .http
            .post(format!(
                "{}/api/host/v1/namespaces/{namespace}/channels/{chat}/approvals/{name}",
                self.api
            ))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .map_err(|source| self.unreachable(source))?;
        answer_of(response).await
    }

    /// Follows `namespace`'s approvals: `each` gets every approval as it is asked and
    /// decided, until the stream ends.
    pub async fn watch(
        &self,
        namespace: &str,
        mut each: impl FnMut(&Value),
    ) -> Result<(), ApprovalsError> {
        let mut response = self
            .http
            .get(format!(
                "{}/api/host/v1/namespaces/{namespace}/approvals/watch",
                self.api
            ))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(365 * 24 * 3600))
            .send()
            .await
            .map_err(|source| self.unreachable(source))?;
        if !response.status().is_success() {
            return answer(response).await.map(|_| ());
        }
        let mut buffer = String::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|source| self.unreachable(source))?
        {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for data in event.lines().filter_map(|l| l.strip_prefix("data:")) {
                    if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                        each(&v);
                    }
                }
            }
        }
        Ok(())
    }
}

async fn answer(response: reqwest::Response) -> Result<Value, ApprovalsError> {
    answer_of(response).await
}

async fn answer_of(response: reqwest::Response) -> Result<Value, ApprovalsError> {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(value);
    }
    match (
        value["error"]["code"].as_str(),
        value["error"]["message"].as_str(),
    ) {
        (Some(code), Some(message)) => Err(ApprovalsError::Refused {
            code: code.into(),
            message: message.into(),
        }),
        _ => Err(ApprovalsError::Unexpected {
            status: status.as_u16(),
            body: body.chars().take(500).collect(),
        }),
    }
}

/// The approvals as a table, as `kubectl get` would show them, with each call's input.
pub fn table(approvals: &[Value]) -> String {
    if approvals.is_empty() {
        return "No approvals.\n".into();
    }
    let rows: Vec<[String; 8]> = approvals
        .iter()
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or("").to_string();
            [
                s("namespace"),
                s("name"),
                s("chat"),
                s("plugin"),
                s("tool"),
                s("agent"),
                s("decision"),
                match a["decidedBy"].as_str() {
                    Some(by) => by.to_string(),
                    None => format!("until {}", s("deadline")),
                },
            ]
        })
        .collect();
    let head = [
        "NAMESPACE",
        "NAME",
        "CHAT",
        "PLUGIN",
        "TOOL",
        "AGENT",
        "DECISION",
        "BY",
    ];
    let widths: Vec<usize> = (0..8)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let fmt = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        line.trim_end().to_string() + "\n"
    };
    let mut out = fmt(head.to_vec());
    for (row, a) in rows.iter().zip(approvals) {
        out.push_str(&fmt(row.iter().map(String::as_str).collect()));
        out.push_str(&format!("    input: {}\n", input_of(a)));
    }
    out
}

/// One approval as a line (`--watch`).
pub fn line(a: &Value) -> String {
    let s = |k: &str| a[k].as_str().unwrap_or("");
    let by = a["decidedBy"]
        .as_str()
        .map(|b| format!(" by {b}"))
        .unwrap_or_else(|| format!(" until {}", s("deadline")));
    format!(
        "{}/{}: {} {} of plugin {} by agent {} in chat {}{by}; input {}",
        s("namespace"),
        s("name"),
        s("decision"),
        s("tool"),
        s("plugin"),
        s("agent"),
        s("chat"),
        input_of(a)
    )
}

/// The input, as JSON, cut to a line.
fn input_of(a: &Value) -> String {
    let text = a["input"].to_string();
    if text.chars().count() > 200 {
        format!("{}…", text.chars().take(200).collect::<String>())
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(name: &str, decision: &str, by: Option<&str>) -> Value {
        let mut a = json!({
            "name": name, "namespace": "demo", "chat": "general", "plugin": "quiz",
            "tool": "plugin_grade", "agent": "ask", "run": "quiz-1", "profile": "default",
            "input": {"answer": "42"}, "requestedAt": "2026-12-06T09:00:00Z",
            "deadline": "2026-12-06T09:05:00Z", "decision": decision,
        });
        if let Some(by) = by {
            a["decidedBy"] = json!(by);
        }
        a
    }

    #[test]
    fn the_table_shows_what_waits_until_when_and_who_decided() {
        let out = table(&[
            approval("general-plugin-grade-abcde", "Pending", None),
            approval("general-plugin-grade-fghij", "Approved", Some("alice")),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE"), "{out}");
        assert!(
            lines[1].contains("Pending") && lines[1].contains("until 2026-12-06T09:05:00Z"),
            "{out}"
        );
        assert_eq!(lines[2].trim(), r#"input: {"answer":"42"}"#);
        assert!(
            lines[3].contains("Approved") && lines[3].ends_with("alice"),
            "{out}"
        );
        assert_eq!(table(&[]), "No approvals.\n");
    }

    #[test]
    fn a_line_says_the_call_and_its_state() {
        assert_eq!(
            line(&approval("a-1", "Denied", Some("bob"))),
            r#"demo/a-1: Denied plugin_grade of plugin quiz by agent ask in chat general by bob; input {"answer":"42"}"#
        );
    }
}
