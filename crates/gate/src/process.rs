//! The gate as the container's PID 1: it blocks the signals it handles before the plugin
//! starts (the plugin gets them unblocked), forwards every one of them to the plugin, reaps
//! every child that ends (orphans reparented to PID 1 included), and ends with the plugin's
//! status: its exit code, or 128 + the signal that killed it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The signals passed on to the plugin.
pub const FORWARDED: &[libc::c_int] = &[
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGCONT,
    libc::SIGALRM,
];

fn set_of(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

/// The signals the gate handles: the forwarded ones and SIGCHLD.
pub fn handled() -> libc::sigset_t {
    let mut all = FORWARDED.to_vec();
    all.push(libc::SIGCHLD);
    set_of(&all)
}

/// Blocks the handled signals in this thread (and the threads it starts later).
pub fn block() -> io::Result<()> {
    let set = handled();
    // SAFETY: plain call with valid sets.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// The blocked signals, read one at a time.
pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    pub fn new() -> io::Result<Signals> {
        let set = handled();
        // SAFETY: creates a new descriptor we own.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor.
        Ok(Signals {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The next signal (blocking).
    pub fn next(&self) -> io::Result<libc::c_int> {
        loop {
            // SAFETY: plain data the kernel fills.
            let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads at most `size` bytes into `info`.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut info as *mut libc::signalfd_siginfo).cast(),
                    size,
                )
            };
            if n == size as isize {
                return Ok(info.ssi_signo as libc::c_int);
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
    }
}

/// Reaps every child that has ended; returns the status of `main` if it was one of them.
pub fn reap(main: libc::pid_t) -> Option<libc::c_int> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: plain call.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == main {
            found = Some(status);
        }
    }
}

/// The exit code a shell would report for a wait status.
pub fn exit_code(status: libc::c_int) -> u8 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) as u8
    } else if libc::WIFSIGNALED(status) {
        128u8.saturating_add(libc::WTERMSIG(status) as u8)
    } else {
        1
    }
}

/// Forwards signals to `main` and reaps until `main` ends; returns its wait status.
pub fn wait_for(main: libc::pid_t, signals: &Signals) -> io::Result<libc::c_int> {
    loop {
        let sig = signals.next()?;
        if sig == libc::SIGCHLD {
            if let Some(status) = reap(main) {
                return Ok(status);
            }
        } else {
            // SAFETY: plain call; the plugin may have gone, which is fine.
            unsafe { libc::kill(main, sig) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_a_shells() {
        assert_eq!(exit_code(3 << 8), 3);
        assert_eq!(exit_code(libc::SIGKILL), 137);
        assert_eq!(exit_code(libc::SIGTERM), 143);
    }
}
