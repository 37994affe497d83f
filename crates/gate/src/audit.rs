//! The audit: one JSON line per decision, each written with a single `write(2)`, to standard
//! output (the container log) or to a dir of segments kept per the policy's retention; and
//! the denial counters, in `counters.json` beside the segments and in the summary line the
//! gate writes when the plugin exits.
//!
//! A decision line:
//!
//! ```json
//! {"time":"2026-12-03T04:30:00.123Z","seq":7,"event":"decision","plugin":"echo",
//!  "chat":"team-a/general","pid":41,"tid":42,"uid":65532,"syscall":"execve","nr":59,
//!  "op":"exec","path":"/data/true","decision":"deny","enforce":"landlock",
//!  "rule":"no-exec","errno":13,"argv":["/data/true"],"policy_sha256":"…"}
//! ```
//!
//! `enforce` names the layer that holds the rule: `bpf` (decided on registers in the
//! filter), `landlock` (a kernel rule; the supervisor only answered early and wrote the
//! line), or `emulated` (the supervisor performed the call itself on a pinned object).
//! Calls Landlock denies without a trap (a write outside the writable dirs when no rule
//! needs writes trapped) are denied in the kernel without a line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::policy::{AuditDestination, AuditSettings, Decision, Operation, Retention};

/// Which layer holds the rule that decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    Bpf,
    Landlock,
    Emulated,
}

/// Why the audit could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit dir {path}: {source}")]
    Dir {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// One decision, as the supervisor saw it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Event {
    pub pid: i32,
    pub tid: i32,
    pub uid: u32,
    pub syscall: &'static str,
    pub nr: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<Operation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path2: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforce: Option<Layer>,
    pub rule: String,
    /// The errno the call failed with (a denial's, or what the act itself returned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
}

/// Labels on every line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Labels {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    pub policy_sha256: String,
}

/// What the gate counted: decisions, and denials by layer.
#[derive(Debug, Default)]
pub struct Counters {
    pub allowed: AtomicU64,
    pub denied: AtomicU64,
    pub denied_bpf: AtomicU64,
    pub denied_landlock: AtomicU64,
    pub denied_emulated: AtomicU64,
}

/// The counters as written to `counters.json` and the summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CountersSnapshot {
    pub allowed: u64,
    pub denied: u64,
    pub denied_bpf: u64,
    pub denied_landlock: u64,
    pub denied_emulated: u64,
}

impl Counters {
    pub fn count(&self, decision: Decision, layer: Layer) {
        match decision {
            Decision::Allow => {
                self.allowed.fetch_add(1, Ordering::Relaxed);
            }
            Decision::Deny => {
                self.denied.fetch_add(1, Ordering::Relaxed);
                match layer {
                    Layer::Bpf => &self.denied_bpf,
                    Layer::Landlock => &self.denied_landlock,
                    Layer::Emulated => &self.denied_emulated,
                }
                .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            allowed: self.allowed.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
            denied_bpf: self.denied_bpf.load(Ordering::Relaxed),
            denied_landlock: self.denied_landlock.load(Ordering::Relaxed),
            denied_emulated: self.denied_emulated.load(Ordering::Relaxed),
        }
    }
}

/// The name of the counters file in an audit dir.
pub const COUNTERS_FILE: &str = "counters.json";

struct Segment {
    file: File,
    day: i64,
    bytes: u64,
}

enum Sink {
    Stdout,
    Dir {
        dir: PathBuf,
        retention: Retention,
        segment: Option<Segment>,
        counters_written: Option<Instant>,
    },
}

/// The audit log.
pub struct Audit {
    sink: Mutex<Sink>,
    labels: Labels,
    seq: AtomicU64,
    pub counters: Counters,
}

#[derive(Serialize)]
struct Line<'a, T: Serialize> {
    time: String,
    seq: u64,
    event: &'static str,
    #[serde(flatten)]
    labels: &'a Labels,
    #[serde(flatten)]
    body: &'a T,
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn day_now() -> i64 {
    jiff::Timestamp::now().as_second().div_euclid(86_400)
}

/// A segment's name: when it was started, sortable.
fn segment_name() -> String {
    format!(
        "{}-{}.jsonl",
        jiff::Timestamp::now().strftime("%Y-%m-%dT%H-%M-%SZ"),
        std::process::id()
    )
}

/// The segments of an audit dir, oldest first: (path, size, modified).
fn segments(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.path(), m.len(), m.modified().ok()?))
        })
        .collect();
    out.sort();
    out
}

/// Which segments retention removes: older than the limit, then the oldest while the rest
/// weigh more than `max_bytes`. Never `keep` (the one being written). Pure.
pub fn expired(
    segments: &[(PathBuf, u64, SystemTime)],
    retention: &Retention,
    now: SystemTime,
    keep: Option<&Path>,
) -> Vec<PathBuf> {
    let max_age = Duration::from_secs(u64::from(retention.max_age_days) * 86_400);
    let mut gone = Vec::new();
    let mut total: u64 = segments.iter().map(|s| s.1).sum();
    for (path, size, modified) in segments {
        if Some(path.as_path()) == keep {
            continue;
        }
        let old = now.duration_since(*modified).unwrap_or_default() > max_age;
        if old || total > retention.max_bytes {
            gone.push(path.clone());
            total -= size;
        }
    }
    gone
}

impl Audit {
    /// Opens the audit per `settings` (creating the dir, mode 0700, and sweeping old segments).
    pub fn open(settings: &AuditSettings, labels: Labels) -> Result<Audit, AuditError> {
        let sink = match &settings.destination {
            AuditDestination::Stdout => Sink::Stdout,
            AuditDestination::Dir(dir) => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|source| AuditError::Dir {
                        path: dir.display().to_string(),
                        source,
                    })?;
                let mut sink = Sink::Dir {
                    dir: dir.clone(),
                    retention: settings.retention.clone(),
                    segment: None,
                    counters_written: None,
                };
                Self::roll(&mut sink).map_err(|source| AuditError::Dir {
                    path: dir.display().to_string(),
                    source,
                })?;
                sink
            }
        };
        Ok(Audit {
            sink: Mutex::new(sink),
            labels,
            seq: AtomicU64::new(0),
            counters: Counters::default(),
        })
    }

    /// Starts a new segment and applies retention.
    fn roll(sink: &mut Sink) -> std::io::Result<()> {
        let Sink::Dir {
            dir,
            retention,
            segment,
            ..
        } = sink
        else {
            return Ok(());
        };
        let path = dir.join(segment_name());
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        *segment = Some(Segment {
            file,
            day: day_now(),
            bytes,
        });
        for old in expired(&segments(dir), retention, SystemTime::now(), Some(&path)) {
            let _ = std::fs::remove_file(old);
        }
        Ok(())
    }

    fn write_line<T: Serialize>(&self, event: &'static str, body: &T) {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        // Numbered under the lock, so lines are in `seq` order.
        let line = Line {
            time: now_rfc3339(),
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            event,
            labels: &self.labels,
            body,
        };
        let mut bytes = serde_json::to_vec(&line).expect("an audit line always serializes");
        bytes.push(b'\n');
        if let Sink::Dir {
            segment, retention, ..
        } = &*sink
        {
            let full = segment.as_ref().is_none_or(|s| {
                s.day != day_now() || s.bytes + bytes.len() as u64 > retention.max_bytes / 4
            });
            if full {
                let _ = Self::roll(&mut sink);
            }
        }
        match &mut *sink {
            Sink::Stdout => {
                // One write(2) per line: a pipe keeps lines of up to PIPE_BUF whole.
                // SAFETY: writes `bytes` to fd 1.
                let _ = unsafe { libc::write(1, bytes.as_ptr().cast(), bytes.len()) };
            }
            Sink::Dir { segment, .. } => {
                if let Some(s) = segment {
                    // One write(2) per line, O_APPEND.
                    if s.file.write(&bytes).is_ok() {
                        s.bytes += bytes.len() as u64;
                    }
                }
            }
        }
    }

    /// Writes a decision and counts it.
    pub fn record(&self, e: &Event) {
        if let (Some(d), Some(l)) = (e.decision, e.enforce) {
            self.counters.count(d, l);
        }
        self.write_line("decision", e);
        if e.decision == Some(Decision::Deny) {
            self.write_counters(false);
        }
    }

    /// The line the gate writes once the plugin runs: kernel, dirs, trapped calls.
    pub fn start(&self, info: &serde_json::Value) {
        self.write_line("start", info);
    }

    /// The summary line (and `counters.json`) at exit.
    pub fn finish(&self, exit: &serde_json::Value) {
        #[derive(Serialize)]
        struct Summary<'a> {
            #[serde(flatten)]
            counters: CountersSnapshot,
            #[serde(flatten)]
            exit: &'a serde_json::Value,
        }
        self.write_line(
            "summary",
            &Summary {
                counters: self.counters.snapshot(),
                exit,
            },
        );
        self.write_counters(true);
    }

    /// Rewrites `counters.json` (atomically: a temp file renamed), at most once a second
    /// unless `now`.
    fn write_counters(&self, now: bool) {
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        let Sink::Dir {
            dir,
            counters_written,
            ..
        } = &mut *sink
        else {
            return;
        };
        if !now && counters_written.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *counters_written = Some(Instant::now());
        let tmp = dir.join(format!(".{COUNTERS_FILE}.tmp"));
        let body = serde_json::to_vec(&self.counters.snapshot()).expect("counters serialize");
        if std::fs::write(&tmp, body).is_ok() {
            let _ = std::fs::rename(&tmp, dir.join(COUNTERS_FILE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs_ago: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000 - secs_ago)
    }

    #[test]
    fn retention_drops_old_then_oldest_past_the_size() {
        let now = at(0);
        let day = 86_400;
        let segs = vec![
            (PathBuf::from("/a/1.jsonl"), 10, at(40 * day)),
            (PathBuf::from("/a/2.jsonl"), 100_000, at(3 * day)),
            (PathBuf::from("/a/3.jsonl"), 100_000, at(2 * day)),
            (PathBuf::from("/a/4.jsonl"), 10, at(0)),
        ];
        let r = Retention {
            max_age_days: 30,
            max_bytes: 150_000,
        };
        let gone = expired(&segs, &r, now, Some(Path::new("/a/4.jsonl")));
        assert_eq!(
            gone,
            vec![PathBuf::from("/a/1.jsonl"), PathBuf::from("/a/2.jsonl")]
        );
        let r = Retention {
            max_age_days: 1,
            max_bytes: 1 << 30,
        };
        let gone = expired(&segs, &r, now, Some(Path::new("/a/4.jsonl")));
        assert_eq!(gone.len(), 3);
    }

    #[test]
    fn lines_parse_and_counters_count() {
        let dir = std::env::temp_dir().join(format!("gate-audit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = AuditSettings {
            destination: AuditDestination::Dir(dir.clone()),
            ..Default::default()
        };
        let labels = Labels {
            plugin: Some("echo".into()),
            chat: None,
            policy_sha256: "ab".into(),
        };
        let audit = Audit::open(&settings, labels).unwrap();
        audit.start(&serde_json::json!({"landlock_abi": 7}));
        audit.record(&Event {
            pid: 1,
            tid: 2,
            syscall: "execve",
            nr: 59,
            op: Some(Operation::Exec),
            path: Some("/data/x".into()),
            decision: Some(Decision::Deny),
            enforce: Some(Layer::Landlock),
            rule: "no-exec".into(),
            errno: Some(libc::EACCES),
            ..Default::default()
        });
        audit.finish(&serde_json::json!({"exit_code": 0}));
        let seg = segments(&dir);
        assert_eq!(seg.len(), 1);
        let text = std::fs::read_to_string(&seg[0].0).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["event"], "start");
        assert_eq!(lines[1]["decision"], "deny");
        assert_eq!(lines[1]["enforce"], "landlock");
        assert_eq!(lines[1]["plugin"], "echo");
        assert_eq!(lines[1]["seq"], 1);
        assert_eq!(lines[2]["denied_landlock"], 1);
        let counters: CountersSnapshot =
            serde_json::from_slice(&std::fs::read(dir.join(COUNTERS_FILE)).unwrap()).unwrap();
        assert_eq!(counters.denied, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
