//! `loop-plugins conformance --bundle DIR`: each panel and card of the manifest drawn in
//! headless Chromium the way the host draws it (the reference's `CheckUI`), and what went
//! wrong reported, one finding per problem.
//!
//! - [`stand_in`]: thin, a loopback server in the host's place: the bundle's files with the
//!   API server's headers (`ui_policy`, the same function), a console page per panel or card
//!   that frames it sandboxed and answers its bridge with the console's own code, and the
//!   plugin's `/x` for `api.request`;
//! - [`pages`]: pure, the pages to draw, and what was seen of one turned into findings (its
//!   module doc has the table);
//! - here: the browser (`crates/browser`), one tab per page: load the console page, wait up
//!   to [`PAGE_LIMIT`] for the frame to load and make its first call over the bridge's port,
//!   then until it has been quiet for [`QUIET`] (at most [`SETTLE_MAX`]), and read what the
//!   browser reported (the policy's refusals, uncaught errors), the files the stand-in did not
//!   have, and the bridge calls answered with an error.
//!
//! Each problem fails, quoting the reference's list of what `CheckUI` reports
//! ([`crate::reference::CHECK_UI`]). With [`Options::no_bridge`] (the reference's
//! `NoBridge`, "NoBridge skips the bridge") the host posts no port and a page is judged once
//! its frame has loaded: one that draws without the bridge passes.
//!
//! Where no Chromium is found the check is one skip that says so: not a failure.

pub mod pages;
pub mod stand_in;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::SetupError;
use crate::report::{Area, Finding, Outcome};
use pages::{HostSeen, Kind, Page, Seen};
use stand_in::{PluginAt, StandIn};

/// How long a page has to load and take the bridge's port (the reference's
/// `UIOptions.Timeout`).
pub const PAGE_LIMIT: Duration = Duration::from_secs(10);
/// A page is done once nothing new happened for this long...
pub const QUIET: Duration = Duration::from_millis(500);
/// ...or after this long past its first call.
pub const SETTLE_MAX: Duration = Duration::from_secs(5);

/// What the UI check needs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The plugin's UI bundle: the folder that is `/loop-plugin/ui` in its image.
    pub bundle: PathBuf,
    /// The Chromium (or Chrome) binary.
    pub chromium: PathBuf,
    /// The reference's `NoBridge`: no `loop-plugin:init` port is posted to the page, and a
    /// page is not asked to take one (for pages that draw without the bridge).
    pub no_bridge: bool,
}

impl Options {
    /// The bundle drawn with `chromium`, the bridge offered to each page.
    pub fn new(bundle: PathBuf, chromium: PathBuf) -> Self {
        Self {
            bundle,
            chromium,
            no_bridge: false,
        }
    }
}

/// Draws each panel and card of `manifest` from `options.bundle`; `plugin` is where the
/// pages' `api.request` goes. The findings are the UI area's, to add to a report.
pub async fn check(
    options: &Options,
    manifest: &manifest::Manifest,
    plugin: Option<PluginAt>,
) -> Result<Vec<Finding>, SetupError> {
    let pages = pages::pages(manifest);
    if pages.is_empty() {
        return Ok(vec![skip(
            "manifest",
            "the manifest declares no panel or card".into(),
        )]);
    }
    if !options.bundle.is_dir() {
        return Err(SetupError::Bundle(options.bundle.clone()));
    }
    if !options.chromium.is_file() {
        return Ok(vec![skip(
            "chromium",
            format!(
                "no Chromium at {}: panels and cards not drawn (give --chromium PATH)",
                options.chromium.display()
            ),
        )]);
    }
    let with_context: Vec<(Page, Value)> = pages
        .iter()
        .map(|page| (page.clone(), context(manifest, page)))
        .collect();
    let bridge = !options.no_bridge;
    let stand_in = StandIn::start(
        &options.bundle,
        &with_context,
        &settings(manifest),
        bridge,
        plugin,
    )
    .await
    .map_err(|e| SetupError::Browser(format!("serving the bundle: {e}")))?;
    let dir = tempfile::tempdir().map_err(|source| SetupError::Read {
        path: std::env::temp_dir(),
        source,
    })?;
    let browser =
        browser::Browser::launch_binary(&options.chromium, dir.path().join("chromium.log"))
            .await
            .map_err(|e| SetupError::Browser(e.to_string()))?;
    let mut findings = Vec::new();
    for page in &pages {
        findings.extend(draw(&browser, &stand_in, page, bridge).await?);
    }
    Ok(findings)
}

/// One page in a tab of its own; with `bridge`, offered the bridge's port and waited for until
/// it takes it, else waited for until its frame loads.
async fn draw(
    browser: &browser::Browser,
    stand_in: &StandIn,
    page: &Page,
    bridge: bool,
) -> Result<Vec<Finding>, SetupError> {
    let broken = |e: browser::BrowserError| SetupError::Browser(e.to_string());
    let tab = browser.new_page().await.map_err(broken)?;
    // The console page's load waits for its frame's; a frame that never loads is the
    // judge's to report, so the navigation's own wait is not trusted to end.
    let _ = tokio::time::timeout(PAGE_LIMIT, tab.navigate(&stand_in.host_url(page))).await;
    let seen = || async {
        let value = tab
            .evaluate("window.conformance ?? null")
            .await
            .unwrap_or(Value::Null);
        serde_json::from_value::<HostSeen>(value).unwrap_or_default()
    };
    let start = Instant::now();
    let ready = |seen: &HostSeen| if bridge { seen.took } else { seen.loaded };
    while start.elapsed() < PAGE_LIMIT && !ready(&seen().await) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Then until nothing new happens: no call in flight, no new call, no new report.
    let settled = Instant::now();
    let mut last = (usize::MAX, usize::MAX);
    let mut quiet_since = Instant::now();
    while settled.elapsed() < SETTLE_MAX {
        let value = tab
            .evaluate("window.conformance ?? null")
            .await
            .unwrap_or(Value::Null);
        let now = (
            value["calls"].as_array().map_or(0, Vec::len) + tab.console().len(),
            value["pending"].as_u64().unwrap_or(0) as usize,
        );
        if now != last || now.1 > 0 {
            last = now;
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= QUIET {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let host = seen().await;
    let console = tab.console();
    let missing = stand_in.missing(page);
    let bundle_url = stand_in.bundle_url(page);
    Ok(pages::judge(&Seen {
        page,
        bundle_url: &bundle_url,
        host: &host,
        console: &console,
        missing: &missing,
        limit: PAGE_LIMIT,
        bridge,
    }))
}

/// What `context.get` answers the page: a channel named `conformance`, the plugin, the panel
/// (or the card, with a posted card's `entry` and empty `data`).
fn context(manifest: &manifest::Manifest, page: &Page) -> Value {
    let mut context = json!({
        "namespace": "conformance",
        "chat": "conformance",
        "kind": "channel",
        "plugin": manifest.id,
    });
    match page.kind {
        Kind::Panel => context["panel"] = json!(page.id),
        Kind::Card => {
            context["card"] = json!(page.id);
            context["entry"] = json!("card-conformance");
            context["data"] = json!({});
        }
    }
    context
}

/// What `settings.get` answers: each setting's manifest default (secret ones left out, as no
/// page is given them).
fn settings(manifest: &manifest::Manifest) -> Value {
    let settings: serde_json::Map<String, Value> = manifest
        .setting_schemas()
        .filter(|(name, _)| !manifest.is_secret_setting(name))
        .filter_map(|(name, schema)| Some((name.to_string(), schema.get("default")?.clone())))
        .collect();
    Value::Object(settings)
}

fn skip(what: &str, why: String) -> Finding {
    Finding {
        area: Area::Ui,
        what: what.into(),
        at: "panels and cards".into(),
        outcome: Outcome::Skip(why),
    }
}

/// The Chromium `--chromium` names, else the one [`browser::find`] names
/// (`$LOOP_PLUGINS_CHROMIUM`, else `/usr/bin/chromium`).
pub fn chromium(given: Option<&Path>) -> PathBuf {
    given.map(Path::to_path_buf).unwrap_or_else(browser::find)
}
