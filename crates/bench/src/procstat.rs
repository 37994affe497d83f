//! What /proc says about a process (its resident memory, its high-water mark, its CPU time,
//! which process listens on an address), and pinning a process's threads to CPUs.

use anyhow::{Context, bail, ensure};

/// A field of /proc/<pid>/status in kB (VmRSS, VmHWM).
pub fn status_kb(pid: u32, field: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("/proc/{pid}/status has no {field}"))
}

/// Resident memory now, in MiB.
pub fn rss_mib(pid: u32) -> anyhow::Result<f64> {
    Ok(status_kb(pid, "VmRSS")? as f64 / 1024.0)
}

/// The highest resident memory so far, in MiB.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    Ok(status_kb(pid, "VmHWM")? as f64 / 1024.0)
}

/// Resident memory now, in MiB, split into anonymous memory (the heap, stacks: what the process
/// allocated) and file-backed pages (its binary's and libraries' code and data, shared with the
/// page cache).
pub fn rss_parts_mib(pid: u32) -> anyhow::Result<(f64, f64)> {
    Ok((
        status_kb(pid, "RssAnon")? as f64 / 1024.0,
        status_kb(pid, "RssFile")? as f64 / 1024.0,
    ))
}

/// The process's user and system CPU time so far, in seconds (every thread).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').context("/proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3; utime 14 and stime 15 (1-based, whole line).
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    Ok((utime + stime) / clock_ticks())
}

/// CPU seconds a set of processes spend between [`CpuMeter::start`] and [`CpuMeter::spent`]:
/// where a phase's CPU went (the controller, the API server, etcd), to say what limits it on a
/// machine whose cores they share.
pub struct CpuMeter {
    started: Vec<(String, u32, f64)>,
}

impl CpuMeter {
    pub fn start<'a>(processes: impl IntoIterator<Item = (&'a str, u32)>) -> Self {
        let started = processes
            .into_iter()
            .map(|(name, pid)| (name.to_string(), pid, cpu_seconds(pid).unwrap_or(0.0)))
            .collect();
        Self { started }
    }

    /// Each process's CPU seconds since the start, by name.
    pub fn spent(&self) -> Vec<(String, f64)> {
        self.started
            .iter()
            .map(|(name, pid, before)| {
                let spent = cpu_seconds(*pid).map(|now| now - before).unwrap_or(0.0);
                (name.clone(), spent)
            })
            .collect()
    }
}

/// `name:seconds` for each of `spent`, comma-separated, and their sum.
pub fn line(spent: &[(String, f64)]) -> (String, f64) {
    let parts: Vec<String> = spent
        .iter()
        .map(|(name, seconds)| format!("{name}:{seconds:.1}"))
        .collect();
    (parts.join(","), spent.iter().map(|(_, s)| s).sum())
}

/// The seconds of the process named `name` in `spent` (0 when it is not there).
pub fn of(spent: &[(String, f64)], name: &str) -> f64 {
    spent
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0.0, |(_, s)| *s)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// The CPUs this process may run on.
pub fn online_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pins every thread of `pid` (or the calling thread, for 0) to `cpus`.
pub fn pin(pid: u32, cpus: &[usize]) -> anyhow::Result<()> {
    let tids: Vec<libc::pid_t> = if pid == 0 {
        vec![0]
    } else {
        std::fs::read_dir(format!("/proc/{pid}/task"))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect()
    };
    for tid in tids {
        // SAFETY: a zeroed cpu_set_t is valid; we pass its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                bail!(
                    "pinning thread {tid} to {cpus:?}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
    Ok(())
}

/// The process listening on TCP `addr` (IPv4, or a wildcard listener on its port): a plugin
/// the kubelet stand-in started, found by the address its Pod reports.
pub fn listener_pid(addr: std::net::SocketAddr) -> anyhow::Result<u32> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| listening_inodes(&text, addr))
        .collect();
    ensure!(!inodes.is_empty(), "nothing listens on {addr}");
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path())
                && wanted.iter().any(|w| link.as_os_str() == w.as_str())
            {
                return Ok(pid);
            }
        }
    }
    bail!("no process holds the socket listening on {addr}")
}

/// The inodes of the sockets in a /proc/net/tcp{,6} table that listen on `addr`'s port, at
/// its IPv4 address or any address.
fn listening_inodes(table: &str, addr: std::net::SocketAddr) -> Vec<String> {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) => format!("{:08X}", u32::from_le_bytes(v4.octets())),
        std::net::IpAddr::V6(_) => String::new(),
    };
    let port = format!("{:04X}", addr.port());
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local_ip, local_port) = fields.get(1)?.split_once(':')?;
            let any = local_ip.chars().all(|c| c == '0');
            (local_port == port && fields.get(3)? == &"0A" && (local_ip == ip || any))
                .then(|| fields.get(9).map(|s| s.to_string()))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_is_found_by_its_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(listener_pid(addr).unwrap(), std::process::id());
        drop(listener);
        assert!(listener_pid(addr).is_err());
    }

    #[test]
    fn this_process_has_a_resident_size_and_cpu_time() {
        let me = std::process::id();
        assert!(rss_mib(me).unwrap() > 0.0);
        // The resident size first: the peak read after it can only be as high or higher
        // (read the other way round, other tests' allocations in between made it fail).
        let now = rss_mib(me).unwrap();
        assert!(peak_rss_mib(me).unwrap() >= now);
        assert!(cpu_seconds(me).unwrap() >= 0.0);
    }
}
