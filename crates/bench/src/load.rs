//! HTTP load: keep-alive HTTP/1.1 connections on loopback, each sending its next request when
//! the last answer is in, for a time or a count; latencies and percentiles. Plus a reqwest
//! client for single calls.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A client for single calls (plain HTTP on loopback; no proxy).
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    static PROVIDER: OnceLock<()> = OnceLock::new();
    PROVIDER.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
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
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Warms up for a second, then measures how many requests per second `connections` keep-alive
/// connections get answered, on a loader thread of its own pinned to `cpu` (when given).
pub fn rate(
    server_pid: u32,
    addr: SocketAddr,
    request: Vec<u8>,
    connections: usize,
    seconds: u64,
    cpu: Option<usize>,
    check: fn(&[u8]) -> bool,
) -> anyhow::Result<Rate> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || -> anyhow::Result<Rate> {
                if let Some(cpu) = cpu {
                    super::procstat::pin(0, &[cpu])?;
                }
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
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
                        u64::MAX,
                        check,
                    )
                    .await?;
                    let wall = started.elapsed().as_secs_f64();
                    let cpu = super::procstat::cpu_seconds(server_pid)? - cpu_before;
                    Ok(Rate {
                        requests: latencies.len(),
                        per_second: latencies.len() as f64 / wall,
                        server_cpu: cpu / wall,
                        p50_ms: percentile_ms(&latencies, 50.0),
                        p99_ms: percentile_ms(&latencies, 99.0),
                    })
                })
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the loader thread panicked"))?
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

    #[test]
    fn percentiles_pick_by_rank() {
        let samples: Vec<u32> = (1..=100).map(|n| n * 1000).collect();
        assert_eq!(percentile_ms(&samples, 50.0), 51.0);
        assert_eq!(percentile_ms(&samples, 99.0), 99.0);
        assert!(percentile_ms(&[], 50.0).is_nan());
    }
}
