//! The binary's offline verbs, run as a user would: `crds` prints the CRDs the code generates
//! (tests/crds.rs checks the checked-in copies against them), `manifest check` accepts every
//! example and refuses a broken copy naming the field (or, for a file cut short, the line and
//! column where it ends), `plugin keygen` writes a key once, `console` prints the console's URL
//! for the kubeconfig's user.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(args)
        .output()
        .expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn check(path: &Path) -> (bool, String) {
    run(&["manifest", "check", path.to_str().unwrap()])
}

#[test]
fn crds_prints_the_generated_crds() {
    let (ok, printed) = run(&["crds"]);
    assert!(ok, "{printed}");
    assert!(
        printed == model::crdgen::yaml(),
        "loop-plugins crds printed other than model::crdgen::yaml()"
    );
}

#[test]
fn every_example_manifest_is_valid() {
    for example in [
        "examples/manifests/echo.json",
        "examples/manifests/full.json",
        "examples/echo-plugin/plugin.json",
    ] {
        let (ok, text) = check(&repo().join(example));
        assert!(ok, "{example}: {text}");
        assert_eq!(text.lines().count(), 1, "one summary line: {text}");
        assert!(text.contains("valid"), "{text}");
    }
}

#[test]
fn a_broken_copy_is_refused_naming_each_field() {
    let original = std::fs::read_to_string(repo().join("examples/manifests/echo.json")).unwrap();
    let broken = original
        .replacen("\"api\": \"1\"", "\"api\": \"2\"", 1)
        .replacen("\"id\": \"echo\"", "\"id\": \"Echo!\"", 1);
    assert_ne!(
        broken, original,
        "the example changed shape: update this test"
    );
    let dir = std::env::temp_dir().join(format!("loop-plugins-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.json");
    std::fs::write(&path, broken).unwrap();
    let (ok, text) = check(&path);
    assert!(!ok, "a broken manifest passed: {text}");
    assert!(text.lines().any(|l| l.starts_with("api:")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("id:")), "{text}");

    std::fs::write(&path, "{\n  \"id\": \"echo\",\n  \"api\" \"1\"\n}\n").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    assert!(
        text.contains(":3:"),
        "a syntax error names its line: {text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_manifest_cut_short_is_reported_where_it_ends() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plugin.json");
    let file = path.display().to_string();
    // Cut mid-value.
    std::fs::write(&path, "{ \"id\": \"x\", \"version\": ").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    assert_eq!(text.trim_end(), format!("{file}:1:25: EOF parsing value"));
    // Cut after a few good lines of the example.
    let original = std::fs::read_to_string(repo().join("examples/manifests/echo.json")).unwrap();
    let kept: Vec<&str> = original.lines().take(4).collect();
    let last = kept.last().unwrap();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    let (ok, text) = check(&path);
    assert!(!ok);
    let end = format!("{file}:4:{}: EOF parsing ", last.chars().count() + 1);
    assert!(text.starts_with(&end), "want {end:?}: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keygen_writes_a_key_once_and_prints_its_public_key() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-keygen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("publisher.pem");
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["plugin", "keygen", "--out", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let public = String::from_utf8(out.stdout).unwrap();
    assert_eq!(public.trim().len(), 64, "{public}");
    assert!(
        std::fs::read_to_string(&key)
            .unwrap()
            .contains("BEGIN PRIVATE KEY")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let (ok, text) = run(&["plugin", "keygen", "--out", key.to_str().unwrap()]);
    assert!(!ok, "a second keygen over the same file must fail: {text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The echo plugin as a process on a loopback port, stopped when dropped.
struct EchoProcess {
    child: std::process::Child,
    url: String,
    dir: PathBuf,
}

impl EchoProcess {
    fn start(name: &str) -> Self {
        use std::io::BufRead;
        let binary = echo_binary();
        let dir =
            std::env::temp_dir().join(format!("loop-plugins-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("secret"), "s3cret\n").unwrap();
        let mut child = Command::new(binary)
            .env("LOOP_PLUGIN_SECRET_FILE", dir.join("secret"))
            .env("LOOP_PLUGIN_PORT", "0")
            .env("LOOP_PLUGIN_HOST", "127.0.0.1")
            .env("LOOP_PLUGIN_DATA_DIR", dir.join("data"))
            .env(
                "LOOP_PLUGIN_MANIFEST",
                repo().join("examples/echo-plugin/plugin.json"),
            )
            .env_remove("LOOP_API_URL")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("echo-plugin starts");
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut url = None;
        for line in stderr.by_ref() {
            let line = line.unwrap();
            if let Some((_, addr)) = line.split_once("listening on ") {
                url = Some(format!("http://{}", addr.trim()));
                break;
            }
        }
        let url = url.expect("echo-plugin says where it listens");
        // Its logs go on being read: a closed pipe would fail its writes.
        std::thread::spawn(move || stderr.for_each(drop));
        Self { child, url, dir }
    }

    fn conformance(&self, manifest: &Path, extra: &[&str]) -> (std::process::ExitStatus, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .args(["conformance", "--url", &self.url, "--secret-file"])
            .arg(self.dir.join("secret"))
            .arg("--manifest")
            .arg(manifest)
            .args(extra)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty() || !out.status.success(), "{stderr}");
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).to_string() + &stderr,
        )
    }
}

impl Drop for EchoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn conformance_passes_the_echo_plugin_running_as_a_process() {
    let echo = EchoProcess::start("pass");
    let manifest = repo().join("examples/echo-plugin/plugin.json");
    let (status, text) = echo.conformance(&manifest, &[]);
    assert!(status.success(), "{text}");
    let summary = text.lines().last().unwrap();
    assert_eq!(
        summary, "echo 0.1.0: 41 checks, 41 passed, 0 warned, 0 failed, 0 skipped",
        "{text}"
    );
    assert!(
        text.lines().all(|l| l.starts_with("PASS ") || l == summary),
        "{text}"
    );

    let (status, json) = echo.conformance(&manifest, &["--json"]);
    assert!(status.success(), "{json}");
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(report["findings"].as_array().unwrap().len(), 41);
}

#[test]
fn conformance_fails_a_plugin_that_breaks_its_manifest_with_a_line_per_problem() {
    // The plugin serves echo's routes, but this manifest promises another version and a tool,
    // an action and a switch it does not serve.
    let echo = EchoProcess::start("fail");
    let original =
        std::fs::read_to_string(repo().join("examples/echo-plugin/plugin.json")).unwrap();
    let broken = original
        .replacen("\"version\": \"0.1.0\"", "\"version\": \"0.2.0\"", 1)
        .replacen(
            "{ \"id\": \"ping\" }",
            "{ \"id\": \"ping\" }, { \"id\": \"pong\" }",
            1,
        )
        .replacen("\"id\": \"mode\"", "\"id\": \"turbo\"", 1);
    assert_ne!(
        broken, original,
        "the example changed shape: update this test"
    );
    let manifest = echo.dir.join("plugin.json");
    std::fs::write(&manifest, broken).unwrap();
    let (status, text) = echo.conformance(&manifest, &[]);
    assert_eq!(status.code(), Some(1), "{text}");
    for line in [
        "FAIL health GET /healthz (health and version): version \"0.1.0\", the manifest's is \"0.2.0\"",
        "FAIL actions POST /actions/pong (trigger manual): answered 404 (\"no such action: pong\"): not accepted; the reference: \"Check drives a plugin",
        "FAIL switches POST /switches/turbo (on): answered 404",
        "FAIL switches POST /switches/turbo (off): answered 404",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "no line {line:?} in\n{text}"
        );
    }
    let summary = text.lines().last().unwrap();
    assert!(
        summary.starts_with("echo 0.2.0: ") && summary.contains(" failed"),
        "{text}"
    );
}

#[test]
fn conformance_without_a_secret_file_says_so() {
    let (ok, text) = run(&[
        "conformance",
        "--url",
        "http://127.0.0.1:9",
        "--secret-file",
        "/nonexistent/secret",
        "--manifest",
        "examples/echo-plugin/plugin.json",
    ]);
    assert!(!ok);
    assert!(text.contains("/nonexistent/secret"), "{text}");
}

/// A plugin written to the reference's rules and no more, served on a loopback port from a
/// thread of this test: the secret is checked on the routes it serves only (anything else is
/// a 404, whatever the secret), and every event is taken with 204, even one it is not
/// subscribed to. `secret_on_health: false` breaks the reference: `/healthz` is served to
/// anyone.
fn lenient_plugin(secret: &'static str, secret_on_health: bool) -> String {
    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::post;
    let allowed = move |headers: &HeaderMap| {
        headers.get("authorization").and_then(|v| v.to_str().ok())
            == Some(format!("Bearer {secret}").as_str())
    };
    let refused = || {
        let body = axum::Json(serde_json::json!({"error": "no secret"}));
        (StatusCode::UNAUTHORIZED, body).into_response()
    };
    let app = axum::Router::new()
        .route(
            "/healthz",
            axum::routing::get(move |headers: HeaderMap| async move {
                if secret_on_health && !allowed(&headers) {
                    return refused();
                }
                axum::Json(serde_json::json!({"status": "ok", "version": "0.1.0"})).into_response()
            }),
        )
        .route(
            "/actions/ping",
            post(move |headers: HeaderMap| async move {
                if !allowed(&headers) {
                    return refused();
                }
                let accepted = axum::Json(serde_json::json!({"accepted": true}));
                (StatusCode::ACCEPTED, accepted).into_response()
            }),
        )
        .route(
            "/events",
            post(move |headers: HeaderMap| async move {
                if !allowed(&headers) {
                    return refused();
                }
                StatusCode::NO_CONTENT.into_response()
            }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "no such route") });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await
        })
    });
    url
}

#[test]
fn conformance_passes_a_plugin_within_the_reference_with_warnings_and_fails_one_that_is_not() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-lenient-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    let manifest = dir.join("plugin.json");
    std::fs::write(
        &manifest,
        r#"{"id": "lenient", "name": "Lenient", "version": "0.1.0", "api": "1",
            "capabilities": ["events.subscribe"], "events": ["message.created"],
            "actions": [{"id": "ping"}]}"#,
    )
    .unwrap();
    let conformance = |url: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .args(["conformance", "--url", url, "--secret-file"])
            .arg(&secret)
            .arg("--manifest")
            .arg(&manifest)
            .output()
            .expect("the binary runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text)
    };

    let (code, text) = conformance(&lenient_plugin("s3cret", true));
    assert_eq!(code, Some(0), "{text}");
    for line in [
        "WARN secret GET /conformance-no-such (no secret): answered 404: a refusal, but not 401",
        "WARN errors POST /events (an event it does not take): answered 204, not 422",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(line)),
            "no line {line:?} in\n{text}"
        );
    }
    assert!(!text.contains("FAIL "), "{text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.starts_with("lenient 0.1.0: ") && summary.ends_with(" 0 failed, 0 skipped"),
        "{text}"
    );
    assert!(!summary.contains(" 0 warned"), "{text}");

    let (code, text) = conformance(&lenient_plugin("s3cret", false));
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.lines().any(|l| l
            == "FAIL secret GET /healthz (no secret): answered 200: served without the plugin's \
                secret; the reference: \"Every request carries Authorization: Bearer <contents of \
                LOOP_PLUGIN_SECRET_FILE>; refuse any other.\""),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The echo plugin's binary, beside loop-plugins (`cargo build --workspace`).
fn echo_binary() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_loop-plugins")).with_file_name("echo-plugin");
    assert!(
        binary.exists(),
        "{} is missing: cargo build -p echo-plugin",
        binary.display()
    );
    binary
}

#[test]
fn conformance_starts_a_plugin_command_with_the_fake_host_as_its_api() {
    let manifest = repo().join("examples/echo-plugin/plugin.json");
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", "--manifest"])
        .arg(&manifest)
        .arg("--")
        .arg(echo_binary())
        .output()
        .expect("the binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    // The plan's 41 calls, and the runs it started: echo starts none, which is said.
    assert_eq!(
        text.lines().last().unwrap(),
        "echo 0.1.0: 42 checks, 41 passed, 0 warned, 0 failed, 1 skipped",
        "{text}"
    );
    assert!(
        text.contains(
            "SKIP runs POST /runs (runs it started): the plugin started no run while it was checked"
        ),
        "{text}"
    );

    // A command that exits before it answers: exit 2, with the reason and its last lines.
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", "--manifest"])
        .arg(&manifest)
        .args(["--", "sh", "-c", "echo no secret for me >&2; exit 3"])
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sh exited (exit status: 3) before it answered")
            && stderr.contains("no secret for me"),
        "{stderr}"
    );

    // Neither a URL nor a command: clap says what is missing.
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", "--manifest"])
        .arg(&manifest)
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--url <URL>"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn conformance_follows_the_runs_the_quiz_example_starts() {
    let binary = echo_binary().with_file_name("quiz-plugin");
    assert!(
        binary.exists(),
        "{} is missing: cargo build -p quiz-plugin",
        binary.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", "--json", "--manifest"])
        .arg(repo().join("examples/quiz-plugin/plugin.json"))
        .arg("--")
        .arg(binary)
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    let findings = report["findings"].as_array().unwrap();
    assert!(findings.iter().all(|f| f["outcome"] == "pass"), "{text}");
    // daily ran once per trigger, each start a run the check then ended.
    let own_runs = findings
        .iter()
        .filter(|f| f["what"] == "a run of agent ask it started")
        .count();
    assert_eq!(own_runs, 3, "{text}");
}

/// `loop-plugins console` with a kubeconfig whose user has a token prints the console's URL
/// with the token in its fragment; with a certificate user, the URL and how to make a token.
#[test]
fn console_prints_the_url_with_the_kubeconfigs_token() {
    let dir = std::env::temp_dir().join(format!("loop-plugins-console-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\n\
         contexts:\n- name: dev\n  context: {cluster: c, user: alice, namespace: team}\n\
         - name: cert\n  context: {cluster: c, user: admin}\n\
         users:\n- name: alice\n  user: {token: abc.def}\n\
         - name: admin\n  user: {client-certificate-data: AA, client-key-data: BB}\n",
    )
    .unwrap();
    let console = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .arg("console")
            .args(args)
            .env("KUBECONFIG", &kubeconfig)
            .env("LOOP_API", "http://127.0.0.1:18080")
            .output()
            .expect("the binary runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (ok, text) = console(&[]);
    assert!(ok, "{text}");
    assert!(
        text.contains("http://127.0.0.1:18080/console/#namespace=team&token=abc.def"),
        "{text}"
    );
    let (ok, text) = console(&["--namespace", "other", "--api", "http://api.test"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("http://api.test/console/#namespace=other&token=abc.def"),
        "{text}"
    );

    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .replace("current-context: dev", "current-context: cert"),
    )
    .unwrap();
    let (ok, text) = console(&[]);
    assert!(ok, "{text}");
    assert!(
        text.contains("http://127.0.0.1:18080/console/#namespace=default\n"),
        "{text}"
    );
    assert!(text.contains("create token console"), "{text}");
    assert!(!text.contains("token="), "{text}");
    // A token made for a ServiceAccount, given instead.
    let (ok, text) = console(&["--token", "sa.token"]);
    assert!(ok, "{text}");
    assert!(text.contains("#namespace=default&token=sa.token"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn conformance_with_a_bundle_draws_the_panel_and_refuses_a_chromium_that_is_not_there() {
    let manifest = repo().join("examples/echo-plugin/plugin.json");
    let bundle = repo().join("examples/echo-plugin/ui");
    let conformance = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .args(["conformance", "--manifest"])
            .arg(&manifest)
            .arg("--bundle")
            .arg(&bundle)
            .args(extra)
            .arg("--")
            .arg(echo_binary())
            .output()
            .expect("the binary runs")
    };
    let out = conformance(&["--chromium", "/nonexistent/chromium"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--chromium /nonexistent/chromium: no such file"),
        "{stderr}"
    );
    // Drawn where Chromium is (make test installs it and names it in $LOOP_PLUGINS_CHROMIUM,
    // which then must be there); elsewhere skipped, said past the harness's capture.
    match std::env::var_os("LOOP_PLUGINS_CHROMIUM") {
        Some(named) => assert!(
            Path::new(&named).is_file(),
            "$LOOP_PLUGINS_CHROMIUM names {named:?}, which is not there"
        ),
        None if !Path::new("/usr/bin/chromium").is_file() => {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED conformance_with_a_bundle_draws_the_panel...: no Chromium at \
                 /usr/bin/chromium (run hack/chromium.sh): not drawn"
            );
            return;
        }
        None => {}
    }
    let out = conformance(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("PASS ui panel main ui/main/index.html (drawn)"),
        "{text}"
    );
}

/// `conformance IMAGE`'s own command line: an image with another form's flags is refused
/// naming the flag, and registry flags are for an image only.
#[test]
fn conformance_of_an_image_takes_no_other_forms_flags() {
    let image = "r.test/p/echo:1";
    for (flag, extra) in [
        ("--url <URL>", &["--url", "http://127.0.0.1:9"][..]),
        ("--manifest <MANIFEST>", &["--manifest", "plugin.json"][..]),
        ("--bundle <DIR>", &["--bundle", "ui"][..]),
        ("COMMAND", &["--", "echo-plugin"][..]),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .args(["conformance", image])
            .args(extra)
            .output()
            .expect("the binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("cannot be used with") && stderr.contains(flag),
            "{flag}: {stderr}"
        );
    }
    let (ok, text) = run(&[
        "conformance",
        "--insecure-registry",
        "r.test:5000",
        "--manifest",
        "examples/echo-plugin/plugin.json",
        "--",
        "true",
    ]);
    assert!(!ok);
    assert!(
        text.contains("--registry-config and --insecure-registry are for IMAGE"),
        "{text}"
    );
}

/// `conformance IMAGE` against a real registry: an image admission refuses is a finding with
/// its stage and reason (exit 1, nothing started); an admitted one needs a container engine,
/// and none answering is exit 2 saying so.
#[test]
fn conformance_of_an_image_judges_it_then_needs_a_container_engine() {
    use testkit::images::{ImageContent, Images};
    let images = Images::start().expect("the test registry starts");
    let text = std::fs::read_to_string(repo().join("examples/echo-plugin/plugin.json")).unwrap();
    let plugin = model::resources::Plugin::from_manifest(
        &text,
        &format!("unpublished.test/echo@sha256:{}", "a".repeat(64)),
        vec![],
        true,
    )
    .unwrap();
    let good = ImageContent::for_plugin(&plugin);
    let unlabelled = ImageContent {
        label: false,
        ..good.clone()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (good, unlabelled) = runtime.block_on(async {
        (
            images.push("cli-good", &good).await.unwrap(),
            images.push("cli-unlabelled", &unlabelled).await.unwrap(),
        )
    });
    let conformance = |image: &str| {
        Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
            .args(["conformance", image])
            .env("LOOP_PLUGINS_CONTAINER_ENGINE", "/nonexistent/docker")
            .output()
            .expect("the binary runs")
    };

    let out = conformance(&unlabelled);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with(
            "FAIL admission Image (HostConfig's defaults, plugins on): ImageLabelMissing: "
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains("SKIP admission container (run when admitted): admission refused"),
        "{stdout}"
    );

    // By tag: pulled, admitted, then no engine.
    let tagged = good.split_once('@').unwrap().0;
    let out = conformance(tagged);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no container engine answers (/nonexistent/docker: ")
            && stderr.contains("$LOOP_PLUGINS_CONTAINER_ENGINE"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `conformance IMAGE` running the echo image in a container, as kind-e2e does with the real
/// echo image (tests/e2e's `conformance`), for a machine with Docker but no kind:
/// `LOOP_PLUGINS_E2E_ECHO_BINARY=<static echo-plugin> cargo test --test cli -- --ignored`.
#[test]
#[ignore = "needs a container engine, and a static echo binary in $LOOP_PLUGINS_E2E_ECHO_BINARY"]
fn conformance_of_an_image_runs_it_in_a_container() {
    use testkit::images::{ImageContent, Images};
    let images = Images::start().expect("the test registry starts");
    let text = std::fs::read_to_string(repo().join("examples/echo-plugin/plugin.json")).unwrap();
    let content = |text: &str| {
        let plugin = model::resources::Plugin::from_manifest(
            text,
            &format!("unpublished.test/echo@sha256:{}", "a".repeat(64)),
            vec![],
            true,
        )
        .unwrap();
        ImageContent::for_plugin(&plugin)
    };
    // A manifest whose tool's output the binary breaks: it answers `echo` as a string. (The
    // binary serves what its image's manifest declares, so a declared action it lacks is
    // not a break here.)
    let broken = text.replacen(
        "\"echo\": { \"type\": \"string\" }",
        "\"echo\": { \"type\": \"integer\" }",
        1,
    );
    assert_ne!(broken, text, "the example changed shape: update this test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (good, broken) = runtime.block_on(async {
        (
            images.push("cli-run", &content(&text)).await.unwrap(),
            images.push("cli-schema", &content(&broken)).await.unwrap(),
        )
    });
    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", &good, "--json"])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["passed"], true, "{stdout}");
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings[0]["area"], "admission", "{stdout}");
    assert!(findings.iter().any(|f| f["area"] == "health"), "{stdout}");

    let out = Command::new(env!("CARGO_BIN_EXE_loop-plugins"))
        .args(["conformance", &broken])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.starts_with(
            "FAIL tools POST /tools/echo (agent say's call): structured_content breaks the output_schema"
        )),
        "{stdout}"
    );
}
