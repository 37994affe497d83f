//! Plugins' panels in a real browser (headless Chromium, Debian's package, driven over the
//! DevTools protocol by `testkit::browser`): the probe panel (`tests/e2e/fixtures/probe-panel`)
//! served by the API server from its signed link, framed the way the console frames it, tries
//! what the reference's policy forbids and what it allows. Every assertion reads the browser's
//! own reports: its console and Log entries ("... violates the following Content Security
//! Policy directive ...", "Blocked form submission ..."), the `securitypolicyviolation` events
//! the page keeps, what the page says over the bridge, and the requests that reached (or never
//! reached) the addresses it aimed at. `ui::the_echo_panel_is_served_from_a_signed_link_under_the_policy`
//! and `server::ui::policy`'s unit tests read the same directives from the header.
//!
//! Which test shows each directive of the policy at work:
//!
//! - `sandbox allow-scripts`: `a_framed_panel_runs_its_own_files...` (its scripts run, its
//!   origin is `null`), `a_framed_panel_can_neither_post_a_form_nor_navigate...` (form posts
//!   and top navigation blocked by the sandbox), `the_panel_alone_in_a_tab...` (the header's
//!   sandbox alone, with no frame's attribute around it).
//! - `script-src`, `style-src`, `img-src`, `font-src`, `media-src`, `connect-src`,
//!   `frame-src`, `worker-src`, `object-src`, `base-uri`: `a_framed_panel_is_refused_each_thing...`,
//!   one row each, the refusal in the console and as a violation event; the allowed sources
//!   load in `a_framed_panel_runs_its_own_files...` (its own script, style, image and fetch;
//!   `data:` and `blob:` images and media; no font is loaded from an allowed source).
//! - `child-src`: the same refusals. Chromium consults it only where `frame-src` or
//!   `worker-src` is missing, and the policy sets both; it is there for CSP 2 browsers.
//! - `default-src`, `form-action`: `without_the_sandbox...`. In the sandboxed frame they are
//!   moot (the sandbox blocks a form before `form-action` is asked; an opaque origin fetches no
//!   manifest), so the test's own server serves the same policy without its `sandbox`, and the
//!   browser refuses the manifest (by `default-src`) and the form post (by `form-action`).
//!
//! A navigation of the frame itself out of its link is not something the bundle's policy can
//! stop (the reference: the app refuses it); the console's own `frame-src` refuses it, and
//! `console::the_echo_panel_appears_and_its_bridge_answers` shows the browser doing so.

use std::time::Duration;

use anyhow::{Context, ensure};
use serde_json::json;

use crate::browser_support::{ProbeWorld, Probed};
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    let timeout = Duration::from_secs(240);
    vec![
        test(
            "browser::a_framed_panel_runs_its_own_files_and_its_bridge_answers",
            a_framed_panel_runs_its_own_files,
        )
        .timeout(timeout),
        test(
            "browser::a_framed_panel_is_refused_each_thing_its_policy_forbids",
            a_framed_panel_is_refused_what_the_policy_forbids,
        )
        .timeout(timeout),
        test(
            "browser::a_framed_panel_can_neither_post_a_form_nor_navigate_the_console",
            a_framed_panel_cannot_post_or_navigate_the_top,
        )
        .timeout(timeout),
        test(
            "browser::the_panel_alone_in_a_tab_still_gets_an_opaque_origin_from_its_header",
            the_panel_alone_in_a_tab,
        )
        .timeout(timeout),
        test(
            "browser::without_the_sandbox_the_policy_still_refuses_form_posts_and_undeclared_loads",
            without_the_sandbox,
        )
        .timeout(timeout),
    ]
}

/// What the stand-in console tells the panel's bridge (`tests/e2e/fixtures/probe-panel/host.js`).
const THEME_BG: &str = "rgb(30, 31, 36)";

async fn a_framed_panel_runs_its_own_files(ns: Ns) -> anyhow::Result<()> {
    let world = ProbeWorld::start(&ns).await?;
    let (page, probed) = world.load_framed().await?;
    let shot = ProbeWorld::screenshot_path(&ns, "panel");
    page.screenshot(&shot).await?;
    let dump = probed.dump();

    // Its own module script ran (it imports the bridge module beside it), its own style
    // applies, its own image, data: and blob: images and media load, its own file fetches.
    let frame = page.frame(&format!("{}probe/index.html", world.bundle))?;
    ensure!(frame.evaluate("window.appRan").await? == true, "{dump}");
    for (probe, outcome) in [
        ("own style", "allowed"),
        ("own image", "allowed"),
        ("data image", "allowed"),
        ("blob image", "allowed"),
        ("own fetch", "allowed"),
        ("data media", "allowed"),
        ("blob media", "allowed"),
        ("origin", "opaque"),
    ] {
        ensure!(probed.outcome(probe) == outcome, "{probe}: {dump}");
    }
    ensure!(probed.detail("own fetch").contains("the bundle"), "{dump}");
    let images = frame
        .evaluate("[...document.images].map(i => [i.id, i.naturalWidth])")
        .await?;
    for id in ["own-image", "data-image"] {
        ensure!(
            images
                .as_array()
                .into_iter()
                .flatten()
                .any(|i| i[0] == id && i[1].as_u64() > Some(0)),
            "{id} did not load: {images}"
        );
    }
    // The browser refused none of its own files but where the policy refuses every source
    // (object-src 'none', frame-src 'none'); nothing else of the API server's origin is in
    // the bundle, and peer and host API fetches are the refusal test's.
    for v in &probed.violations {
        ensure!(
            !v.blocked.starts_with(&world.bundle)
                || ["object-src", "frame-src"].contains(&v.directive.as_str()),
            "its own file {} refused by {}: {dump}",
            v.blocked,
            v.directive
        );
    }

    // The bridge: the host's context came back to the panel, its theme applies, and what the
    // panel found reached the host over the port (state.set).
    ensure!(
        probed.probe["context"]
            == json!({
                "namespace": ns.name(), "chat": "general", "kind": "channel",
                "plugin": world.plugin, "panel": "probe",
            }),
        "{dump}"
    );
    let theme = frame
        .evaluate(
            "[getComputedStyle(document.documentElement).getPropertyValue('--bg').trim(), \
              getComputedStyle(document.body).backgroundColor]",
        )
        .await?;
    ensure!(theme == json!([THEME_BG, THEME_BG]), "theme: {theme}");
    let host = page.evaluate("window.host").await?;
    ensure!(
        host["calls"] == json!(["context.get", "theme.get", "state.set"]),
        "{host}"
    );
    ensure!(
        host["reported"]["results"] == probed.probe["results"],
        "the host got {host}, the panel has {dump}"
    );
    ensure!(shot.exists(), "no screenshot at {}", shot.display());
    Ok(())
}

/// One thing the policy forbids: the probe that tries it, the directive that refuses it, what
/// the browser's console names, and the violation event's directive and blocked URL (the
/// browser may cut a cross-origin URL to its origin).
struct Refusal {
    probe: &'static str,
    directive: &'static str,
    names: String,
    violation: &'static str,
    attempted: String,
}

fn refusal(
    probe: &'static str,
    directive: &'static str,
    names: impl Into<String>,
    violation: &'static str,
    attempted: impl Into<String>,
) -> Refusal {
    Refusal {
        probe,
        directive,
        names: names.into(),
        violation,
        attempted: attempted.into(),
    }
}

async fn a_framed_panel_is_refused_what_the_policy_forbids(ns: Ns) -> anyhow::Result<()> {
    let world = ProbeWorld::start(&ns).await?;
    let (_page, probed) = world.load_framed().await?;
    let dump = probed.dump();
    let other = world.stand_in.url.as_str();
    let own = &world.bundle;
    let rows = [
        refusal(
            "inline script",
            "script-src",
            "Executing inline script",
            "script-src-elem",
            "inline",
        ),
        refusal(
            "inline handler",
            "script-src",
            "Executing inline event handler",
            "script-src-attr",
            "inline",
        ),
        refusal(
            "eval",
            "script-src",
            "EvalError: Evaluating a string as JavaScript",
            "script-src",
            "eval",
        ),
        refusal(
            "other script",
            "script-src",
            format!("'{other}/other.js'"),
            "script-src-elem",
            format!("{other}/other.js"),
        ),
        refusal(
            "inline style",
            "style-src",
            "Applying inline style",
            "style-src-elem",
            "inline",
        ),
        refusal(
            "other image",
            "img-src",
            format!("'{other}/other.svg'"),
            "img-src",
            format!("{other}/other.svg"),
        ),
        refusal(
            "other font",
            "font-src",
            format!("'{other}/font.woff2'"),
            "font-src",
            format!("{other}/font.woff2"),
        ),
        refusal(
            "other media",
            "media-src",
            format!("'{other}/sound.wav'"),
            "media-src",
            format!("{other}/sound.wav"),
        ),
        refusal(
            "peer fetch",
            "connect-src",
            format!("'{}'", world.peer),
            "connect-src",
            world.peer.clone(),
        ),
        refusal(
            "host api fetch",
            "connect-src",
            format!("'{}'", world.api),
            "connect-src",
            world.api.clone(),
        ),
        refusal(
            "nested frame",
            "frame-src",
            format!("Framing '{}", world.host.url),
            "frame-src",
            format!("{own}probe/index.html?nested=1"),
        ),
        refusal(
            "worker",
            "worker-src",
            "Creating a worker from 'blob:",
            "worker-src",
            "blob",
        ),
        refusal(
            "object",
            "object-src",
            format!("'{own}probe/dot.svg'"),
            "object-src",
            format!("{own}probe/dot.svg"),
        ),
        refusal(
            "base element",
            "base-uri",
            "'http://base.invalid/'",
            "base-uri",
            "http://base.invalid/",
        ),
    ];
    for row in &rows {
        let what = format!("{} ({})", row.probe, row.directive);
        ensure!(
            probed.outcome(row.probe) == "blocked",
            "{what} was not blocked: {dump}"
        );
        ensure!(
            probed.refusal(&row.names, row.directive).is_some(),
            "{what}: the browser reported no refusal naming {}: {dump}",
            row.names
        );
        ensure!(
            probed
                .violations
                .iter()
                .any(|v| v.directive == row.violation
                    && !v.blocked.is_empty()
                    && row.attempted.starts_with(&v.blocked)),
            "{what}: no {} violation for {}: {dump}",
            row.violation,
            row.attempted
        );
    }
    // Nothing refused reached the other origin.
    let reached: Vec<String> = world
        .stand_in
        .requests()
        .into_iter()
        .filter(|r| !(r == "GET /" || r == "GET /host.js" || r == "GET /favicon.ico"))
        .collect();
    ensure!(
        reached.is_empty(),
        "the panel reached the other origin: {reached:?}"
    );

    // Every directive the served policy sets is shown at work: by a row here, or by the test
    // the module's table names.
    let elsewhere = ["sandbox", "default-src", "form-action", "child-src"];
    let served = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .get(format!("{own}probe/index.html"))
        .send()
        .await?;
    let policy = served
        .headers()
        .get("content-security-policy")
        .context("the panel's policy")?
        .to_str()?
        .to_string();
    for directive in policy
        .split(';')
        .filter_map(|d| d.split_whitespace().next())
    {
        ensure!(
            rows.iter().any(|r| r.directive == directive) || elsewhere.contains(&directive),
            "{directive} is in the policy but no browser test shows it: {policy}"
        );
    }
    Ok(())
}

async fn a_framed_panel_cannot_post_or_navigate_the_top(ns: Ns) -> anyhow::Result<()> {
    let world = ProbeWorld::start(&ns).await?;
    let (page, probed) = world.load_framed().await?;
    let dump = probed.dump();
    let other = world.stand_in.url.as_str();

    // The form post: the sandbox (the frame's and the policy's: no allow-forms) blocks it
    // before form-action is asked, and nothing reaches its target.
    ensure!(
        probed
            .report(&[
                &format!("Blocked form submission to '{other}/form-target'"),
                "sandboxed",
                "'allow-forms'",
            ])
            .is_some(),
        "no report of the blocked form post: {dump}"
    );
    ensure!(
        !world
            .stand_in
            .requests()
            .iter()
            .any(|r| r.contains("/form-target")),
        "the form post reached its target: {:?}",
        world.stand_in.requests()
    );

    // The top navigation: the sandbox (no allow-top-navigation) refuses it with a
    // SecurityError; the console stays where it was and its frame loaded once.
    ensure!(
        probed.outcome("top navigation") == "blocked"
            && probed.detail("top navigation").starts_with("SecurityError"),
        "{dump}"
    );
    ensure!(
        probed
            .report(&[
                "Unsafe attempt to initiate navigation",
                "sandboxed",
                "'allow-top-navigation'"
            ])
            .is_some(),
        "no report of the refused top navigation: {dump}"
    );
    let top = page.evaluate("[location.href, window.host.loads]").await?;
    ensure!(
        top == json!([format!("{other}/"), 1]),
        "the console moved: {top}"
    );

    // The opaque origin: no storage, no cookies.
    for probe in ["storage", "cookie"] {
        ensure!(
            probed.outcome(probe) == "blocked" && probed.detail(probe) == "SecurityError",
            "{probe}: {dump}"
        );
    }
    Ok(())
}

async fn the_panel_alone_in_a_tab(ns: Ns) -> anyhow::Result<()> {
    let world = ProbeWorld::start(&ns).await?;
    let (page, probed) = world.load_alone().await?;
    let dump = probed.dump();
    // No frame's sandbox attribute here: the header's `sandbox allow-scripts` alone lets its
    // scripts run, gives it an opaque origin and blocks its form.
    let ran = page.evaluate("[window.appRan, self.origin]").await?;
    ensure!(ran == json!([true, "null"]), "{ran}: {dump}");
    ensure!(probed.outcome("storage") == "blocked", "{dump}");
    ensure!(
        probed
            .report(&["Blocked form submission", "sandboxed", "'allow-forms'"])
            .is_some(),
        "{dump}"
    );
    // And the policy's refusals are the same as framed.
    ensure!(
        probed
            .refusal("Executing inline script", "script-src")
            .is_some()
            && probed
                .refusal(&format!("'{}'", world.api), "connect-src")
                .is_some(),
        "{dump}"
    );
    Ok(())
}

async fn without_the_sandbox(ns: Ns) -> anyhow::Result<()> {
    let world = ProbeWorld::start(&ns).await?;
    let stand_in = &world.stand_in;
    let page = world.browser.new_page().await?;
    let url = stand_in.unsandboxed();
    page.navigate(&url).await?;
    let frame = page
        .wait_for_frame(
            &format!("{}/unsandboxed/", stand_in.url),
            Duration::from_secs(30),
        )
        .await?;
    // A page with an origin of its own fetches its manifest when asked: default-src 'none'
    // (no manifest-src) refuses it.
    page.command("Page.getAppManifest", json!({})).await?;
    let probed = crate::browser_support::probed(&page, &frame).await?;
    let dump = probed.dump();
    ensure!(probed.outcome("origin") == "own", "not unsandboxed: {dump}");
    let manifest = format!("{}/unsandboxed/probe/manifest.json", stand_in.url);
    page.wait_for_console("the manifest's refusal", Duration::from_secs(10), |e| {
        e.text.contains(&format!("'{manifest}'")) && e.text.contains("default-src 'none'")
    })
    .await?;
    let probed = Probed {
        console: page.console(),
        ..probed
    };
    ensure!(
        probed.violated("manifest-src", &manifest),
        "no manifest-src violation: {}",
        probed.dump()
    );
    // The form post: with no sandbox to block it, form-action 'none' does.
    let target = format!("{}/form-target", stand_in.url);
    ensure!(
        probed
            .refusal(&format!("'{target}'"), "form-action")
            .is_some()
            && probed.violated("form-action", &target),
        "the form post was not refused by form-action: {dump}"
    );
    let posted: Vec<String> = stand_in
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("POST"))
        .collect();
    ensure!(posted.is_empty(), "the form post went out: {posted:?}");
    let still = frame.evaluate("location.pathname").await?;
    ensure!(still == "/unsandboxed/probe/index.html", "{still}");
    Ok(())
}
