//! Reading a trapped caller's arguments out of its memory (`process_vm_readv`: allowed
//! because the plugin runs as the gate's uid and is dumpable, and the gate is its ancestor)
//! and its state out of /proc. Each pointer argument is read exactly once: whatever a second
//! thread writes there afterwards, the supervisor decides and acts on its own copy.

use std::io;

/// Longest path the kernel takes (`PATH_MAX`, with its NUL).
pub const PATH_MAX: usize = 4096;

const PAGE: usize = 4096;

/// Reads `len` bytes at `addr` in thread `tid`'s memory; a short read is an error (EFAULT).
pub fn read_bytes(tid: i32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let local = libc::iovec {
            iov_base: buf[done..].as_mut_ptr().cast(),
            iov_len: len - done,
        };
        let remote = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: `local` points into `buf`, which outlives the call.
        let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        done += n as usize;
    }
    Ok(buf)
}

/// Reads a NUL-terminated string at `addr`, at most `max` bytes before the NUL, a page at a
/// time so a string ending just before an unmapped page reads fine. Longer: ENAMETOOLONG.
pub fn read_cstring(tid: i32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let mut out = Vec::new();
    let mut at = addr as usize;
    loop {
        let chunk = PAGE - at % PAGE;
        let bytes = read_bytes(tid, at as u64, chunk)?;
        if let Some(end) = bytes.iter().position(|b| *b == 0) {
            out.extend_from_slice(&bytes[..end]);
            if out.len() > max {
                return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
            }
            return Ok(out);
        }
        out.extend_from_slice(&bytes);
        if out.len() > max {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        at += chunk;
    }
}

/// A path argument.
pub fn read_path(tid: i32, addr: u64) -> io::Result<Vec<u8>> {
    read_cstring(tid, addr, PATH_MAX - 1)
}

/// A plain-data value at `addr`.
pub fn read_value<T: Copy>(tid: i32, addr: u64) -> io::Result<T> {
    let bytes = read_bytes(tid, addr, std::mem::size_of::<T>())?;
    // SAFETY: T is plain data (timespec, timeval, utimbuf) and `bytes` holds exactly its size.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) })
}

/// The first arguments of an `argv` array, for the audit (at most `max_args`, each cut at 256
/// bytes, about 1 KiB in all). Best effort: an unreadable array yields what was read.
pub fn read_argv(tid: i32, addr: u64, max_args: usize) -> Vec<String> {
    let mut out = Vec::new();
    if addr == 0 {
        return out;
    }
    let mut total = 0;
    for i in 0..max_args {
        let Ok(ptr) = read_value::<u64>(tid, addr + 8 * i as u64) else {
            break;
        };
        if ptr == 0 {
            break;
        }
        match read_cstring(tid, ptr, 1 << 16) {
            Ok(mut s) => {
                s.truncate(256);
                total += s.len();
                out.push(String::from_utf8_lossy(&s).into_owned());
                // Audit lines stay under a pipe's atomic write size.
                if total > 1024 {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    out
}

/// What the supervisor needs from `/proc/<tid>/status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// The process (thread group) the thread belongs to.
    pub tgid: i32,
    pub umask: u32,
    pub uid: u32,
}

/// Parses `/proc/<tid>/status`.
pub fn parse_status(text: &str) -> Option<Status> {
    let mut tgid = None;
    let mut umask = None;
    let mut uid = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Tgid:") {
            tgid = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("Umask:") {
            umask = u32::from_str_radix(v.trim(), 8).ok();
        } else if let Some(v) = line.strip_prefix("Uid:") {
            uid = v.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        }
    }
    Some(Status {
        tgid: tgid?,
        umask: umask.unwrap_or(0o022),
        uid: uid?,
    })
}

/// Thread `tid` belongs to process `tgid` now (one `stat`, far cheaper than `status`).
pub fn in_group(tgid: i32, tid: i32) -> bool {
    std::fs::symlink_metadata(format!("/proc/{tgid}/task/{tid}")).is_ok()
}

/// Reads `/proc/<tid>/status` with one `read` (the kernel builds the whole file on each
/// read, ~13 µs here, so a reader that probes in small pieces pays that several times).
pub fn status(tid: i32) -> io::Result<Status> {
    use std::io::Read;
    let mut f = std::fs::File::open(format!("/proc/{tid}/status"))?;
    let mut buf = [0u8; 4096];
    let n = f.read(&mut buf)?;
    let text = String::from_utf8_lossy(&buf[..n]);
    parse_status(&text).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse() {
        let text = "Name:\tx\nUmask:\t0027\nState:\tS\nTgid:\t41\nPid:\t42\nUid:\t1000\t1001\t1000\t1000\n";
        assert_eq!(
            parse_status(text),
            Some(Status {
                tgid: 41,
                umask: 0o027,
                uid: 1001
            })
        );
    }

    #[test]
    fn strings_are_read_across_pages_and_capped() {
        let me = unsafe { libc::gettid() };
        // A string that crosses a page boundary.
        let mut buf = vec![b'a'; 3 * PAGE];
        let start = PAGE - (buf.as_ptr() as usize % PAGE) + PAGE - 10;
        buf[start + 30] = 0;
        let s = read_cstring(me, buf.as_ptr() as u64 + start as u64, 100).unwrap();
        assert_eq!(s.len(), 30);
        let err = read_cstring(me, buf.as_ptr() as u64 + start as u64, 20).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
        assert_eq!(
            read_cstring(me, 0, 10).unwrap_err().raw_os_error(),
            Some(libc::EFAULT)
        );
        let args = [c"one".as_ptr() as u64, c"two".as_ptr() as u64, 0u64];
        assert_eq!(read_argv(me, args.as_ptr() as u64, 8), vec!["one", "two"]);
    }
}
