//! The agentgate, enforced: a plugin's command runs under Landlock, a seccomp BPF filter and
//! a user-notification supervisor, with every decision in a JSONL audit.
//!
//! # Where each rule of the reference's Agentgate section lives
//!
//! | the reference says | enforced by | written in |
//! |---|---|---|
//! | the plugin runs under the gate, which drops to the daemon's user | the gate as PID 1, non-root (root drops to `--uid`; the plugin never runs as root) | [`run`](crate::run()) (`drop_privileges`), [`process`] |
//! | nobody answers a prompt, so what the policy doesn't allow is denied | [`decide`] ends in a deny; `approve` is refused when the policy loads | [`decide`], [`policy`] |
//! | deny running files from /data, /tmp and /dev/shm | Landlock: EXECUTE granted everywhere else; memfds made with `MFD_NOEXEC_SEAL` (Landlock would let one run) | [`ruleset`] (grants), [`decide::decide_exec`] (the audit's early answer), [`perform`] (memfds) |
//! | then the manifest's `gate` rules (files by glob and operation, commands by name) | files: the supervisor performs the call on a pinned object; commands: Landlock leaves the denied files out of EXECUTE, the supervisor denies by name | [`compiled`], [`decide`], [`perform`], [`ruleset::denied_executables`] |
//! | baseline: every file op under /data and /tmp and on the usual /dev files | Landlock write grants; chmod/chown/timestamps/xattrs (which Landlock cannot limit) through the supervisor | [`ruleset`], [`perform`] |
//! | baseline: reads, stats and listings anywhere else | never trapped (Landlock does not handle reads) | [`plan`] |
//! | baseline: any exec of a file outside those dirs | Landlock EXECUTE grants | [`ruleset`] |
//! | baseline: no unix-socket connects | BPF: `socket(AF_UNIX)` denied, socketpairs only stream or seqpacket | [`plan`], [`filter`] |
//! | decisions go to an audit log, kept per `gates.audit` | one JSON line per decision, retention by age and size, denial counters | [`audit`] |
//! | the gate's filter stacks on the runtime's default seccomp profile | a filter of our own (hand-assembled BPF), nothing replaced | [`filter`], [`spawn`] |
//!
//! Beyond the reference (issue 14): the supervisor never answers CONTINUE to a call whose
//! decision rests on a pointer argument; it performs the call itself on the object it pinned
//! and hands back the result (an open's descriptor through `SECCOMP_IOCTL_NOTIF_ADDFD`).
//! Exec is the one CONTINUE, because Landlock, not the supervisor, holds every exec limit.
//! Other hardening in the filter: io_uring, ptrace, process_vm_writev, open_by_handle_at,
//! pidfd_getfd, namespaces and mounts denied; openat2 and clone3 answer ENOSYS (the C
//! library falls back to calls the filter can read); another architecture or x32 is killed;
//! calls newer than the table answer ENOSYS. If the supervisor dies, trapped calls fail
//! (ENOSYS); if the kernel lacks Landlock (ABI 2) or user notification, the gate refuses to
//! start the plugin ([`kernel`]).
//!
//! # What it does not stop (said so the audit is read right)
//!
//! - Code run without `execve`: `sh /data/s.sh`, `ld-linux.so /data/x`, an interpreter's
//!   own loader mapping a file from /data executable. Only a `noexec` mount stops those, and
//!   an emptyDir or PVC cannot be mounted so from the pod spec.
//! - A command rule on a name that is a link to a multi-call binary (busybox): the supervisor
//!   denies it by name, but Landlock cannot leave the binary out without denying every name
//!   it answers to, so a racing thread or `busybox wget` gets through (the start line notes
//!   each such command).
//! - Stats, `access`, `readlink`, `getxattr` anywhere: the baseline allows them and no rule
//!   can deny them without trapping every one.
//! - Calls Landlock denies without a trap (a write outside the writable dirs when no rule
//!   needs writes trapped) leave no audit line: the kernel says EACCES, nobody sees it.
//! - glibc's nscd probe (a `socket(AF_UNIX)` before name lookups) shows as
//!   `bpf.unix-socket` denials: two per process, then glibc stops asking for a while.
//!
//! # In a pod
//!
//! The gate is the plugin container's command, PID 1, with the plugin's command after `--`:
//!
//! ```text
//! /loop-gate/loop-plugins gate --policy /loop-gate/policy.json \
//!     --plugin echo --chat team-a/general -- /loop-plugin/echo-plugin
//! ```
//!
//! - Files: the binary (the init container copies it into the shared emptyDir) and the
//!   policy ([`Policy::to_json`], compiled at admission with [`Policy::from_rules`]), written
//!   by the init container or mounted from a ConfigMap. The image needs nothing from us.
//! - securityContext: Pod Security `restricted` is enough (runAsNonRoot, the plugin's uid,
//!   drop ALL, allowPrivilegeEscalation false, seccompProfile RuntimeDefault). No
//!   capability, no Localhost profile: the gate uses `seccomp`, `landlock_*`,
//!   `process_vm_readv`, `memfd_create`, `signalfd`, which RuntimeDefault allows, and never
//!   `pidfd_getfd` (which needs CAP_SYS_PTRACE there).
//! - The node: Landlock ABI 2 or later enabled, seccomp user notification (Linux 5.19+),
//!   Yama `ptrace_scope` 0 or 1. Otherwise the gate exits 125 with the reason and the plugin
//!   does not run; HostConfig `gates.agentgate.enabled: false` runs the command directly.
//! - Audit: `/data/.loop-audit/` by default (segments and `counters.json`), `--audit -` for
//!   the container log. An audit dir inside `/data` is protected from the plugin, which
//!   costs a trap on every file-changing call; a dir outside the writable ones (another
//!   mount) is protected by Landlock for free.
//! - Exit: the plugin's status (128 + signal when killed), 125 when the gate refused,
//!   127 for a command that does not exist.
//!
//! # Modules, by job
//!
//! - [`policy`]: the policy file (serde), defaults, validation.
//! - [`compiled`]: the policy ready to decide with (globs, canonical dirs, derived sets).
//! - [`decide`]: the decision, pure.
//! - [`syscalls`], [`plan`], [`filter`]: the calls, which are trapped, the BPF program.
//! - [`ruleset`]: the Landlock grants.
//! - [`kernel`]: what the kernel offers.
//! - [`spawn`], [`process`]: starting the plugin confined; PID 1's signals and reaping.
//! - [`notify`], [`remote`], [`request`], [`resolve`], [`perform`], [`supervise`]: the
//!   supervisor, from a trapped call to its answer.
//! - [`audit`]: the JSONL lines, retention, counters.
//! - [`run`](crate::run()): the entry point and its arguments.

pub mod audit;
pub mod compiled;
pub mod decide;
pub mod filter;
pub mod glob;
pub mod kernel;
pub mod notify;
pub mod perform;
pub mod plan;
pub mod policy;
pub mod process;
pub mod remote;
pub mod request;
pub mod resolve;
pub mod ruleset;
mod run;
pub mod spawn;
pub mod supervise;
pub mod syscalls;

pub use audit::{COUNTERS_FILE, CountersSnapshot, Layer};
pub use kernel::{Kernel, KernelError, probe as probe_kernel};
pub use policy::{
    AuditDestination, AuditSettings, CommandRule, Decision, FileRule, GateRules, Operation, Policy,
    PolicyError, Retention,
};
pub use run::{GateArgs, GateError, policy_from_args, run};
