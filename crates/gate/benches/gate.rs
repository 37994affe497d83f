//! `make bench-gate` (`cargo bench -p loop-plugins-gate --bench gate`): a syscall-heavy
//! workload under the gate against the same workload bare, in the same run, as ratios.
//!
//! Workloads (the probe's `bench-*` ops, each timing its own loop):
//! - open/fstat/read/close + stat over 64 files (reads: never trapped);
//! - create/write/close/unlink in a writable dir (on tmpfs, so the disk's journal does not
//!   drown the difference);
//! - fork + exec of /bin/true (exec: always trapped, for the audit).
//!
//! Configurations: bare; the gate with the audit outside the writable dirs (only exec and
//! metadata trapped: the common case); the gate with the audit in the writable dir (a pod's
//! default `/data/.loop-audit`: every file-changing call trapped and performed by the
//! supervisor). Each is run `GATE_BENCH_ROUNDS` times (default 7), interleaved; the best
//! round of each is compared (other load on the machine only ever adds time), and the medians
//! are printed beside. As root, everything runs as uid 65534 (bare too), as in a pod.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const UID: u32 = 65534;

fn is_root() -> bool {
    // SAFETY: plain call.
    unsafe { libc::geteuid() == 0 }
}

fn chown(p: &Path) {
    if is_root() {
        std::os::unix::fs::chown(p, Some(UID), Some(UID)).unwrap();
    }
}

struct Setup {
    root: PathBuf,
    data: PathBuf,
    files: PathBuf,
    gate: PathBuf,
    probe: PathBuf,
}

fn setup() -> Setup {
    let root = std::env::temp_dir().join(format!("gate-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let s = Setup {
        // On tmpfs: the loops measure the gate, not the disk's journal.
        data: PathBuf::from(format!("/dev/shm/gate-bench-{}", std::process::id())),
        files: root.join("files"),
        gate: root.join("bin/loop-plugins-gate"),
        probe: root.join("bin/gate-probe"),
        root,
    };
    for d in [
        &s.root,
        &s.data,
        &s.files,
        &s.root.join("bin"),
        &s.root.join("tmp"),
        &s.root.join("audit"),
    ] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for d in [&s.data, &s.root.join("tmp"), &s.root.join("audit")] {
        chown(d);
    }
    for i in 0..64 {
        std::fs::write(s.files.join(format!("f{i}")), vec![b'x'; 4096]).unwrap();
    }
    std::fs::copy(env!("CARGO_BIN_EXE_loop-plugins-gate"), &s.gate).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_gate-probe"), &s.probe).unwrap();
    s
}

#[derive(Clone, Copy, PartialEq)]
enum Config {
    Bare,
    Gated,
    GatedAuditInData,
}

fn command(s: &Setup, config: Config, op: &[String]) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            format!("--reuid={UID}"),
            format!("--regid={UID}"),
            "--clear-groups".into(),
            "--".into(),
        ]);
        c
    } else {
        Command::new("env")
    };
    if config != Config::Bare {
        let audit = match config {
            Config::GatedAuditInData => s.data.join(".loop-audit"),
            _ => s.root.join("audit"),
        };
        c.arg(&s.gate);
        for d in [&s.data, &s.root.join("tmp")] {
            c.arg("--writable").arg(d).arg("--no-exec").arg(d);
        }
        c.args(["--no-exec", "/dev/shm", "--audit"])
            .arg(audit)
            .arg("--");
    }
    c.arg(&s.probe).args(op);
    c
}

/// Runs one op; the probe's own timing in ns per iteration.
fn time(s: &Setup, config: Config, op: &[String], n: usize) -> f64 {
    let out = command(s, config, op).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let ns: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("ns "))
        .unwrap_or_else(|| {
            panic!(
                "no timing from {op:?}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .parse()
        .unwrap();
    ns / n as f64
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn main() {
    if let Err(e) = loop_plugins_gate::kernel::check(loop_plugins_gate::probe_kernel()) {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let s = setup();
    let started = Instant::now();
    let workloads: Vec<(&str, Vec<String>, usize)> = vec![
        (
            "open/fstat/read/close+stat",
            vec![
                "bench-io".into(),
                s.files.display().to_string(),
                "20000".into(),
            ],
            20_000,
        ),
        (
            "create/write/close/unlink",
            vec![
                "bench-write".into(),
                s.data.display().to_string(),
                "5000".into(),
            ],
            5_000,
        ),
        (
            "fork+exec /bin/true",
            vec!["bench-exec".into(), "300".into()],
            300,
        ),
    ];
    let rounds: usize = std::env::var("GATE_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(7);
    let configs = [Config::Bare, Config::Gated, Config::GatedAuditInData];
    println!(
        "{:<28} {:>10} {:>10} {:>6} {:>10} {:>6}   (medians: bare gated audit/data)",
        "ns per iteration, best of", "bare", "gated", "ratio", "audit/data", "ratio"
    );
    for (name, op, n) in &workloads {
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
        for _ in 0..rounds {
            for (i, c) in configs.iter().enumerate() {
                runs[i].push(time(&s, *c, op, *n));
            }
        }
        let runs: Vec<Vec<f64>> = runs.into_iter().map(sorted).collect();
        let best: Vec<f64> = runs.iter().map(|r| r[0]).collect();
        let med: Vec<f64> = runs.iter().map(|r| r[r.len() / 2]).collect();
        println!(
            "{:<28} {:>10.0} {:>10.0} {:>5.2}x {:>10.0} {:>5.2}x   ({:.0} {:.0} {:.0})",
            name,
            best[0],
            best[1],
            best[1] / best[0],
            best[2],
            best[2] / best[0],
            med[0],
            med[1],
            med[2]
        );
    }
    println!(
        "({rounds} interleaved rounds; {:.1}s; load average {})",
        started.elapsed().as_secs_f64(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .unwrap_or("?")
    );
    let _ = std::fs::remove_dir_all(&s.root);
    let _ = std::fs::remove_dir_all(&s.data);
}
