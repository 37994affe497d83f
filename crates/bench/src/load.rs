//! HTTP load: keep-alive HTTP/1.1 connections on loopback, each sending its next request when
//! the last answer is in, for a time or a count (closed loop: [`drive`], [`rate`]); or requests
//! sent on a fixed schedule whatever the answers, each timed from when it was due (open loop:
//! [`open_loop`], so a server that falls behind shows it in its latencies instead of slowing
//! the loader down); latencies and percentiles. Plus a reqwest client for single calls.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A client for single calls (plain HTTP on loopback; no proxy).
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(120))
        .build()?)
}

/// A request's bytes: method, path, optional bearer token and JSON body.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    if let Some(token) = bearer {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || method != "GET" {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// A keep-alive HTTP/1.1 connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(8192),
        })
    }

    /// Sends `request` and reads its answer: the status and the body.
    pub async fn exchange(&mut self, request: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        self.stream.write_all(request).await?;
        loop {
            if let Some((status, consumed, body)) = parse_answer(&self.buf)? {
                self.buf.drain(..consumed);
                return Ok((status, body));
            }
            let mut chunk = [0u8; 16384];
            let n = self.stream.read(&mut chunk).await?;
            ensure!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// A whole answer at the start of `buf`: its status, how many bytes it took and its body;
/// None while it is not all in. Content-Length and chunked bodies.
pub fn parse_answer(buf: &[u8]) -> anyhow::Result<Option<(u16, usize, Vec<u8>)>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end])?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .context("a status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let start = end + 4;
    if let Some(length) = header("content-length") {
        let length: usize = length.parse()?;
        if buf.len() < start + length {
            return Ok(None);
        }
        return Ok(Some((
            status,
            start + length,
            buf[start..start + length].to_vec(),
        )));
    }
    if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut at = start;
        let mut body = Vec::new();
        loop {
            let Some(line_end) = buf[at..].windows(2).position(|w| w == b"\r\n") else {
                return Ok(None);
            };
            let size_text = std::str::from_utf8(&buf[at..at + line_end])?;
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
            at += line_end + 2;
            if buf.len() < at + size + 2 {
                return Ok(None);
            }
            if size == 0 {
                return Ok(Some((status, at + 2, body)));
            }
            body.extend_from_slice(&buf[at..at + size]);
            at += size + 2;
        }
    }
    if status == 204 || status == 304 {
        return Ok(Some((status, start, Vec::new())));
    }
    bail!("an answer without Content-Length or chunked encoding: {head}")
}

/// Latencies of answered requests, in microseconds.
pub type Latencies = Vec<u32>;

/// The `p`-th percentile (0..=100) of `latencies`, in milliseconds.
pub fn percentile_ms(latencies: &[u32], p: f64) -> f64 {
    if latencies.is_empty() {
        return f64::NAN;
    }
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Runs `connections` connections, each sending `request` again as soon as its answer is in,
/// until `time` passes or `max` answers came; every answer must be 200 and pass `check`.
pub async fn drive(
    addr: SocketAddr,
    request: &[u8],
    connections: usize,
    time: Duration,
    max: u64,
    check: fn(&[u8]) -> bool,
) -> anyhow::Result<Latencies> {
    let deadline = Instant::now() + time;
    let per_connection = max.div_ceil(connections as u64);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let request = request.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline && (latencies.len() as u64) < per_connection {
                let sent = Instant::now();
                let (status, body) = conn.exchange(&request).await?;
                if status != 200 || !check(&body) {
                    bail!("answered {status}: {}", String::from_utf8_lossy(&body));
                }
                latencies.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    Ok(all)
}

/// What one requests-per-second measurement saw.
#[derive(Clone, Debug)]
pub struct Rate {
    pub requests: usize,
    pub per_second: f64,
    /// The server's CPU time over the wall time: 1.0 is one core fully busy.
    pub server_cpu: f64,
    /// The server's CPU time over the measurement, in seconds (from /proc: clock ticks).
    pub server_cpu_seconds: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl Rate {
    /// The server's CPU time per answered request, in microseconds.
    pub fn cpu_us_per_request(&self) -> f64 {
        self.server_cpu_seconds / self.requests.max(1) as f64 * 1e6
    }

    /// Requests per second of the server's CPU time: what one core fully busy would answer.
    pub fn per_cpu_second(&self) -> f64 {
        self.per_second / self.server_cpu.max(0.01)
    }
}

/// Warms up for a second, then measures how many requests per second `connections` keep-alive
/// connections get answered, for `seconds` or `max` answers, whichever comes first, on a
/// loader thread of its own pinned to `cpu` (when given).
#[allow(clippy::too_many_arguments)]
pub fn rate(
    server_pid: u32,
    addr: SocketAddr,
    request: Vec<u8>,
    connections: usize,
    seconds: u64,
    max: u64,
    cpu: Option<usize>,
    check: fn(&[u8]) -> bool,
) -> anyhow::Result<Rate> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || -> anyhow::Result<Rate> {
                loader_runtime(cpu)?.block_on(async move {
                    drive(
                        addr,
                        &request,
                        connections,
                        Duration::from_secs(1),
                        u64::MAX,
                        check,
                    )
                    .await?;
                    let cpu_before = super::procstat::cpu_seconds(server_pid)?;
                    let started = Instant::now();
                    let latencies = drive(
                        addr,
                        &request,
                        connections,
                        Duration::from_secs(seconds),
                        max,
                        check,
                    )
                    .await?;
                    let wall = started.elapsed().as_secs_f64();
                    let cpu = super::procstat::cpu_seconds(server_pid)? - cpu_before;
                    Ok(Rate {
                        requests: latencies.len(),
                        per_second: latencies.len() as f64 / wall,
                        server_cpu: cpu / wall,
                        server_cpu_seconds: cpu,
                        p50_ms: percentile_ms(&latencies, 50.0),
                        p99_ms: percentile_ms(&latencies, 99.0),
                    })
                })
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the loader thread panicked"))?
    })
}

/// A loader thread's runtime: one thread (this one), pinned to `cpu` when given.
fn loader_runtime(cpu: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    if let Some(cpu) = cpu {
        super::procstat::pin(0, &[cpu])?;
    }
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// What an open-loop run saw.
#[derive(Clone, Debug)]
pub struct OpenLoop {
    /// Each measured request's latency from when it was due (the warm-up's are left out).
    pub latencies: Latencies,
    /// Requests sent, the warm-up's included.
    pub sent: usize,
    /// The server's CPU time per request over the whole run, in microseconds.
    pub server_cpu_us_per_request: f64,
}

/// The schedule of an open-loop run.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    pub per_second: f64,
    /// Sent and timed, after the warm-up.
    pub seconds: f64,
    /// Sent first at the same rate, their latencies left out.
    pub warmup_seconds: f64,
    /// Keep-alive connections opened beforehand; a request due while all are busy waits for
    /// one, and that wait counts in its latency.
    pub connections: usize,
}

/// Sends `request` at a fixed rate whatever the answers (open loop), each timed from the moment
/// it was due, not from when a connection was free to send it: a server that falls behind
/// shows it in these latencies, where a closed loop would slow down with it and hide it. A
/// clock thread releases each request at its time (timer slack 1 ns: nanosleep, not the
/// async runtime's millisecond timer); the loader's connections take them in turn. Both run
/// pinned to `cpu` when given.
pub fn open_loop(
    server_pid: u32,
    addr: SocketAddr,
    request: Vec<u8>,
    schedule: Schedule,
    cpu: Option<usize>,
    check: fn(&[u8]) -> bool,
) -> anyhow::Result<OpenLoop> {
    ensure!(schedule.per_second > 0.0, "an open loop needs a rate");
    let warmup = (schedule.per_second * schedule.warmup_seconds) as usize;
    let total = warmup + (schedule.per_second * schedule.seconds).max(1.0) as usize;
    let interval = Duration::from_secs_f64(1.0 / schedule.per_second);
    let (due_tx, due_rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let clock = scope.spawn(move || -> anyhow::Result<()> {
            if let Some(cpu) = cpu {
                super::procstat::pin(0, &[cpu])?;
            }
            // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
            // The connections are open before the first request is due.
            if ready_rx.recv().is_err() {
                return Ok(());
            }
            let start = Instant::now() + Duration::from_millis(5);
            for i in 0..total {
                let due = start + interval.mul_f64(i as f64);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if due_tx.send((i, due)).is_err() {
                    break;
                }
            }
            Ok(())
        });
        let loader = scope.spawn(move || -> anyhow::Result<OpenLoop> {
            loader_runtime(cpu)?.block_on(async move {
                let due_rx = std::sync::Arc::new(tokio::sync::Mutex::new(due_rx));
                let mut conns = Vec::with_capacity(schedule.connections);
                for _ in 0..schedule.connections.max(1) {
                    conns.push(Conn::connect(addr).await?);
                }
                let cpu_before = super::procstat::cpu_seconds(server_pid)?;
                let _ = ready_tx.send(());
                let mut tasks = Vec::new();
                for mut conn in conns {
                    let (request, due_rx) = (request.clone(), due_rx.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut latencies = Vec::new();
                        loop {
                            let next = due_rx.lock().await.recv().await;
                            let Some((i, due)) = next else { break };
                            let (status, body) = conn.exchange(&request).await?;
                            if status != 200 || !check(&body) {
                                bail!("answered {status}: {}", String::from_utf8_lossy(&body));
                            }
                            if i >= warmup {
                                let took = due.elapsed().as_micros();
                                latencies.push(took.min(u32::MAX as u128) as u32);
                            }
                        }
                        anyhow::Ok(latencies)
                    }));
                }
                let mut latencies = Vec::new();
                for task in tasks {
                    latencies.extend(task.await??);
                }
                let cpu = super::procstat::cpu_seconds(server_pid)? - cpu_before;
                Ok(OpenLoop {
                    latencies,
                    sent: total,
                    server_cpu_us_per_request: cpu / total as f64 * 1e6,
                })
            })
        });
        let measured = loader
            .join()
            .map_err(|_| anyhow::anyhow!("the loader thread panicked"))?;
        clock
            .join()
            .map_err(|_| anyhow::anyhow!("the clock thread panicked"))??;
        measured
    })
}

/// Any body.
pub fn any(_: &[u8]) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_with_a_length_or_in_chunks() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhiHTTP/1.1";
        let (status, used, body) = parse_answer(plain).unwrap().unwrap();
        assert_eq!(
            (status, used, body.as_slice()),
            (200, plain.len() - 8, &b"hi"[..])
        );
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhi")
                .unwrap()
                .is_none()
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n3\r\n!!!\r\n0\r\n\r\n";
        let (status, used, body) = parse_answer(chunked).unwrap().unwrap();
        assert_eq!(
            (status, used, body.as_slice()),
            (200, chunked.len(), &b"hi!!!"[..])
        );
        assert!(
            parse_answer(&chunked[..chunked.len() - 3])
                .unwrap()
                .is_none()
        );
        let empty = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(parse_answer(empty).unwrap().unwrap().0, 204);
    }

    /// A server on loopback that answers each GET after `delay`, one connection at a time
    /// per thread.
    fn slow_server(delay: Duration) -> SocketAddr {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            std::thread::sleep(delay);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if stream.write_all(answer).is_err() {
                                return;
                            }
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
        addr
    }

    /// An open loop against [`slow_server`], no warm-up unless `warmup_seconds`.
    fn open_loop_at(
        delay: Duration,
        per_second: f64,
        warmup_seconds: f64,
        connections: usize,
    ) -> OpenLoop {
        let addr = slow_server(delay);
        let schedule = Schedule {
            per_second,
            seconds: 0.5,
            warmup_seconds,
            connections,
        };
        let request = request(addr, "GET", "/", None, None);
        open_loop(std::process::id(), addr, request, schedule, None, any).unwrap()
    }

    #[test]
    fn an_open_loop_sends_on_schedule() {
        let run = open_loop_at(Duration::ZERO, 200.0, 0.1, 4);
        assert_eq!(run.sent, 120);
        assert_eq!(run.latencies.len(), 100);
        assert!(percentile_ms(&run.latencies, 50.0) < 20.0);
    }

    /// The case a closed loop hides: a server slower than the rate. Each request is timed from
    /// when it was due, so the wait for a free connection shows (a closed loop would report
    /// about the server's 20 ms for every request).
    #[test]
    fn an_open_loop_counts_the_queue_a_slow_server_builds() {
        let run = open_loop_at(Duration::from_millis(20), 100.0, 0.0, 1);
        assert_eq!(run.latencies.len(), 50);
        // The last request waited for the 49 before it: about 50 × 20 ms − 49 × 10 ms.
        assert!(percentile_ms(&run.latencies, 99.0) > 400.0);
        assert!(percentile_ms(&run.latencies, 0.0) < 40.0);
    }

    #[test]
    fn percentiles_pick_by_rank() {
        let samples: Vec<u32> = (1..=100).map(|n| n * 1000).collect();
        assert_eq!(percentile_ms(&samples, 50.0), 51.0);
        assert_eq!(percentile_ms(&samples, 99.0), 99.0);
        assert!(percentile_ms(&[], 50.0).is_nan());
    }
}
