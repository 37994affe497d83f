//! Writes by identity, from the API server's audit log (the local control plane logs every
//! write at Metadata level, one JSON event per line): a window opens at the log's current end
//! and reads what was logged since.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

/// The verbs that write.
pub const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// One write request, as the audit log has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    pub user: String,
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    /// The answer's status code.
    pub code: u16,
    /// When the request came in (RFC 3339, microseconds).
    pub received: String,
}

/// The writes among audit log lines (other events, and lines that do not parse, are skipped).
pub fn writes(text: &str) -> Vec<Write> {
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter_map(|e| {
            let verb = e["verb"].as_str()?;
            WRITE_VERBS.contains(&verb).then_some(())?;
            let object = &e["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or_default().to_string();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            Some(Write {
                user: e["user"]["username"].as_str()?.to_string(),
                verb: verb.into(),
                resource,
                namespace: object["namespace"].as_str().unwrap_or_default().into(),
                name: object["name"].as_str().unwrap_or_default().into(),
                code: e["responseStatus"]["code"].as_u64().unwrap_or_default() as u16,
                received: e["requestReceivedTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .into(),
            })
        })
        .collect()
}

/// A user's writes, counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Every write but Lease renewals.
    pub writes: usize,
    /// Writes to Leases (leader election renews every few seconds by design).
    pub leases: usize,
    /// Writes the API server refused (4xx, 5xx), among `writes`.
    pub failed: usize,
    /// `verb resource` → count, without Leases.
    pub by_kind: BTreeMap<String, usize>,
}

impl Tally {
    /// Counts `user`'s writes among `all`.
    pub fn of(all: &[Write], user: &str) -> Self {
        let mut tally = Self::default();
        for w in all.iter().filter(|w| w.user == user) {
            if w.resource == "leases" {
                tally.leases += 1;
                continue;
            }
            tally.writes += 1;
            if w.code >= 400 {
                tally.failed += 1;
            }
            *tally
                .by_kind
                .entry(format!("{} {}", w.verb, w.resource))
                .or_default() += 1;
        }
        tally
    }

    /// `verb resource=n` pairs, for a report line.
    pub fn breakdown(&self) -> String {
        let parts: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{}={n}", k.replace(' ', ":")))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(",")
        }
    }
}

/// What the audit log recorded from the moment the window opened.
pub struct Window {
    path: PathBuf,
    start: u64,
}

impl Window {
    /// Opens a window at the log's current end.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let start = std::fs::metadata(path)
            .with_context(|| format!("the audit log {}", path.display()))?
            .len();
        Ok(Self {
            path: path.to_path_buf(),
            start,
        })
    }

    /// Every write logged since it opened.
    pub fn writes(&self) -> anyhow::Result<Vec<Write>> {
        use std::io::{Read, Seek, SeekFrom};
        let mut file = std::fs::File::open(&self.path)?;
        file.seek(SeekFrom::Start(self.start))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        // The last line may still be being written: `writes` skips what does not parse.
        Ok(writes(&String::from_utf8_lossy(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(user: &str, verb: &str, resource: &str, sub: Option<&str>, code: u16) -> String {
        let mut object = serde_json::json!({"resource": resource, "namespace": "ns", "name": "x"});
        if let Some(sub) = sub {
            object["subresource"] = sub.into();
        }
        serde_json::json!({
            "stage": "ResponseComplete", "verb": verb, "user": {"username": user},
            "objectRef": object, "responseStatus": {"code": code},
            "requestReceivedTimestamp": "2026-12-03T00:00:00.000000Z",
        })
        .to_string()
    }

    #[test]
    fn writes_are_counted_by_user_with_leases_apart() {
        let text = [
            line("a", "patch", "plugininstances", Some("status"), 200),
            line("a", "create", "secrets", None, 201),
            line("a", "update", "leases", None, 200),
            line("a", "get", "secrets", None, 200),
            line("a", "create", "secrets", None, 409),
            line("b", "create", "pods", None, 201),
            "not json".to_string(),
        ]
        .join("\n");
        let all = writes(&text);
        assert_eq!(all.len(), 5);
        let a = Tally::of(&all, "a");
        assert_eq!((a.writes, a.leases, a.failed), (3, 1, 1));
        assert_eq!(a.by_kind["create secrets"], 2);
        assert_eq!(a.by_kind["patch plugininstances/status"], 1);
        assert_eq!(
            a.breakdown(),
            "create:secrets=2,patch:plugininstances/status=1"
        );
        assert_eq!(Tally::of(&all, "c").breakdown(), "none");
    }
}
