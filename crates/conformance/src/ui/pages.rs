//! Pure: the pages to draw (each panel and card the manifest declares) and what the browser
//! and the stand-in saw of one page turned into findings, one per problem.
//!
//! | what was seen                                             | finding (`what`)        |
//! |-----------------------------------------------------------|-------------------------|
//! | the browser's refusal by the policy or the sandbox        | `blocked by the policy` |
//! | an uncaught exception or unhandled rejection              | `uncaught error`        |
//! | a request for a file the bundle does not have             | `file`                  |
//! | a bridge call the host answered with an error             | `bridge call`           |
//! | the frame never loaded                                    | `load`                  |
//! | no call over the bridge's port within the time limit (unless `NoBridge`) | `bridge port` |
//! | none of the above                                         | a pass: `drawn`         |
//!
//! Each problem is one of those the reference's `CheckUI` returns, and its line quotes them
//! ([`crate::reference::CHECK_UI`]).

use std::collections::BTreeSet;
use std::time::Duration;

use browser::ConsoleEntry;
use serde::Deserialize;

use crate::reference;
use crate::report::{Area, Finding, Outcome};

/// A panel or a card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Panel,
    Card,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Panel => "panel",
            Kind::Card => "card",
        }
    }
}

/// One page to draw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub kind: Kind,
    pub id: String,
    /// As the manifest says it: `ui/main/index.html`.
    pub entry: String,
}

impl Page {
    /// The link segment the stand-in serves it under: one per page, so each page's bundle
    /// prefix (the only source its policy names) and missing files are its own.
    pub fn link(&self) -> String {
        format!("{}-{}", self.kind.as_str(), self.id)
    }

    /// The entry's path inside the bundle (`/loop-plugin/ui/`): `main/index.html`.
    pub fn path(&self) -> &str {
        self.entry.strip_prefix("ui/").unwrap_or(&self.entry)
    }

    /// `panel main`.
    pub fn name(&self) -> String {
        format!("{} {}", self.kind.as_str(), self.id)
    }
}

/// Each panel, then each card, of the manifest.
pub fn pages(manifest: &manifest::Manifest) -> Vec<Page> {
    let panels = manifest.ui.panels.iter().map(|p| Page {
        kind: Kind::Panel,
        id: p.id.clone(),
        entry: p.entry.clone(),
    });
    let cards = manifest.ui.cards.iter().map(|c| Page {
        kind: Kind::Card,
        id: c.id.clone(),
        entry: c.entry.clone(),
    });
    panels.chain(cards).collect()
}

/// What the stand-in console's page kept (`window.conformance`, host.js).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct HostSeen {
    pub loaded: bool,
    pub took: bool,
    #[serde(default)]
    pub calls: Vec<String>,
    #[serde(default)]
    pub failed: Vec<FailedCall>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct FailedCall {
    pub method: String,
    pub code: i64,
    pub message: String,
}

/// Everything seen of one page.
pub struct Seen<'a> {
    pub page: &'a Page,
    /// `http://127.0.0.1:<port>/ui/v1/<link>/`: the bundle's prefix the policy names.
    pub bundle_url: &'a str,
    pub host: &'a HostSeen,
    pub console: &'a [ConsoleEntry],
    /// Paths in the bundle the page asked for and the bundle does not have.
    pub missing: &'a [String],
    /// How long the page had to load and take the port.
    pub limit: Duration,
    /// Whether the host offered the bridge (no `NoBridge`): then the page must take its port.
    pub bridge: bool,
}

/// One finding per problem seen, in the order: load, port, files, policy, errors, calls; a
/// pass when there is none. Repeated reports (the same text twice) count once.
pub fn judge(seen: &Seen<'_>) -> Vec<Finding> {
    let page = seen.page;
    let entry = format!("{} {}", page.name(), page.entry);
    let fail = |at: String, what: &str, why: String| Finding {
        area: Area::Ui,
        what: what.to_string(),
        at,
        outcome: Outcome::fail(why, reference::CHECK_UI),
    };
    let mut found = Vec::new();
    if !seen.host.loaded {
        found.push(fail(
            entry.clone(),
            "load",
            format!("the frame did not load within {:?}", seen.limit),
        ));
    } else if seen.bridge && !seen.host.took {
        found.push(fail(
            entry.clone(),
            "bridge port",
            format!(
                "no call over the bridge's port within {:?}: the page never took the port the \
                 host posted with loop-plugin:init",
                seen.limit
            ),
        ));
    }
    for path in seen.missing {
        found.push(fail(
            format!("{} ui/{path}", page.name()),
            "file",
            "answered 404: the page asked for it and the bundle has no such file".into(),
        ));
    }
    let mut told = BTreeSet::new();
    for entry in seen.console {
        let Some((what, text)) = problem(entry) else {
            continue;
        };
        let text = text.replace(seen.bundle_url, "<bundle>/");
        let at = match entry
            .url
            .as_deref()
            .and_then(|u| u.strip_prefix(seen.bundle_url))
        {
            Some(path) if !path.is_empty() => format!("{} ui/{path}", page.name()),
            _ => page.name(),
        };
        if told.insert((at.clone(), text.clone())) {
            found.push(fail(at, what, text));
        }
    }
    for call in &seen.host.failed {
        found.push(fail(
            page.name(),
            "bridge call",
            format!(
                "{} answered error {}: {}",
                call.method, call.code, call.message
            ),
        ));
    }
    if found.is_empty() {
        found.push(Finding {
            area: Area::Ui,
            what: "drawn".into(),
            at: entry,
            outcome: Outcome::Pass,
        });
    }
    found
}

/// A report of the browser's that is a problem: what kind, and its text (the first line; for
/// a policy's refusal, its first sentence, which names the directive).
fn problem(entry: &ConsoleEntry) -> Option<(&'static str, String)> {
    let first = entry.text.lines().next().unwrap_or("").trim().to_string();
    if entry.source == "exception" {
        return Some(("uncaught error", first));
    }
    // Files are the stand-in's to report (with their path), not the network log's.
    if entry.source == "network" || entry.source == "console-api" {
        return None;
    }
    let refused = entry.text.contains("Content Security Policy")
        || entry.text.starts_with("Blocked ")
        || entry.source == "security";
    if refused && entry.level == "error" {
        let sentence = match first.find(". ") {
            Some(end) => first[..=end].to_string(),
            None => first,
        };
        return Some(("blocked by the policy", sentence));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUNDLE: &str = "http://127.0.0.1:1/ui/v1/panel-main/";

    fn page() -> Page {
        Page {
            kind: Kind::Panel,
            id: "main".into(),
            entry: "ui/main/index.html".into(),
        }
    }

    fn entry(source: &str, level: &str, text: &str, url: Option<&str>) -> ConsoleEntry {
        ConsoleEntry {
            source: source.into(),
            level: level.into(),
            text: text.into(),
            url: url.map(str::to_string),
        }
    }

    fn judged(
        host: HostSeen,
        console: &[ConsoleEntry],
        missing: &[String],
        bridge: bool,
    ) -> Vec<String> {
        let page = page();
        let suffix = format!("; {}", reference::CHECK_UI);
        judge(&Seen {
            page: &page,
            bundle_url: BUNDLE,
            host: &host,
            console,
            missing,
            limit: Duration::from_secs(10),
            bridge,
        })
        .iter()
        .map(|f| {
            let line = f.line();
            if line.starts_with("FAIL ") {
                // Every problem quotes what the reference's CheckUI returns.
                line.strip_suffix(&suffix)
                    .unwrap_or_else(|| panic!("{line}: no quote"))
                    .to_string()
            } else {
                line
            }
        })
        .collect()
    }

    /// The lines of what was seen (the suffix quoting the reference taken off each failure).
    fn lines(host: HostSeen, console: &[ConsoleEntry], missing: &[String]) -> Vec<String> {
        judged(host, console, missing, true)
    }

    fn connected() -> HostSeen {
        HostSeen {
            loaded: true,
            took: true,
            calls: vec!["context.get".into()],
            failed: vec![],
        }
    }

    #[test]
    fn a_page_that_connects_and_reports_nothing_passes() {
        let noise = [
            entry("console-api", "error", "the page's own log", None),
            entry("network", "error", "Failed to load resource", None),
        ];
        assert_eq!(
            lines(connected(), &noise, &[]),
            ["PASS ui panel main ui/main/index.html (drawn)"]
        );
    }

    #[test]
    fn each_problem_is_a_line_that_says_where() {
        let mut host = connected();
        host.failed.push(FailedCall {
            method: "context.gett".into(),
            code: -32601,
            message: "no method context.gett".into(),
        });
        let csp = format!(
            "Executing inline script violates the following Content Security Policy directive \
             'script-src {BUNDLE}'. Either the 'unsafe-inline' keyword ... is required."
        );
        let console = [
            entry(
                "security",
                "error",
                &csp,
                Some(&format!("{BUNDLE}main/index.html")),
            ),
            entry(
                "security",
                "error",
                &csp,
                Some(&format!("{BUNDLE}main/index.html")),
            ),
            entry(
                "exception",
                "error",
                "Error: boom\n    at app.js:1:7",
                Some(&format!("{BUNDLE}main/app.js")),
            ),
        ];
        assert_eq!(
            lines(host, &console, &["main/gone.js".into()]),
            [
                "FAIL ui panel main ui/main/gone.js (file): answered 404: the page asked for it \
                 and the bundle has no such file",
                "FAIL ui panel main ui/main/index.html (blocked by the policy): Executing inline \
                 script violates the following Content Security Policy directive 'script-src \
                 <bundle>/'.",
                "FAIL ui panel main ui/main/app.js (uncaught error): Error: boom",
                "FAIL ui panel main (bridge call): context.gett answered error -32601: no method \
                 context.gett",
            ]
        );
    }

    #[test]
    fn a_page_that_never_calls_never_took_the_port() {
        let host = HostSeen {
            loaded: true,
            ..HostSeen::default()
        };
        let got = lines(host, &[], &[]);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("FAIL ui panel main ui/main/index.html (bridge port): no call"),
            "{got:?}"
        );
    }

    #[test]
    fn without_the_bridge_a_loaded_page_passes_without_taking_a_port() {
        let loaded = HostSeen {
            loaded: true,
            ..HostSeen::default()
        };
        assert_eq!(
            judged(loaded, &[], &[], false),
            ["PASS ui panel main ui/main/index.html (drawn)"]
        );
        // It still has to load.
        assert_eq!(
            judged(HostSeen::default(), &[], &[], false),
            ["FAIL ui panel main ui/main/index.html (load): the frame did not load within 10s"]
        );
    }

    #[test]
    fn a_frame_that_never_loaded_says_so_once() {
        let got = lines(HostSeen::default(), &[], &[]);
        assert_eq!(
            got,
            ["FAIL ui panel main ui/main/index.html (load): the frame did not load within 10s"]
        );
    }

    #[test]
    fn pages_are_the_panels_then_the_cards_under_their_own_links() {
        let m = manifest::parse_str(
            r#"{"id": "pages", "name": "P", "version": "1.0.0", "api": "1",
                "capabilities": ["ui.panel", "ui.notification.card"],
                "ui": {"panels": [{"id": "main", "label": "M", "entry": "ui/main/index.html"}],
                       "cards": [{"id": "score", "entry": "ui/score.html"}]}}"#,
        )
        .unwrap();
        let pages = pages(&m);
        assert_eq!(pages.len(), 2);
        assert_eq!(
            (pages[0].link(), pages[0].path()),
            ("panel-main".into(), "main/index.html")
        );
        assert_eq!(
            (pages[1].link(), pages[1].path()),
            ("card-score".into(), "score.html")
        );
    }
}
