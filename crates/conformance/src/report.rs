//! What a check found: one finding per call (pass, fail with why, or skipped with why), as
//! text (one line each, then a summary) or as JSON for CI.

use serde::Serialize;

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
    Fail(String),
    /// Not checked, and why (not a problem, but the author should know).
    Skip(String),
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
            Outcome::Fail(why) => format!("FAIL {head}: {why}"),
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

    pub fn passed(&self) -> bool {
        self.failures().next().is_none()
    }

    /// `echo 0.1.0: 40 checks, 38 passed, 1 failed, 1 skipped`.
    pub fn summary(&self) -> String {
        let count =
            |f: fn(&Outcome) -> bool| self.findings.iter().filter(|x| f(&x.outcome)).count();
        format!(
            "{}: {} checks, {} passed, {} failed, {} skipped",
            self.plugin,
            self.findings.len(),
            count(|o| matches!(o, Outcome::Pass)),
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
                finding(Outcome::Fail("answered 200".into())),
                finding(Outcome::Skip("no input".into())),
            ],
        };
        assert_eq!(
            report.text(),
            "PASS actions POST /actions/ping (trigger manual)\n\
             FAIL actions POST /actions/ping (trigger manual): answered 200\n\
             SKIP actions POST /actions/ping (trigger manual): no input\n\
             echo 0.1.0: 3 checks, 1 passed, 1 failed, 1 skipped\n"
        );
        assert!(!report.passed());
        let json = report.json();
        assert_eq!(json["passed"], false);
        assert_eq!(json["findings"][1]["outcome"], "fail");
        assert_eq!(json["findings"][1]["why"], "answered 200");
        assert_eq!(json["findings"][0]["area"], "actions");
    }
}
