//! The entry point the CLI calls: `loop-plugins gate [OPTIONS] -- COMMAND ARGS...`.
//!
//! Order: the policy (file, manifest, or a pod's defaults, then the command line's
//! overrides); privileges (root drops to `--uid`, and the plugin never runs as root); the
//! kernel check (no Landlock or no user notification: refuse, never run unconfined); the
//! filter and the ruleset; the audit; the plugin started confined; the supervisor; then
//! signals forwarded and children reaped until the plugin ends, whose status is the gate's.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use crate::audit::{Audit, AuditError, Labels};
use crate::compiled::{CompiledPolicy, canonical_on_host};
use crate::kernel::{self, KernelError};
use crate::policy::{AuditDestination, Policy, PolicyError, rules_from_manifest};
use crate::process::{self, Signals};
use crate::ruleset::{self, RulesetError};
use crate::spawn::{self, Launch, SpawnError};
use crate::supervise::Supervisor;
use crate::{filter, plan};

/// `gate`'s arguments. The CLI flattens these into its `gate` subcommand.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct GateArgs {
    /// The policy file (written by the init container, compiled from the manifest at
    /// admission).
    #[arg(long, value_name = "PATH", conflicts_with = "manifest_gate")]
    pub policy: Option<PathBuf>,
    /// A plugin manifest (plugin.json, JSON5) whose `gate` rules to enforce, with a pod's
    /// defaults for everything else.
    #[arg(
        long = "manifest-gate",
        visible_alias = "manifest",
        value_name = "PATH"
    )]
    pub manifest_gate: Option<PathBuf>,
    /// Where the audit goes: a dir of JSONL segments, or `-` for standard output.
    #[arg(long, value_name = "DIR|-")]
    pub audit: Option<String>,
    /// A dir the plugin may write (repeatable; replaces the policy's, default /data and /tmp).
    #[arg(long = "writable", value_name = "DIR")]
    pub writable: Vec<PathBuf>,
    /// A dir nothing may run from (repeatable; replaces the policy's, default /data, /tmp
    /// and /dev/shm; the writable dirs are always added).
    #[arg(long = "no-exec", value_name = "DIR")]
    pub no_exec: Vec<PathBuf>,
    /// The plugin's name, for the audit.
    #[arg(long)]
    pub plugin: Option<String>,
    /// The chat's name, for the audit.
    #[arg(long)]
    pub chat: Option<String>,
    /// At exit, append the denial counters as one JSON line to this file (in a pod,
    /// /dev/termination-log: the counts then show in the Pod's status for the controller).
    #[arg(long, value_name = "PATH")]
    pub termination_log: Option<PathBuf>,
    /// Started as root: the uid the gate and the plugin run as.
    #[arg(long)]
    pub uid: Option<u32>,
    /// Started as root: the gid (default: the uid).
    #[arg(long)]
    pub gid: Option<u32>,
    /// The plugin's command.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Why the gate did not run the plugin (its exit code is 125, or 127 for a command that
/// does not exist).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Kernel(#[from] KernelError),
    #[error(transparent)]
    Ruleset(#[from] RulesetError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error(
        "refusing to run the plugin as root: pass --uid (in a pod the gate runs as the plugin's uid)"
    )]
    Root,
    #[error("switching to uid {uid} gid {gid}: {source}")]
    Privileges {
        uid: u32,
        gid: u32,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "running as uid {running}, the gate cannot switch to uid {wanted}: start it as root or as that uid"
    )]
    WrongUid { running: u32, wanted: u32 },
    #[error("no command to run after --")]
    NoCommand,
    #[error("{0}: command not found")]
    NotFound(String),
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

impl GateError {
    pub fn exit_code(&self) -> u8 {
        match self {
            GateError::NotFound(_) => 127,
            _ => 125,
        }
    }
}

/// Runs the plugin's command under the gate; the plugin's exit status, or 125 (127) when
/// the gate could not start it, with the reason on stderr.
pub fn run(args: GateArgs) -> ExitCode {
    match launch(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("loop-plugins gate: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The policy the arguments name, with their overrides.
pub fn policy_from_args(args: &GateArgs) -> Result<Policy, PolicyError> {
    let mut policy = match (&args.policy, &args.manifest_gate) {
        (Some(p), _) => Policy::load(p)?,
        (None, Some(m)) => {
            let shown = m.display().to_string();
            let text = std::fs::read_to_string(m).map_err(|source| PolicyError::Read {
                path: shown.clone(),
                source,
            })?;
            Policy::from_rules(rules_from_manifest(&text, &shown)?)?
        }
        (None, None) => Policy::default(),
    };
    if !args.writable.is_empty() {
        policy.writable = args.writable.clone();
    }
    if !args.no_exec.is_empty() {
        policy.no_exec = args.no_exec.clone();
    }
    if let Some(a) = &args.audit {
        policy.audit.destination = AuditDestination::parse(a);
    }
    if args.plugin.is_some() {
        policy.plugin = args.plugin.clone();
    }
    if args.chat.is_some() {
        policy.chat = args.chat.clone();
    }
    policy.validate()?;
    Ok(policy)
}

fn drop_privileges(uid: Option<u32>, gid: Option<u32>) -> Result<(), GateError> {
    // SAFETY: plain calls.
    let running = unsafe { libc::geteuid() };
    match (running, uid) {
        (0, None) | (0, Some(0)) => Err(GateError::Root),
        (0, Some(uid)) => {
            let gid = gid.unwrap_or(uid);
            let fail = |_| GateError::Privileges {
                uid,
                gid,
                source: std::io::Error::last_os_error(),
            };
            // SAFETY: plain calls while single-threaded (glibc's setxid broadcast is moot).
            unsafe {
                (libc::setgroups(1, &gid) == 0)
                    .then_some(())
                    .ok_or(())
                    .map_err(fail)?;
                (libc::setresgid(gid, gid, gid) == 0)
                    .then_some(())
                    .ok_or(())
                    .map_err(fail)?;
                (libc::setresuid(uid, uid, uid) == 0)
                    .then_some(())
                    .ok_or(())
                    .map_err(fail)?;
                if libc::geteuid() != uid || libc::getuid() != uid {
                    return Err(fail(()));
                }
            }
            Ok(())
        }
        (running, Some(wanted)) if running != wanted => {
            Err(GateError::WrongUid { running, wanted })
        }
        _ => Ok(()),
    }
}

/// PATH search as `execvp` does it, done before the fork so the exec is of a known file.
fn find_program(command: &OsString, path_env: &str) -> Result<PathBuf, GateError> {
    let bytes = command.as_bytes();
    if bytes.is_empty() {
        return Err(GateError::NoCommand);
    }
    if bytes.contains(&b'/') {
        return Ok(PathBuf::from(command));
    }
    for dir in path_env.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = Path::new(dir).join(command);
        let Ok(c) = CString::new(candidate.as_os_str().as_bytes()) else {
            continue;
        };
        // SAFETY: plain calls on our own string.
        let ok = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::stat(c.as_ptr(), &mut st) == 0
                && st.st_mode & libc::S_IFMT == libc::S_IFREG
                && libc::access(c.as_ptr(), libc::X_OK) == 0
        };
        if ok {
            return Ok(candidate);
        }
    }
    Err(GateError::NotFound(command.to_string_lossy().into_owned()))
}

fn cstring(bytes: Vec<u8>) -> Result<CString, GateError> {
    CString::new(bytes).map_err(|_| GateError::Os {
        what: "an argument or environment value holds a NUL",
        source: std::io::Error::from_raw_os_error(libc::EINVAL),
    })
}

/// One line `{"gate":{...counters}}` appended to `path` (best effort: the plugin may have
/// written its own message there, which stays first).
fn append_counters(path: &Path, counters: &crate::audit::CountersSnapshot) {
    use std::io::Write;
    let mut line = serde_json::to_vec(&serde_json::json!({ "gate": counters })).expect("json");
    line.push(b'\n');
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = f.write_all(&line);
    }
}

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn launch(args: GateArgs) -> Result<u8, GateError> {
    if args.command.is_empty() {
        return Err(GateError::NoCommand);
    }
    let policy = policy_from_args(&args)?;
    drop_privileges(args.uid, args.gid)?;
    let k = kernel::probe();
    kernel::check(k)?;

    let compiled = CompiledPolicy::compile(&policy, canonical_on_host)?;
    let features = plan::Features {
        memfd_noexec: k.memfd_noexec,
    };
    let plan = plan::plan(&compiled.ops_needing_traps(), features);
    let filter = filter::assemble(&plan);
    let path_env = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into());
    let (denied_files, notes) = ruleset::denied_executables(&compiled, &path_env);
    let grants = ruleset::grants(&compiled, &denied_files);
    let rs = ruleset::build(&grants)?;

    let labels = Labels {
        plugin: policy.plugin.clone(),
        chat: policy.chat.clone(),
        policy_sha256: policy.sha256(),
    };
    let audit = Arc::new(Audit::open(&policy.audit, labels)?);
    let program = find_program(&args.command[0], &path_env)?;
    audit.start(&serde_json::json!({
        "command": args.command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>(),
        "program": program.to_string_lossy(),
        "landlock_abi": k.landlock_abi,
        "memfd_noexec": k.memfd_noexec,
        "writable": compiled.writable,
        "no_exec": compiled.no_exec,
        "protected": compiled.protected,
        "trapped": plan.trapped_names(),
        "exec_denied_files": denied_files,
        "exec_grants": grants.exec.len(),
        "notes": notes,
    }));

    let launch = Launch {
        program: cstring(program.into_os_string().into_vec())?,
        argv: args
            .command
            .iter()
            .map(|a| cstring(a.as_bytes().to_vec()))
            .collect::<Result<_, _>>()?,
        env: std::env::vars_os()
            .map(|(k, v)| {
                let mut kv = k.into_vec();
                kv.push(b'=');
                kv.extend(v.into_vec());
                cstring(kv)
            })
            .collect::<Result<_, _>>()?,
        filter,
        ruleset: rs,
    };
    let os = |what| move |source| GateError::Os { what, source };
    process::block().map_err(os("blocking signals"))?;
    let signals = Signals::new().map_err(os("signalfd"))?;
    // The supervisor's memory is not the plugin's to read; orphans of the plugin are reaped
    // here even when the gate is not PID 1 (on a host).
    // SAFETY: plain prctl calls.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let (pid, listener) = spawn::spawn(launch)?;
    let supervisor = Supervisor::new(listener, compiled, Arc::clone(&audit));
    supervisor.start(2).map_err(os("starting the supervisor"))?;

    let status = process::wait_for(pid, &signals).map_err(os("waiting for the plugin"))?;
    let code = process::exit_code(status);
    let signal = libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status));
    audit.finish(&serde_json::json!({ "exit_code": code, "signal": signal }));
    if let Some(path) = &args.termination_log {
        append_counters(path, &audit.counters.snapshot());
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gate: GateArgs,
    }

    #[test]
    fn arguments_parse_and_override_the_policy() {
        let cli = Cli::try_parse_from([
            "gate",
            "--writable",
            "/srv/a",
            "--writable",
            "/srv/b",
            "--audit",
            "-",
            "--chat",
            "c1",
            "--",
            "/bin/echo",
            "--not-ours",
        ])
        .unwrap();
        assert_eq!(
            cli.gate.command,
            vec![OsString::from("/bin/echo"), OsString::from("--not-ours")]
        );
        let p = policy_from_args(&cli.gate).unwrap();
        assert_eq!(
            p.writable,
            vec![PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]
        );
        assert_eq!(p.no_exec, crate::policy::default_no_exec());
        assert_eq!(p.audit.destination, AuditDestination::Stdout);
        assert_eq!(p.chat.as_deref(), Some("c1"));
        assert!(
            Cli::try_parse_from(["gate", "--policy", "a", "--manifest-gate", "b", "--", "x"])
                .is_err()
        );
        assert!(Cli::try_parse_from(["gate", "--writable", "/x"]).is_err());
        // The spelling of the manifest option.
        let cli = Cli::try_parse_from(["gate", "--manifest", "plugin.json", "--", "x"]).unwrap();
        assert_eq!(cli.gate.manifest_gate, Some(PathBuf::from("plugin.json")));
    }

    #[test]
    fn commands_are_found_on_the_path() {
        assert_eq!(
            find_program(&"sh".into(), "/nonexistent:/bin").unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert!(matches!(
            find_program(&"no-such-command-here".into(), "/bin"),
            Err(GateError::NotFound(_))
        ));
        assert_eq!(
            find_program(&"./x".into(), "/bin").unwrap(),
            PathBuf::from("./x")
        );
    }
}
