//! The seccomp user-notification listener: receive a trapped call, check it is still
//! pending, answer it (an errno, a value, CONTINUE for exec only) or hand back a descriptor
//! the supervisor opened with `SECCOMP_IOCTL_NOTIF_ADDFD` and `SECCOMP_ADDFD_FLAG_SEND` (the
//! descriptor becomes the call's return value, atomically). Thin ioctl wrappers; no decisions.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// A trapped call.
#[derive(Clone, Copy, Debug)]
pub struct Notification {
    pub id: u64,
    /// The calling thread, in the supervisor's PID namespace.
    pub tid: i32,
    pub nr: u32,
    pub arch: u32,
    pub args: [u64; 6],
}

/// The answer to a trapped call.
#[derive(Debug)]
pub enum Response {
    /// Let the kernel run the call as it is. Only for `execve`: its pointer arguments are
    /// read again by the kernel, so CONTINUE is never the boundary; Landlock is.
    Continue,
    /// Fail with this errno.
    Error(i32),
    /// Succeed with this return value (the supervisor did the work).
    Value(i64),
    /// Succeed, returning this descriptor installed in the caller.
    Fd { fd: OwnedFd, cloexec: bool },
}

/// The listener descriptor `seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)` returned.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
}

/// `SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP` (Linux 6.6): the supervisor's thread is woken on
/// the trapped thread's CPU, which cuts the round trip.
const SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;

impl Listener {
    /// Wraps the listener, asking for synchronous wake-ups where the kernel has them.
    pub fn new(fd: OwnedFd) -> Listener {
        // SAFETY: the ioctl takes the flags by value; an older kernel says EINVAL, fine.
        unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
            )
        };
        Listener { fd }
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Waits for the next trapped call (blocking). Several threads may wait at once; each call
    /// goes to one of them.
    pub fn recv(&self) -> io::Result<Notification> {
        loop {
            // SAFETY: seccomp_notif is plain data; the kernel wants it zeroed.
            let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: the ioctl writes one seccomp_notif into `n`.
            let r = unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut n) };
            if r == 0 {
                return Ok(Notification {
                    id: n.id,
                    tid: n.pid as i32,
                    nr: n.data.nr as u32,
                    arch: n.data.arch,
                    args: n.data.args,
                });
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // Interrupted, or the caller went away between the wakeup and the receive.
                Some(libc::EINTR) | Some(libc::ENOENT) => continue,
                _ => return Err(e),
            }
        }
    }

    /// The call is still pending: the thread that made it has not died, so what was read
    /// about it (its memory, its /proc entries) is about it, not a reused PID.
    pub fn id_valid(&self, id: u64) -> bool {
        // SAFETY: the ioctl reads one u64.
        unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 }
    }

    /// Answers call `id`. An error means the caller is gone (killed meanwhile): nothing to do.
    pub fn respond(&self, id: u64, response: Response) -> io::Result<()> {
        let (error, val, flags) = match response {
            Response::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
            Response::Error(e) => (-e, 0, 0),
            Response::Value(v) => (0, v, 0),
            Response::Fd { fd, cloexec } => return self.add_fd(id, &fd, cloexec).map(|_| ()),
        };
        let mut resp = libc::seccomp_notif_resp {
            id,
            val,
            error,
            flags,
        };
        // SAFETY: the ioctl reads one seccomp_notif_resp.
        let r = unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Installs `fd` in the caller and makes its number the call's return value.
    fn add_fd(&self, id: u64, fd: &OwnedFd, cloexec: bool) -> io::Result<i32> {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
            srcfd: fd.as_raw_fd() as u32,
            newfd: 0,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: the ioctl reads one seccomp_notif_addfd.
        let r = unsafe { libc::ioctl(self.raw(), libc::SECCOMP_IOCTL_NOTIF_ADDFD, &addfd) };
        if r >= 0 {
            Ok(r)
        } else {
            Err(io::Error::last_os_error())
        }
    }
}
