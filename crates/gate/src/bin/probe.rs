//! `gate-probe OP ARGS...`: test support, never shipped. Makes the system calls a test names,
//! straight through libc (or `syscall()` for the raw ones), and prints what the kernel
//! answered, one line per call: `ok` or `err <errno>`. Loops (`race-*`, `bench-*`) print a
//! summary line instead.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL in an argument")
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn report(r: i64) -> i32 {
    if r < 0 {
        let e = errno();
        println!("err {e}");
        e
    } else {
        println!("ok");
        0
    }
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or_else(|| {
        eprintln!("gate-probe: missing argument {i}");
        std::process::exit(2)
    })
}

/// A path buffer that another thread flips between two paths while this one calls. Paths of
/// the same length flip cleanly (every state is one path or the other, byte for byte), so
/// the race is won as often as the timing allows.
struct Flipper {
    buf: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const BUF: usize = 512;

impl Flipper {
    fn new(a: &str, b: &str) -> Flipper {
        let mut buf = vec![0u8; BUF];
        buf[..a.len()].copy_from_slice(a.as_bytes());
        let buf = Arc::new(buf);
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b) = (a.as_bytes().to_vec(), b.as_bytes().to_vec());
        let (bufc, stopc) = (Arc::clone(&buf), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let p = bufc.as_ptr() as *mut u8;
            let mut flip = false;
            while !stopc.load(Ordering::Relaxed) {
                let src = if flip { &a } else { &b };
                // SAFETY: deliberately racy writes into a buffer the other thread passes
                // to the kernel: that is the attack under test.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len());
                    *p.add(src.len()) = 0;
                }
                flip = !flip;
            }
        });
        Flipper {
            buf,
            stop,
            thread: Some(thread),
        }
    }

    fn ptr(&self) -> *const libc::c_char {
        self.buf.as_ptr().cast()
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(args: &[String]) -> i32 {
    let op = arg(args, 0);
    let p = |i| c(arg(args, i));
    // SAFETY (for every block below): plain libc calls with our own strings and buffers.
    unsafe {
        match op {
            "read" => {
                let fd = libc::open(p(1).as_ptr(), libc::O_RDONLY);
                if fd >= 0 {
                    let mut b = [0u8; 16];
                    libc::read(fd, b.as_mut_ptr().cast(), 16);
                    libc::close(fd);
                }
                report(fd as i64)
            }
            "list" => {
                let d = libc::opendir(p(1).as_ptr());
                if !d.is_null() {
                    libc::closedir(d);
                }
                report(if d.is_null() { -1 } else { 0 })
            }
            "write" | "append" => {
                let flags = libc::O_WRONLY
                    | libc::O_CREAT
                    | if op == "write" {
                        libc::O_TRUNC
                    } else {
                        libc::O_APPEND
                    }
                    | libc::O_CLOEXEC;
                let fd = libc::open(p(1).as_ptr(), flags, 0o644);
                if fd >= 0 {
                    let n = libc::write(fd, b"x".as_ptr().cast(), 1);
                    libc::close(fd);
                    if n != 1 {
                        return report(-1);
                    }
                }
                report(fd as i64)
            }
            "rdonly-trunc" => {
                // Linux truncates on O_TRUNC even when opening read-only.
                let fd = libc::open(
                    p(1).as_ptr(),
                    libc::O_RDONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                );
                if fd >= 0 {
                    libc::close(fd);
                }
                report(fd as i64)
            }
            "mkdir" => report(libc::mkdir(p(1).as_ptr(), 0o755) as i64),
            "rmdir" => report(libc::rmdir(p(1).as_ptr()) as i64),
            "unlink" => report(libc::unlink(p(1).as_ptr()) as i64),
            "rename" => report(libc::rename(p(1).as_ptr(), p(2).as_ptr()) as i64),
            "link" => report(libc::link(p(1).as_ptr(), p(2).as_ptr()) as i64),
            "symlink" => report(libc::symlink(p(1).as_ptr(), p(2).as_ptr()) as i64),
            "chmod" => {
                let mode = u32::from_str_radix(arg(args, 2), 8).unwrap_or(0o600);
                report(libc::chmod(p(1).as_ptr(), mode) as i64)
            }
            "fchmod" => {
                let fd = libc::open(p(1).as_ptr(), libc::O_RDONLY);
                let mode = u32::from_str_radix(arg(args, 2), 8).unwrap_or(0o600);
                report(libc::fchmod(fd, mode) as i64)
            }
            "chown" => report(libc::chown(p(1).as_ptr(), libc::getuid(), libc::getgid()) as i64),
            "truncate" => report(libc::truncate(p(1).as_ptr(), 0) as i64),
            "utime" => {
                report(libc::utimensat(libc::AT_FDCWD, p(1).as_ptr(), std::ptr::null(), 0) as i64)
            }
            "setxattr" => report(libc::setxattr(
                p(1).as_ptr(),
                c"user.gate".as_ptr(),
                b"1".as_ptr().cast(),
                1,
                0,
            ) as i64),
            // Raw calls, straight to the kernel (no C library fallback).
            "raw-open" => report(libc::syscall(
                libc::SYS_open,
                p(1).as_ptr(),
                libc::O_WRONLY | libc::O_CREAT,
                0o644,
            )),
            "raw-creat" => report(libc::syscall(libc::SYS_creat, p(1).as_ptr(), 0o644)),
            "raw-unlink" => report(libc::syscall(libc::SYS_unlink, p(1).as_ptr())),
            "raw-rename" => report(libc::syscall(
                libc::SYS_rename,
                p(1).as_ptr(),
                p(2).as_ptr(),
            )),
            "raw-mkdir" => report(libc::syscall(libc::SYS_mkdir, p(1).as_ptr(), 0o755)),
            "raw-link" => report(libc::syscall(libc::SYS_link, p(1).as_ptr(), p(2).as_ptr())),
            "openat2" => {
                let how = [libc::O_RDONLY as u64, 0u64, 0u64];
                report(libc::syscall(
                    437,
                    libc::AT_FDCWD,
                    p(1).as_ptr(),
                    how.as_ptr(),
                    24usize,
                ))
            }
            "io-uring" => {
                let mut params = [0u8; 120];
                report(libc::syscall(425, 4u32, params.as_mut_ptr()))
            }
            "int80" => {
                // getpid through the i386 entry: another architecture to the filter.
                let r: i64;
                std::arch::asm!("int 0x80", inlateout("rax") 20i64 => r, options(nostack));
                report(r)
            }
            "x32" => report(libc::syscall(0x4000_0000 | libc::SYS_getpid)),
            "ptrace" => report(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0)),
            "unshare-user" => report(libc::unshare(libc::CLONE_NEWUSER) as i64),
            "connect-unix" | "connect-abstract" => {
                let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if s < 0 {
                    return report(-1);
                }
                let mut addr: libc::sockaddr_un = std::mem::zeroed();
                addr.sun_family = libc::AF_UNIX as u16;
                let name = arg(args, 1).as_bytes();
                let off = if op == "connect-abstract" { 1 } else { 0 };
                for (i, b) in name.iter().enumerate() {
                    addr.sun_path[i + off] = *b as libc::c_char;
                }
                // Family, then the name: a path with its NUL, or a NUL and the abstract name.
                let len = std::mem::size_of::<libc::sa_family_t>() + name.len() + 1;
                report(
                    libc::connect(s, (&addr as *const libc::sockaddr_un).cast(), len as u32) as i64,
                )
            }
            "socketpair" => {
                let kind = if arg(args, 1) == "dgram" {
                    libc::SOCK_DGRAM
                } else {
                    libc::SOCK_STREAM
                };
                let mut fds = [0; 2];
                report(libc::socketpair(libc::AF_UNIX, kind, 0, fds.as_mut_ptr()) as i64)
            }
            "tcp-socket" => report(libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) as i64),
            "exec" => {
                let prog = p(1);
                let argv: Vec<CString> = args[1..].iter().map(|a| c(a)).collect();
                let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
                ptrs.push(std::ptr::null());
                libc::execv(prog.as_ptr(), ptrs.as_ptr());
                report(-1)
            }
            "memfd-exec" => {
                let fd = libc::memfd_create(c"payload".as_ptr(), 0);
                let bytes = std::fs::read(arg(args, 1)).expect("reading the payload");
                libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                let argv = [c"payload".as_ptr(), std::ptr::null()];
                let envp = [std::ptr::null::<libc::c_char>()];
                libc::fexecve(fd, argv.as_ptr(), envp.as_ptr());
                report(-1)
            }
            "race-memfd-exec" => {
                // A memfd holding this probe, run through /proc/self/fd while a thread flips
                // the path to it from an allowed program: if it ever runs, a marker appears.
                let fd = libc::memfd_create(c"payload".as_ptr(), 0);
                let me = std::fs::read("/proc/self/exe").expect("reading this probe");
                libc::write(fd, me.as_ptr().cast(), me.len());
                let mut st: libc::stat = std::mem::zeroed();
                libc::fstat(fd, &mut st);
                println!("mode {:o}", st.st_mode & 0o7777);
                let target = format!("/proc/self/fd/{fd}");
                let n: usize = arg(args, 2).parse().unwrap_or(100);
                let marker = c(arg(args, 1));
                for _ in 0..n {
                    let pid = libc::fork();
                    if pid == 0 {
                        let flip = Flipper::new("/bin/true", &target);
                        let argv = [
                            c"probe".as_ptr(),
                            c"marker".as_ptr(),
                            marker.as_ptr(),
                            std::ptr::null(),
                        ];
                        for _ in 0..50 {
                            libc::execv(flip.ptr(), argv.as_ptr());
                        }
                        libc::_exit(0);
                    }
                    let mut st = 0;
                    libc::waitpid(pid, &mut st, 0);
                }
                println!("done {n}");
                0
            }
            "marker" => {
                // Run only if an exec that must fail got through: leaves evidence.
                std::fs::write(arg(args, 1), b"ran").ok();
                0
            }
            // `wait-then OP ARGS...`: says ready, waits for a line on stdin, then does OP.
            "wait-then" => {
                println!("ready");
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                run(&args[1..])
            }
            "race-unlink" | "race-create" | "race-chmod" => {
                let n: usize = arg(args, 3).parse().unwrap_or(1000);
                let flip = Flipper::new(arg(args, 1), arg(args, 2));
                let mut ok = 0;
                for _ in 0..n {
                    let r = match op {
                        "race-unlink" => libc::unlink(flip.ptr()),
                        "race-chmod" => libc::chmod(flip.ptr(), 0o600),
                        _ => {
                            let fd = libc::open(
                                flip.ptr(),
                                libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC,
                                0o644,
                            );
                            if fd >= 0 {
                                libc::close(fd);
                            }
                            fd
                        }
                    };
                    if r >= 0 {
                        ok += 1;
                    }
                }
                println!("done {n} ok {ok}");
                0
            }
            "race-exec" => {
                // Each round: a child flips the path between an allowed program and a
                // denied one while it execs; the denied one, if it ever ran, leaves a marker.
                let n: usize = arg(args, 4).parse().unwrap_or(100);
                let marker = c(arg(args, 3));
                for _ in 0..n {
                    let pid = libc::fork();
                    if pid == 0 {
                        let flip = Flipper::new(arg(args, 1), arg(args, 2));
                        let argv = [
                            c"probe".as_ptr(),
                            c"marker".as_ptr(),
                            marker.as_ptr(),
                            std::ptr::null(),
                        ];
                        for _ in 0..50 {
                            libc::execv(flip.ptr(), argv.as_ptr());
                        }
                        libc::_exit(0);
                    }
                    let mut st = 0;
                    libc::waitpid(pid, &mut st, 0);
                }
                println!("done {n}");
                0
            }
            "bench-io" => {
                // open/fstat/read/close and stat over files that exist, n times.
                let dir = arg(args, 1);
                let n: usize = arg(args, 2).parse().unwrap_or(10_000);
                let files: Vec<CString> = std::fs::read_dir(dir)
                    .expect("bench dir")
                    .flatten()
                    .map(|e| CString::new(e.path().as_os_str().as_bytes()).unwrap())
                    .collect();
                let t = Instant::now();
                let mut buf = [0u8; 4096];
                for i in 0..n {
                    let f = &files[i % files.len()];
                    let fd = libc::open(f.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                    let mut st: libc::stat = std::mem::zeroed();
                    libc::fstat(fd, &mut st);
                    libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    libc::close(fd);
                    libc::stat(f.as_ptr(), &mut st);
                }
                println!("ns {}", t.elapsed().as_nanos());
                0
            }
            "bench-write" => {
                // create/write/close/unlink in a dir, n times.
                let dir = arg(args, 1);
                let n: usize = arg(args, 2).parse().unwrap_or(2_000);
                let path = c(&format!("{dir}/bench-file"));
                let t = Instant::now();
                for _ in 0..n {
                    let fd = libc::open(
                        path.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC,
                        0o644,
                    );
                    libc::write(fd, b"0123456789".as_ptr().cast(), 10);
                    libc::close(fd);
                    libc::unlink(path.as_ptr());
                }
                println!("ns {}", t.elapsed().as_nanos());
                0
            }
            "bench-exec" => {
                let n: usize = arg(args, 1).parse().unwrap_or(200);
                let t = Instant::now();
                for _ in 0..n {
                    let st = std::process::Command::new("/bin/true")
                        .status()
                        .expect("true");
                    assert!(st.success());
                }
                println!("ns {}", t.elapsed().as_nanos());
                0
            }
            other => {
                eprintln!("gate-probe: unknown op {other}");
                2
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(run(&args));
}
