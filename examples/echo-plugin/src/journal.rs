//! The journal: one JSON line per request the plugin accepted, in `<data dir>/journal.jsonl`,
//! so tests can see what reached the plugin (served back at `GET /x/journal`).
//!
//! A line is `{"seq", "at_ms", "kind", "method", "route", "query", "body", "body_size"}`:
//! `kind` is `request` for a request that passed the secret check and `loop_api` for a call
//! the plugin made to the Plugin API (then `status` or `error` too). `body` is the body as
//! JSON when it parses, as a string when it is other text, and null when empty, binary or
//! over [`MAX_RECORDED_BODY`] (`body_size` always says how big it was).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "journal.jsonl";
/// Bodies bigger than this are recorded by size only.
pub const MAX_RECORDED_BODY: usize = 64 * 1024;
/// The biggest body the plugin reads, on every route: the contract's /x cap, as the SDK
/// takes it.
pub const MAX_BODY: usize = loop_plugin_sdk::server::MAX_X_BODY;

/// One journal line, before the journal numbers it.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub kind: &'static str,
    pub method: String,
    pub route: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    pub body: Value,
    pub body_size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Entry {
    /// A `kind` entry (`request`, `loop_api`) of `method route?query` with `body`.
    pub fn new(
        kind: &'static str,
        method: &str,
        route: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Self {
        Self {
            kind,
            method: method.to_owned(),
            route: route.to_owned(),
            query: query.map(str::to_owned),
            body: recorded_body(body),
            body_size: body.len(),
            status: None,
            error: None,
        }
    }

    /// The same, with the answer's status and body.
    pub fn answered(self, status: u16, body: &[u8]) -> Self {
        Self {
            status: Some(status),
            body: recorded_body(body),
            body_size: body.len(),
            ..self
        }
    }
}

/// How a body shows in the journal.
pub fn recorded_body(body: &[u8]) -> Value {
    if body.is_empty() || body.len() > MAX_RECORDED_BODY {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_slice(body) {
        return v;
    }
    std::str::from_utf8(body).map_or(Value::Null, |s| Value::String(s.to_owned()))
}

pub struct Journal {
    path: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    file: File,
    seq: u64,
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    at_ms: u128,
    #[serde(flatten)]
    entry: &'a Entry,
}

impl Journal {
    /// Opens (creating) the journal in `dir`, numbering on from the lines already there.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        let seq = BufReader::new(&file).lines().map_while(Result::ok).count() as u64;
        Ok(Self {
            path,
            inner: Mutex::new(Inner { file, seq }),
        })
    }

    /// Appends `entry` as one line and answers its sequence number (from 1).
    pub fn append(&self, entry: &Entry) -> std::io::Result<u64> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let seq = inner.seq + 1;
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let mut line = serde_json::to_vec(&Line { seq, at_ms, entry })?;
        line.push(b'\n');
        inner.file.write_all(&line)?;
        inner.seq = seq;
        Ok(seq)
    }

    /// Every line so far, oldest first. A line that doesn't parse (a write cut short by a
    /// crash) is skipped.
    pub fn entries(&self) -> std::io::Result<Vec<Value>> {
        let _guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = std::fs::read_to_string(&self.path)?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }

    /// Empties the journal; numbering goes on.
    pub fn clear(&self) -> std::io::Result<()> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.file.set_len(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_as_recorded() {
        assert_eq!(recorded_body(b""), Value::Null);
        assert_eq!(recorded_body(br#"{"a":1}"#), serde_json::json!({"a": 1}));
        assert_eq!(
            recorded_body(b"plain text"),
            Value::String("plain text".into())
        );
        assert_eq!(recorded_body(&[0xff, 0xfe]), Value::Null);
        assert_eq!(
            recorded_body(&vec![b'x'; MAX_RECORDED_BODY + 1]),
            Value::Null
        );
    }

    #[test]
    fn appends_numbers_and_survives_reopening() {
        let dir = std::env::temp_dir().join(format!("echo-plugin-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let j = Journal::open(&dir).unwrap();
        assert_eq!(
            j.append(&Entry::new("request", "POST", "/events", None, b"{}"))
                .unwrap(),
            1
        );
        assert_eq!(
            j.append(&Entry::new("request", "GET", "/healthz", Some("a=b"), b""))
                .unwrap(),
            2
        );
        drop(j);
        let j = Journal::open(&dir).unwrap();
        assert_eq!(
            j.append(&Entry::new("request", "POST", "/x/a", None, b"hi"))
                .unwrap(),
            3
        );
        let entries = j.entries().unwrap();
        let routes: Vec<_> = entries
            .iter()
            .map(|e| e["route"].as_str().unwrap())
            .collect();
        assert_eq!(routes, ["/events", "/healthz", "/x/a"]);
        assert_eq!(entries[1]["query"], "a=b");
        assert_eq!(entries[2]["body"], "hi");
        assert_eq!(entries[2]["seq"], 3);
        j.clear().unwrap();
        assert!(j.entries().unwrap().is_empty());
        assert_eq!(
            j.append(&Entry::new("request", "GET", "/healthz", None, b""))
                .unwrap(),
            4
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
