//! The supervisor: worker threads wait on the listener, each trapped call is decoded,
//! performed (`perform`) and audited, then answered. The pool grows while every worker is
//! busy (an open of a FIFO can block one), up to a cap.
//!
//! The audit line is written before the answer, so a line exists for every call the plugin
//! saw answered, even if the gate exits right after.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::audit::{Audit, Event, Layer};
use crate::compiled::CompiledPolicy;
use crate::notify::{Listener, Notification, Response};
use crate::perform::{Ctx, perform};
use crate::plan::register_denial;
use crate::policy::Decision;
use crate::remote;
use crate::request::{Request, decode};
use crate::resolve::Caller;
use crate::syscalls::Call;

/// Most worker threads the pool grows to.
pub const MAX_WORKERS: usize = 64;

pub struct Supervisor {
    listener: Listener,
    policy: CompiledPolicy,
    audit: Arc<Audit>,
    idle: AtomicUsize,
    threads: AtomicUsize,
    /// Thread → process, checked on each use (`/proc/<tgid>/task/<tid>` exists).
    tgids: Mutex<HashMap<i32, i32>>,
    /// The plugin's uid: the gate's (the plugin cannot change it: no_new_privs, no caps).
    uid: u32,
}

fn text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Supervisor {
    pub fn new(listener: Listener, policy: CompiledPolicy, audit: Arc<Audit>) -> Arc<Supervisor> {
        Arc::new(Supervisor {
            listener,
            policy,
            audit,
            idle: AtomicUsize::new(0),
            threads: AtomicUsize::new(0),
            tgids: Mutex::new(HashMap::new()),
            // SAFETY: plain call.
            uid: unsafe { libc::getuid() },
        })
    }

    /// The process thread `tid` belongs to: from the cache when still true, else from
    /// `/proc/<tid>/status`.
    fn tgid(&self, tid: i32) -> Option<i32> {
        let cached = self.tgids.lock().ok()?.get(&tid).copied();
        if let Some(t) = cached
            && remote::in_group(t, tid)
        {
            return Some(t);
        }
        let tgid = remote::status(tid).ok()?.tgid;
        let mut cache = self.tgids.lock().ok()?;
        if cache.len() > 4096 {
            cache.clear();
        }
        cache.insert(tid, tgid);
        Some(tgid)
    }

    /// Starts `n` workers.
    pub fn start(self: &Arc<Self>, n: usize) -> std::io::Result<()> {
        for _ in 0..n {
            self.spawn_worker()?;
        }
        Ok(())
    }

    fn spawn_worker(self: &Arc<Self>) -> std::io::Result<()> {
        self.threads.fetch_add(1, Ordering::SeqCst);
        self.idle.fetch_add(1, Ordering::SeqCst);
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name("gate-worker".into())
            .stack_size(256 << 10)
            .spawn(move || me.worker())
            .map(|_| ())
    }

    fn worker(self: Arc<Self>) {
        loop {
            let Ok(n) = self.listener.recv() else {
                self.idle.fetch_sub(1, Ordering::SeqCst);
                self.threads.fetch_sub(1, Ordering::SeqCst);
                return;
            };
            let idle = self.idle.fetch_sub(1, Ordering::SeqCst) - 1;
            if idle == 0 && self.threads.load(Ordering::SeqCst) < MAX_WORKERS {
                let _ = self.spawn_worker();
            }
            self.handle(n);
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn answer(&self, n: &Notification, event: &Event, response: Response) {
        self.audit.record(event);
        // An error here means the caller died meanwhile: nothing left to answer.
        let _ = self.listener.respond(n.id, response);
    }

    /// Handles one trapped call, start to answer.
    pub fn handle(&self, n: Notification) {
        let Some(call) = Call::from_nr(n.nr) else {
            let _ = self.listener.respond(n.id, Response::Error(libc::ENOSYS));
            return;
        };
        let Some(tgid) = self.tgid(n.tid) else {
            // Gone already.
            let _ = self.listener.respond(n.id, Response::Error(libc::ESRCH));
            return;
        };
        let mut event = Event {
            pid: tgid,
            tid: n.tid,
            uid: self.uid,
            syscall: call.name(),
            nr: n.nr,
            ..Default::default()
        };
        if let Some((rule, errno)) = register_denial(call) {
            event.decision = Some(Decision::Deny);
            event.enforce = Some(Layer::Bpf);
            event.rule = format!("bpf.{rule}");
            event.errno = Some(errno);
            return self.answer(&n, &event, Response::Error(errno));
        }
        let req = match decode(call, &n) {
            Ok(r) => r,
            Err(e) => {
                // Arguments the supervisor cannot read: the call fails, closed.
                event.rule = "unreadable".into();
                event.errno = Some(e);
                return self.answer(&n, &event, Response::Error(e));
            }
        };
        if let Request::Exec { argv, .. } = &req {
            event.argv = Some(argv.clone());
        }
        let pending = || self.listener.id_valid(n.id);
        // Read only by calls that create something.
        let umask = || remote::status(n.tid).map_or(0o022, |s| s.umask);
        let ctx = Ctx {
            policy: &self.policy,
            caller: Caller { tid: n.tid, tgid },
            umask: &umask,
            pending: &pending,
        };
        let outcome = perform(&ctx, &req);
        event.op = outcome.op;
        event.path = outcome.path.as_deref().map(text);
        event.path2 = outcome.path2.as_deref().map(text);
        event.errno = outcome.errno();
        match outcome.verdict {
            Some(v) => {
                event.decision = Some(v.decision);
                event.enforce = Some(outcome.layer);
                event.rule = v.rule.to_string();
            }
            None => event.rule = "unresolved".into(),
        }
        self.answer(&n, &event, outcome.response);
    }
}
