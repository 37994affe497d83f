//! `conformance --bundle`: the echo example's panel drawn in headless Chromium passes, and
//! deliberately broken copies of it, each a panel of its own in one manifest, fail with the
//! line that names their fault and where (an inline script, a throw, an unhandled rejection, a
//! missing file, a page that never takes the bridge's port, a bridge call the host refuses);
//! with `NoBridge`, a page that never takes the port passes. Under `make test`
//! (`$LOOP_PLUGINS_CHROMIUM` set: hack/test.sh installs Chromium and names it) a drawing test
//! fails when there is no Chromium; elsewhere, without one (`hack/chromium.sh` installs it), it
//! is SKIPPED, said on the terminal; the check's own skip is tested without one.

use std::io::Write;
use std::path::{Path, PathBuf};

use loop_plugins_conformance::ui::stand_in::PluginAt;
use loop_plugins_conformance::ui::{self, Options};
use loop_plugins_conformance::{Finding, Outcome};

const ECHO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/echo-plugin");

fn echo_manifest() -> manifest::Manifest {
    let text = std::fs::read_to_string(Path::new(ECHO).join("plugin.json")).unwrap();
    manifest::parse_str(&text).unwrap()
}

/// What a drawing test does on this machine.
#[derive(Debug, PartialEq, Eq)]
enum Drawing {
    Draw(PathBuf),
    /// No Chromium, and none asked for: the test is skipped, and says so.
    Skip(String),
    /// `$LOOP_PLUGINS_CHROMIUM` names a Chromium that is not there.
    Fail(String),
}

/// `binary` is the Chromium found (`$LOOP_PLUGINS_CHROMIUM`, else /usr/bin/chromium);
/// `named` whether `$LOOP_PLUGINS_CHROMIUM` is set, as `make test` sets it.
fn drawing(binary: PathBuf, exists: bool, named: bool) -> Drawing {
    match (exists, named) {
        (true, _) => Drawing::Draw(binary),
        (false, true) => Drawing::Fail(format!(
            "${} names {}, which is not there: the drawing tests do not pass by skipping",
            browser::CHROMIUM_ENV,
            binary.display()
        )),
        (false, false) => Drawing::Skip(format!(
            "no Chromium at {} (run hack/chromium.sh, or set ${}): nothing drawn",
            binary.display(),
            browser::CHROMIUM_ENV
        )),
    }
}

/// The Chromium `test` draws with, or None when it is skipped: then `SKIPPED <test>: why` is
/// written to the terminal past the harness's capture, so a skip is never a silent pass.
fn chromium(test: &str) -> Option<PathBuf> {
    let binary = ui::chromium(None);
    let exists = binary.is_file();
    match drawing(
        binary,
        exists,
        std::env::var_os(browser::CHROMIUM_ENV).is_some(),
    ) {
        Drawing::Draw(binary) => Some(binary),
        Drawing::Fail(why) => panic!("{why}"),
        Drawing::Skip(why) => {
            // Not eprintln!: the harness captures that, and shows it only for a failure.
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            None
        }
    }
}

#[test]
fn a_drawing_test_draws_fails_or_says_it_skipped() {
    let at = PathBuf::from("/usr/bin/chromium");
    assert_eq!(drawing(at.clone(), true, true), Drawing::Draw(at.clone()));
    assert_eq!(drawing(at.clone(), true, false), Drawing::Draw(at.clone()));
    assert!(
        matches!(drawing(at.clone(), false, true), Drawing::Fail(why) if why.contains("/usr/bin/chromium"))
    );
    assert!(
        matches!(drawing(at, false, false), Drawing::Skip(why) if why.contains("hack/chromium.sh"))
    );
}

fn lines(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(Finding::line).collect()
}

#[tokio::test]
async fn the_echo_panel_is_drawn_connects_and_passes() {
    let Some(chromium) = chromium("the_echo_panel_is_drawn_connects_and_passes") else {
        return;
    };
    let options = Options::new(Path::new(ECHO).join("ui"), chromium);
    let findings = ui::check(&options, &echo_manifest(), None).await.unwrap();
    assert_eq!(
        lines(&findings),
        ["PASS ui panel main ui/main/index.html (drawn)"]
    );
}

const QUIZ: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/quiz-plugin");

/// The quiz example's panel and its score card, as the host draws them: each takes the
/// bridge's port (kind's `conformance IMAGE` found that neither did).
#[tokio::test]
async fn the_quiz_panel_and_card_are_drawn_connect_and_pass() {
    let Some(chromium) = chromium("the_quiz_panel_and_card_are_drawn_connect_and_pass") else {
        return;
    };
    let text = std::fs::read_to_string(Path::new(QUIZ).join("plugin.json")).unwrap();
    let manifest = manifest::parse_str(&text).unwrap();
    let options = Options::new(Path::new(QUIZ).join("ui"), chromium);
    let findings = ui::check(&options, &manifest, None).await.unwrap();
    assert_eq!(
        lines(&findings),
        [
            "PASS ui panel main ui/main/index.html (drawn)",
            "PASS ui card score ui/score.html (drawn)"
        ]
    );
}

/// A panel's id and how its copy of echo's page is broken: `edit(index.html, app.js)`.
type Broken = (&'static str, fn(&mut String, &mut String));

/// A copy of echo's `ui/main` for each broken panel.
fn broken_bundle(dir: &Path, panels: &[Broken]) {
    let main = Path::new(ECHO).join("ui/main");
    for (id, edit) in panels {
        let to = dir.join(id);
        std::fs::create_dir_all(&to).unwrap();
        let mut html = std::fs::read_to_string(main.join("index.html")).unwrap();
        let mut app = std::fs::read_to_string(main.join("app.js")).unwrap();
        edit(&mut html, &mut app);
        std::fs::write(to.join("index.html"), html).unwrap();
        std::fs::write(to.join("app.js"), app).unwrap();
        std::fs::copy(main.join("style.css"), to.join("style.css")).unwrap();
    }
}

#[tokio::test]
async fn each_broken_copy_of_the_echo_panel_fails_with_its_own_line() {
    let Some(chromium) = chromium("each_broken_copy_of_the_echo_panel_fails_with_its_own_line")
    else {
        return;
    };
    let panels: [Broken; 7] = [
        ("whole", |_, _| {}),
        ("inline", |html, _| {
            *html = html.replace("</body>", "<script>window.inline = 1;</script></body>");
        }),
        ("throws", |_, app| {
            app.push_str("\nthrow new Error(\"broken on purpose\");\n");
        }),
        ("rejects", |_, app| {
            app.push_str("\nPromise.reject(new Error(\"rejected on purpose\"));\n");
        }),
        ("missing", |html, _| {
            *html = html.replace(
                "</head>",
                "<script type=\"module\" src=\"gone.js\"></script></head>",
            );
        }),
        ("silent", |_, app| {
            *app = "document.title = \"never connects\";\n".into();
        }),
        ("badcall", |_, app| {
            app.push_str("\nawait request(\"no.such.method\").catch(() => {});\n");
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    broken_bundle(dir.path(), &panels);
    let ui_panels: Vec<String> = panels
        .iter()
        .map(|(id, _)| {
            format!(r#"{{"id": "{id}", "label": "{id}", "entry": "ui/{id}/index.html"}}"#)
        })
        .collect();
    // And the whole copy as a card too: a card is drawn as a panel is.
    let manifest = manifest::parse_str(&format!(
        r#"{{"id": "broken", "name": "Broken", "version": "0.1.0", "api": "1",
            "capabilities": ["ui.panel", "ui.notification.card"],
            "ui": {{"panels": [{}], "cards": [{{"id": "score", "entry": "ui/whole/index.html"}}]}}}}"#,
        ui_panels.join(",")
    ))
    .unwrap();
    let options = Options::new(dir.path().to_path_buf(), chromium);
    let findings = ui::check(&options, &manifest, None).await.unwrap();
    let got = lines(&findings);
    let text = got.join("\n");
    let has = |prefix: &str, words: &[&str]| {
        assert!(
            got.iter()
                .any(|l| l.starts_with(prefix) && words.iter().all(|w| l.contains(w))),
            "no line {prefix}... with {words:?} in:\n{text}"
        );
    };
    has("PASS ui panel whole ui/whole/index.html (drawn)", &[]);
    has("PASS ui card score ui/whole/index.html (drawn)", &[]);
    has(
        "FAIL ui panel inline ui/inline/index.html (blocked by the policy): ",
        &["inline script", "script-src"],
    );
    has(
        "FAIL ui panel throws ui/throws/app.js (uncaught error): ",
        &["broken on purpose"],
    );
    has(
        "FAIL ui panel rejects ui/rejects/app.js (uncaught error): ",
        &["rejected on purpose"],
    );
    has(
        "FAIL ui panel missing ui/missing/gone.js (file): answered 404",
        &[],
    );
    has(
        "FAIL ui panel silent ui/silent/index.html (bridge port): no call over the bridge's port",
        &[],
    );
    has(
        "FAIL ui panel badcall (bridge call): no.such.method answered error -32601",
        &[],
    );
    // One line per problem, and nothing else failed: the whole copy passed alone (as a panel
    // and as a card), the others failed once each.
    let failed = findings
        .iter()
        .filter(|f| matches!(f.outcome, Outcome::Fail(_)))
        .count();
    assert_eq!(failed, 6, "{text}");
    assert_eq!(findings.len(), 8, "{text}");
}

/// A plugin's `/x/echo` that answers only its secret, for the pages' `api.request`.
async fn plugin_with_x() -> PluginAt {
    use axum::http::{HeaderMap, StatusCode};
    let app = axum::Router::new().route(
        "/x/echo",
        axum::routing::post(|headers: HeaderMap, body: String| async move {
            if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer s3cret") {
                return (StatusCode::UNAUTHORIZED, String::new());
            }
            (StatusCode::OK, format!("echoed {body}"))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    PluginAt {
        url,
        secret: "s3cret".into(),
    }
}

#[tokio::test]
async fn api_request_reaches_the_plugin_and_a_dead_one_is_a_failed_call() {
    let Some(chromium) = chromium("api_request_reaches_the_plugin_and_a_dead_one_is_a_failed_call")
    else {
        return;
    };
    // Echo's page, calling the plugin's /x once connected and throwing on any answer but the
    // plugin's (which it gives only with its secret, which the stand-in holds).
    let calls: [Broken; 1] = [("calls", |_, app| {
        app.push_str(
            "\nconst answer = await request(\"api.request\", \
             {method: \"POST\", path: \"/x/echo\", body: \"hi\"});\n\
             if (answer.status !== 200 || answer.body !== \"echoed hi\") \
             throw new Error(`api.request: ${JSON.stringify(answer)}`);\n",
        );
    })];
    let dir = tempfile::tempdir().unwrap();
    broken_bundle(dir.path(), &calls);
    let manifest = manifest::parse_str(
        r#"{"id": "calls", "name": "Calls", "version": "0.1.0", "api": "1",
            "capabilities": ["ui.panel"],
            "ui": {"panels": [{"id": "calls", "label": "C", "entry": "ui/calls/index.html"}]}}"#,
    )
    .unwrap();
    let options = Options::new(dir.path().to_path_buf(), chromium);
    let findings = ui::check(&options, &manifest, Some(plugin_with_x().await))
        .await
        .unwrap();
    assert_eq!(
        lines(&findings),
        ["PASS ui panel calls ui/calls/index.html (drawn)"]
    );
    // No plugin to reach: the host's upstream error, and the page's own throw on it.
    let findings = ui::check(&options, &manifest, None).await.unwrap();
    let got = lines(&findings);
    assert!(
        got.iter().any(|l| l
            .starts_with("FAIL ui panel calls (bridge call): api.request answered error -32002")),
        "{got:#?}"
    );
}

/// NoBridge ("NoBridge skips the bridge"): a page that draws without the bridge, which fails
/// for never taking the port when the host offers one, passes when it offers none; a page that
/// breaks otherwise still fails.
#[tokio::test]
async fn with_no_bridge_a_page_that_never_takes_the_port_passes() {
    let Some(chromium) = chromium("with_no_bridge_a_page_that_never_takes_the_port_passes") else {
        return;
    };
    let panels: [Broken; 2] = [
        ("plain", |_, app| {
            *app = "document.body.append(\"drawn without the bridge\");\n".into();
        }),
        ("throws", |_, app| {
            *app = "throw new Error(\"broken on purpose\");\n".into();
        }),
    ];
    let dir = tempfile::tempdir().unwrap();
    broken_bundle(dir.path(), &panels);
    let manifest = manifest::parse_str(
        r#"{"id": "plain", "name": "Plain", "version": "0.1.0", "api": "1",
            "capabilities": ["ui.panel"],
            "ui": {"panels": [{"id": "plain", "label": "P", "entry": "ui/plain/index.html"},
                              {"id": "throws", "label": "T", "entry": "ui/throws/index.html"}]}}"#,
    )
    .unwrap();
    let mut options = Options::new(dir.path().to_path_buf(), chromium);
    let offered = lines(&ui::check(&options, &manifest, None).await.unwrap());
    assert!(
        offered
            .iter()
            .any(|l| l.starts_with("FAIL ui panel plain ui/plain/index.html (bridge port): ")),
        "{offered:#?}"
    );
    options.no_bridge = true;
    let got = lines(&ui::check(&options, &manifest, None).await.unwrap());
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0], "PASS ui panel plain ui/plain/index.html (drawn)");
    assert!(
        got[1].starts_with("FAIL ui panel throws ui/throws/app.js (uncaught error): ")
            && got[1].contains("broken on purpose"),
        "{got:#?}"
    );
}

#[tokio::test]
async fn without_chromium_the_drawing_is_one_skip() {
    let options = Options::new(Path::new(ECHO).join("ui"), "/nonexistent/chromium".into());
    let findings = ui::check(&options, &echo_manifest(), None).await.unwrap();
    assert_eq!(
        lines(&findings),
        [
            "SKIP ui panels and cards (chromium): no Chromium at /nonexistent/chromium: panels \
             and cards not drawn (give --chromium PATH)"
        ]
    );
}
