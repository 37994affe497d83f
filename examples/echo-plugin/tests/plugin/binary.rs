//! The binary: its environment, its own address, and SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{SECRET, TempDir, client};

const BIN: &str = env!("CARGO_BIN_EXE_echo-plugin");

fn plugin(dir: &TempDir) -> Command {
    let secret = dir.path().join("secret");
    std::fs::write(&secret, format!("\n{SECRET}  \n")).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("LOOP_PLUGIN_HOST", "127.0.0.7")
        .env("LOOP_PLUGIN_PORT", "0")
        .env("LOOP_PLUGIN_SECRET_FILE", &secret)
        .env("LOOP_PLUGIN_DATA_DIR", dir.path().join("data"))
        .env("LOOP_PLUGIN_MANIFEST", dir.path().join("absent.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Reads the plugin's log until it says where it listens.
fn listening(child: &mut Child) -> String {
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some((_, addr)) = line.split_once("listening on ") {
            let addr = addr.trim().to_owned();
            std::thread::spawn(move || lines.for_each(drop));
            return addr;
        }
    }
    panic!("the plugin exited before listening: {:?}", child.wait());
}

fn wait(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the plugin didn't exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn serves_on_its_host_and_stops_on_sigterm() {
    let dir = TempDir::new("binary");
    let mut child = plugin(&dir).spawn().unwrap();
    let addr = listening(&mut child);
    assert!(addr.starts_with("127.0.0.7:"), "{addr}");

    let client = client();
    let health: Value = client
        .get(format!("http://{addr}/healthz"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["version"], "0.1.0", "the built-in manifest");
    assert!(dir.path().join("data/journal.jsonl").exists());

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    assert!(wait(&mut child, Duration::from_secs(10)).success());
}

#[tokio::test]
async fn reads_the_manifest_it_is_given() {
    let dir = TempDir::new("binary-manifest");
    let manifest = dir.path().join("plugin.json");
    let text = echo_plugin::BUILTIN.replacen(r#""version": "0.1.0""#, r#""version": "2.3.4""#, 1);
    assert_ne!(text, echo_plugin::BUILTIN);
    std::fs::write(&manifest, text).unwrap();
    let mut child = plugin(&dir)
        .env("LOOP_PLUGIN_MANIFEST", &manifest)
        .spawn()
        .unwrap();
    let addr = listening(&mut child);
    let res = client()
        .get(format!("http://{addr}/healthz"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    let health: Value = res.json().await.unwrap();
    assert_eq!(health["version"], "2.3.4");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn refuses_a_manifest_admission_would_refuse() {
    let dir = TempDir::new("binary-bad-manifest");
    let manifest = dir.path().join("plugin.json");
    std::fs::write(&manifest, "{ \"id\": \"echo\", \"version\": \"2.3.4\" }").unwrap();
    let out = plugin(&dir)
        .env("LOOP_PLUGIN_MANIFEST", &manifest)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("plugin.json"), "{log}");
}

#[test]
fn refuses_to_start_without_a_secret() {
    let dir = TempDir::new("binary-nosecret");
    let out = plugin(&dir)
        .env_remove("LOOP_PLUGIN_SECRET_FILE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("LOOP_PLUGIN_SECRET_FILE"), "{log}");

    std::fs::write(dir.path().join("empty"), " \n").unwrap();
    let out = plugin(&dir)
        .env("LOOP_PLUGIN_SECRET_FILE", dir.path().join("empty"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
}

/// An image FROM scratch has no root certificates: with a plain-HTTP LOOP_API_URL (the
/// cluster's Service) the plugin still starts. (It exited at once when the client it calls
/// the Plugin API with insisted on the system's roots.)
#[tokio::test]
async fn starts_without_root_certificates_for_a_plain_http_api() {
    let dir = TempDir::new("binary-no-roots");
    let token = dir.path().join("token");
    std::fs::write(&token, "tok").unwrap();
    let mut child = plugin(&dir)
        .env("LOOP_API_URL", "http://127.0.0.1:9")
        .env("LOOP_PLUGIN_TOKEN_FILE", &token)
        .env("SSL_CERT_FILE", dir.path().join("no-such-bundle.pem"))
        .env("SSL_CERT_DIR", dir.path().join("no-such-dir"))
        .spawn()
        .unwrap();
    let addr = listening(&mut child);
    assert!(addr.starts_with("127.0.0.7:"), "{addr}");
    let _ = child.kill();
    let _ = child.wait();
}
