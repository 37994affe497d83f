//! Starting the plugin confined. The gate forks while single-threaded; the child:
//!
//! 1. sets itself dumpable (so the supervisor, same uid, may read its memory);
//! 2. enforces the Landlock ruleset (which sets `no_new_privs`);
//! 3. installs the seccomp filter with `NEW_LISTENER | WAIT_KILLABLE_RECV` (a signal cannot
//!    cut short a call the supervisor is performing);
//! 4. sends the listener to the parent over a socketpair (`SCM_RIGHTS`) and closes its copy:
//!    the plugin never holds it;
//! 5. waits for the parent's go-ahead, unblocks signals, restores SIGPIPE, closes every
//!    descriptor above 2, and runs the plugin (`execve`, itself trapped and audited).
//!
//! Any failure before the exec is sent back as text and the plugin never runs.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use landlock::{RulesetCreated, RulesetStatus};

use crate::notify::Listener;

const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;

/// Everything the child needs, prepared before the fork.
pub struct Launch {
    /// The file to run (PATH already searched).
    pub program: CString,
    pub argv: Vec<CString>,
    pub env: Vec<CString>,
    pub filter: Vec<libc::sock_filter>,
    pub ruleset: RulesetCreated,
}

/// Why the plugin could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("{what}: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("confining the plugin: {0}")]
    Child(String),
}

fn os(what: &'static str) -> SpawnError {
    SpawnError::Os {
        what,
        source: io::Error::last_os_error(),
    }
}

/// Forks and starts the plugin confined; returns its pid and the listener. Call only while
/// the process has a single thread.
pub fn spawn(launch: Launch) -> Result<(libc::pid_t, Listener), SpawnError> {
    let mut fds = [0; 2];
    // SAFETY: creates two descriptors we own.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } < 0
    {
        return Err(os("socketpair for the listener"));
    }
    // SAFETY: fresh descriptors.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut argv: Vec<*const libc::c_char> = launch.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut env: Vec<*const libc::c_char> = launch.env.iter().map(|a| a.as_ptr()).collect();
    env.push(std::ptr::null());

    // SAFETY: the caller guarantees a single thread, so the child may run Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os("fork"));
    }
    if pid == 0 {
        drop(ours);
        child(theirs, launch, &argv, &env);
    }
    drop(theirs);
    drop(launch);
    match recv_listener(ours.as_raw_fd()) {
        Ok(listener) => {
            // Go ahead.
            // SAFETY: writes one byte.
            unsafe { libc::write(ours.as_raw_fd(), b"g".as_ptr().cast(), 1) };
            Ok((pid, Listener::new(listener)))
        }
        Err(e) => {
            let mut status = 0;
            // SAFETY: reaps the child, which exits after reporting.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            Err(e)
        }
    }
}

/// Receives `F` + the listener, or `E` + an error text.
fn recv_listener(sock: RawFd) -> Result<OwnedFd, SpawnError> {
    let mut buf = [0u8; 1024];
    let mut cmsg = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; the pointers stay valid during recvmsg.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cmsg);
    let n = loop {
        // SAFETY: see above.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break n;
        }
    };
    if n <= 0 {
        return Err(SpawnError::Child(
            "the child ended before sending the seccomp listener".into(),
        ));
    }
    if buf[0] == b'E' {
        return Err(SpawnError::Child(
            String::from_utf8_lossy(&buf[1..n as usize]).into_owned(),
        ));
    }
    // SAFETY: walks the control messages recvmsg filled in.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if !c.is_null() && (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS
        {
            let fd = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<RawFd>());
            return Ok(OwnedFd::from_raw_fd(fd));
        }
    }
    Err(SpawnError::Child(
        "no listener descriptor in the child's message".into(),
    ))
}

fn send_fd(sock: RawFd, fd: RawFd) -> bool {
    let mut byte = *b"F";
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut cmsg = [0u64; 4];
    // SAFETY: plain data; the pointers stay valid during sendmsg.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<RawFd>(), fd);
        libc::sendmsg(sock, &msg, 0) == 1
    }
}

fn report(sock: RawFd, text: &str) -> ! {
    let mut msg = b"E".to_vec();
    msg.extend_from_slice(text.as_bytes());
    // SAFETY: writes our buffer, then ends the child without running destructors.
    unsafe {
        libc::write(sock, msg.as_ptr().cast(), msg.len());
        libc::_exit(125)
    }
}

fn write_stderr(parts: &[&[u8]]) {
    for p in parts {
        // SAFETY: writes our buffer to fd 2.
        unsafe { libc::write(2, p.as_ptr().cast(), p.len()) };
    }
}

/// The child: confine, hand over the listener, wait, run the plugin.
fn child(
    sock: OwnedFd,
    launch: Launch,
    argv: &[*const libc::c_char],
    env: &[*const libc::c_char],
) -> ! {
    let s = sock.as_raw_fd();
    // SAFETY: plain prctl calls.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0);
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            report(s, "setting no_new_privs failed");
        }
    }
    match launch.ruleset.restrict_self() {
        Ok(st) if st.ruleset != RulesetStatus::NotEnforced => {}
        Ok(_) => report(s, "Landlock did not enforce the ruleset on this kernel"),
        Err(e) => report(s, &format!("enforcing the Landlock ruleset: {e}")),
    }
    let prog = libc::sock_fprog {
        len: launch.filter.len() as u16,
        filter: launch.filter.as_ptr() as *mut libc::sock_filter,
    };
    let flags =
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    // SAFETY: the kernel reads `prog`, which outlives the call.
    let listener =
        unsafe { libc::syscall(libc::SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog) };
    if listener < 0 {
        let e = io::Error::last_os_error();
        report(
            s,
            &format!(
                "installing the seccomp filter: {e} (user notification with WAIT_KILLABLE_RECV needs Linux 5.19; EBUSY: a listener exists already on this filter chain)"
            ),
        );
    }
    let listener = listener as RawFd;
    if !send_fd(s, listener) {
        // SAFETY: ends the child.
        unsafe { libc::_exit(125) };
    }
    let mut go = [0u8; 1];
    // SAFETY: plain calls; then the exec.
    unsafe {
        libc::close(listener);
        if libc::read(s, go.as_mut_ptr().cast(), 1) != 1 {
            libc::_exit(125);
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32);
        libc::execve(launch.program.as_ptr(), argv.as_ptr(), env.as_ptr());
    }
    let e = io::Error::last_os_error();
    let code = if e.raw_os_error() == Some(libc::ENOENT) {
        127
    } else {
        126
    };
    write_stderr(&[
        b"loop-plugins gate: running ",
        launch.program.as_bytes(),
        b": ",
        e.to_string().as_bytes(),
        b"\n",
    ]);
    // SAFETY: ends the child.
    unsafe { libc::_exit(code) }
}

/// `name` as a C string (no NUL inside).
pub fn c(bytes: &[u8]) -> Option<CString> {
    CString::new(bytes).ok()
}
