//! A token server for the test registry's token auth (the Docker registry token protocol):
//! `GET /token?service=..&scope=repository:<name>:<actions>` with HTTP basic credentials
//! answers `{"token": <JWT>}`, an EdDSA-signed JWT granting the asked scopes, which the
//! registry checks against the JWKS file written here. Wrong or missing credentials get 401.
//! Test tooling: a thread on 127.0.0.1, stopped on drop.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::Signer;
use serde_json::json;

use crate::signing::keys::PublisherKey;

pub const ISSUER: &str = "loop-plugins-test-issuer";
pub const SERVICE: &str = "loop-plugins-test-registry";
const KEY_ID: &str = "loop-plugins-test";

/// The token issuer: its key and the one user it knows.
#[derive(Clone)]
pub struct Issuer {
    key: Arc<PublisherKey>,
    username: String,
    password: String,
}

impl Issuer {
    pub fn new(username: &str, password: &str) -> std::io::Result<Self> {
        let key = PublisherKey::generate().map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Self {
            key: Arc::new(key),
            username: username.into(),
            password: password.into(),
        })
    }

    /// The JWKS the registry trusts.
    pub fn jwks(&self) -> String {
        let x = URL_SAFE_NO_PAD.encode(self.key.signing_key().verifying_key().as_bytes());
        json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "kid": KEY_ID, "x": x}]})
            .to_string()
    }

    /// A token granting `scopes` (`repository:<name>:<actions>`), valid for five minutes.
    pub fn mint(&self, subject: &str, scopes: &[String]) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let access: Vec<serde_json::Value> = scopes
            .iter()
            .filter_map(|scope| {
                let (kind, rest) = scope.split_once(':')?;
                let (name, actions) = rest.rsplit_once(':')?;
                Some(json!({"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}))
            })
            .collect();
        let header = json!({"alg": "EdDSA", "typ": "JWT", "kid": KEY_ID});
        let claims = json!({
            "iss": ISSUER, "sub": subject, "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
            "jti": format!("{now}-{}", scopes.len()), "access": access,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self.key.signing_key().sign(signing_input.as_bytes());
        format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.to_bytes())
        )
    }

    fn authorized(&self, header: Option<&str>) -> bool {
        let Some(encoded) = header.and_then(|h| h.strip_prefix("Basic ")) else {
            return false;
        };
        let Ok(decoded) = STANDARD.decode(encoded.trim()) else {
            return false;
        };
        decoded == format!("{}:{}", self.username, self.password).as_bytes()
    }
}

/// The token endpoint, serving until dropped.
pub struct TokenServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TokenServer {
    pub fn start(issuer: Issuer) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = answer(stream, &issuer);
                }
            }
        });
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The realm the registry sends clients to.
    pub fn realm(&self) -> String {
        format!("http://{}/token", self.addr)
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(stream: TcpStream, issuer: &Issuer) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut authorization = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(value.trim().to_string());
        }
    }
    let target = request_line.split_whitespace().nth(1).unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let scopes: Vec<String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(k, _)| *k == "scope")
        .map(|(_, v)| percent_decode(v))
        .collect();
    let (status, body) = if path != "/token" {
        ("404 Not Found", json!({"error": "no such endpoint"}))
    } else if !issuer.authorized(authorization.as_deref()) {
        (
            "401 Unauthorized",
            json!({"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]}),
        )
    } else {
        (
            "200 OK",
            json!({"token": issuer.mint(&issuer.username, &scopes), "expires_in": 300}),
        )
    };
    let body = body.to_string();
    let mut stream = reader.into_inner();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(hi << 4 | lo);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_scopes() {
        assert_eq!(
            percent_decode("repository%3Aplugins%2Fecho%3Apull%2Cpush"),
            "repository:plugins/echo:pull,push"
        );
        assert_eq!(percent_decode("a+b%2"), "a b%2");
    }
}
