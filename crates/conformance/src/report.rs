//! What a check found: one finding per call, as text (one line each, then a summary) or as
//! JSON for CI. A finding passes; fails, naming the sentence of the reference the plugin broke
//! ([`Breach`]); warns, when the plugin meets the reference but not a stricter convention of
//! this host (shown and counted, never a failure); or was skipped, with why.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::reference::Rule;

/// The part of the contract a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Area {
    /// Admission's stages on the image (`conformance IMAGE`).
    Admission,
    Health,
    Secret,
    Actions,
    Tools,
    Runs,
    Events,
    Switches,
    Errors,
    /// The plugin's own calls to the Plugin API (played by the SDK's fake host).
    Api,
    /// Its panels and cards drawn in Chromium (`--bundle`).
    Ui,
}

impl Area {
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Admission => "admission",
            Area::Health => "health",
            Area::Secret => "secret",
            Area::Actions => "actions",
            Area::Tools => "tools",
            Area::Runs => "runs",
            Area::Events => "events",
            Area::Switches => "switches",
            Area::Errors => "errors",
            Area::Api => "api",
            Area::Ui => "ui",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "why", rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    /// The plugin broke a sentence of the reference: the check fails (exit 1).
    Fail(Breach),
    /// Within the reference, but not what this host asks (its contract's stricter
    /// conventions, `openapi/plugin-contract-v1.yaml`): said and counted, not a failure.
    Warn(String),
    /// Not checked, and why (not a problem, but the author should know).
    Skip(String),
}

impl Outcome {
    /// A failure: what was seen, and the sentence of the reference it breaks.
    pub fn fail(why: impl Into<String>, rule: Rule) -> Outcome {
        Outcome::Fail(Breach::new(why, rule))
    }
}

/// What broke the reference, and the sentence it broke: there is no failure without one.
/// Written (and serialized) as `<why>; the reference: "<sentence>"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breach {
    why: String,
    rule: Rule,
}

impl Breach {
    pub fn new(why: impl Into<String>, rule: Rule) -> Breach {
        Breach {
            why: why.into(),
            rule,
        }
    }

    /// What was seen.
    pub fn why(&self) -> &str {
        &self.why
    }

    /// The sentence it breaks.
    pub fn rule(&self) -> Rule {
        self.rule
    }
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.why, self.rule)
    }
}

impl Serialize for Breach {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub area: Area,
    /// What the call tried: `trigger schedule`, `no secret`.
    pub what: String,
    /// Where: `POST /actions/ping`.
    pub at: String,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Finding {
    /// `FAIL actions POST /actions/ping (trigger schedule): answered 200, ...`.
    pub fn line(&self) -> String {
        let head = format!("{} {} ({})", self.area.as_str(), self.at, self.what);
        match &self.outcome {
            Outcome::Pass => format!("PASS {head}"),
            Outcome::Fail(breach) => format!("FAIL {head}: {breach}"),
            Outcome::Warn(why) => format!("WARN {head}: {why}"),
            Outcome::Skip(why) => format!("SKIP {head}: {why}"),
        }
    }
}

/// Every finding of one check, in the order the calls were made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// `echo 0.1.0`.
    pub plugin: String,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| matches!(f.outcome, Outcome::Fail(_)))
    }

    /// Whether nothing failed: warnings and skips do not count against it.
    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// `echo 0.1.0: 40 checks, 36 passed, 2 warned, 1 failed, 1 skipped`.
    pub fn summary(&self) -> String {
        let count =
            |f: fn(&Outcome) -> bool| self.findings.iter().filter(|x| f(&x.outcome)).count();
        format!(
            "{}: {} checks, {} passed, {} warned, {} failed, {} skipped",
            self.plugin,
            self.findings.len(),
            count(|o| matches!(o, Outcome::Pass)),
            count(|o| matches!(o, Outcome::Warn(_))),
            count(|o| matches!(o, Outcome::Fail(_))),
            count(|o| matches!(o, Outcome::Skip(_))),
        )
    }

    /// One line per finding, then the summary.
    pub fn text(&self) -> String {
        let mut out: String = self.findings.iter().map(|f| f.line() + "\n").collect();
        out.push_str(&self.summary());
        out.push('\n');
        out
    }

    /// `{"plugin", "passed", "summary", "findings": [{area, what, at, outcome, why?}]}`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "plugin": self.plugin,
            "passed": self.passed(),
            "summary": self.summary(),
            "findings": self.findings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference;

    fn finding(outcome: Outcome) -> Finding {
        Finding {
            area: Area::Actions,
            what: "trigger manual".into(),
            at: "POST /actions/ping".into(),
            outcome,
        }
    }

    #[test]
    fn lines_say_where_and_why() {
        let report = Report {
            plugin: "echo 0.1.0".into(),
            findings: vec![
                finding(Outcome::Pass),
                finding(Outcome::fail("answered 404", reference::CHECK)),
                finding(Outcome::Warn("answered 200, not 202".into())),
                finding(Outcome::Skip("no input".into())),
            ],
        };
        let quoted = format!("the reference: \"{}\"", reference::CHECK.text);
        assert_eq!(
            report.text(),
            format!(
                "PASS actions POST /actions/ping (trigger manual)\n\
                 FAIL actions POST /actions/ping (trigger manual): answered 404; {quoted}\n\
                 WARN actions POST /actions/ping (trigger manual): answered 200, not 202\n\
                 SKIP actions POST /actions/ping (trigger manual): no input\n\
                 echo 0.1.0: 4 checks, 1 passed, 1 warned, 1 failed, 1 skipped\n"
            )
        );
        assert!(!report.passed());
        let json = report.json();
        assert_eq!(json["passed"], false);
        assert_eq!(json["findings"][1]["outcome"], "fail");
        assert_eq!(
            json["findings"][1]["why"],
            format!("answered 404; {quoted}")
        );
        assert_eq!(json["findings"][2]["outcome"], "warn");
        assert_eq!(json["findings"][0]["area"], "actions");
    }

    #[test]
    fn warnings_are_counted_but_pass() {
        let report = Report {
            plugin: "echo 0.1.0".into(),
            findings: vec![
                finding(Outcome::Pass),
                finding(Outcome::Warn("answered 404, not 401".into())),
            ],
        };
        assert!(report.passed());
        assert_eq!(report.json()["passed"], true);
        assert!(
            report
                .summary()
                .ends_with(": 2 checks, 1 passed, 1 warned, 0 failed, 0 skipped")
        );
    }
}
