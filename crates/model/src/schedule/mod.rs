//! Schedules of scheduled actions: a 5-field cron expression or an interval, and the 5-field
//! expression a Kubernetes CronJob runs for it.
//!
//! Cron expressions follow the standard 5-field syntax Kubernetes CronJobs use (minute, hour,
//! day of month, month, day of week; `*`, `?`, lists, ranges, steps, and JAN-DEC / SUN-SAT
//! names; day of week 0-6 with Sunday 0). The `cron` crate is not used to check them: it wants
//! a seconds field and numbers days of the week 1-7, so it would refuse `0 9 * * 0` and read
//! `1-5` differently than the CronJob will.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub mod ticks;

pub use ticks::{AnchoredInterval, Cadence, Due, Timing};

/// How a schedule's expression reads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleType {
    Cron,
    Interval,
}

/// A parsed, valid schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// A 5-field cron expression.
    Cron(CronExpr),
    /// Every so long (non-zero).
    Interval(Duration),
}

/// A valid 5-field cron expression, its fields joined by single spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronExpr(String);

impl CronExpr {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a schedule was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the {kind} schedule is empty")]
    Empty { kind: &'static str },
    #[error(
        "cron \"{expr}\" has {found} field(s); a cron schedule has exactly 5: minute, hour, day of month, month, day of week"
    )]
    CronFieldCount { expr: String, found: usize },
    #[error("cron \"{expr}\": {field} field \"{value}\": {reason}")]
    CronField {
        expr: String,
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("interval \"{expr}\": {reason}")]
    Interval { expr: String, reason: String },
    #[error("interval \"{expr}\" cannot run as a Kubernetes CronJob: {reason}")]
    NotCronExpressible { expr: String, reason: String },
}

/// Parses a schedule of the given type.
pub fn parse(kind: ScheduleType, expr: &str) -> Result<Schedule, ScheduleError> {
    match kind {
        ScheduleType::Cron => parse_cron(expr).map(Schedule::Cron),
        ScheduleType::Interval => parse_interval(expr).map(Schedule::Interval),
    }
}

impl Schedule {
    /// The schedule's type.
    pub fn kind(&self) -> ScheduleType {
        match self {
            Schedule::Cron(_) => ScheduleType::Cron,
            Schedule::Interval(_) => ScheduleType::Interval,
        }
    }

    /// How a CronJob runs it: every interval runs, some on every tick, the others on the
    /// ticks that complete one (see [`Cadence::of`]).
    pub fn cadence(&self) -> Cadence {
        Cadence::of(self)
    }

    /// The 5-field cron expression a Kubernetes CronJob runs for this schedule. An interval
    /// that cron cannot express exactly (7m, 90m, 2h30m, 45s, 5h, 48h) is refused.
    pub fn to_cron(&self) -> Result<String, ScheduleError> {
        match self {
            Schedule::Cron(c) => Ok(c.0.clone()),
            Schedule::Interval(d) => interval_to_cron(*d),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Cron(c) => write!(f, "cron {c}"),
            Schedule::Interval(d) => write!(f, "every {}", format_interval(*d)),
        }
    }
}

/// Writes a duration the way intervals are written: `2h30m`, `5m`, `45s`.
pub fn format_interval(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Parses an interval: `([0-9]+h)?([0-9]+m)?([0-9]+s)?`, not empty and not zero.
pub fn parse_interval(expr: &str) -> Result<Duration, ScheduleError> {
    let err = |reason: &str| ScheduleError::Interval {
        expr: expr.to_string(),
        reason: reason.to_string(),
    };
    if expr.trim().is_empty() {
        return Err(ScheduleError::Empty { kind: "interval" });
    }
    const FORM: &str =
        "an interval is hours, minutes and seconds in that order, such as 5m, 1h or 2h30m";
    let mut total: u64 = 0;
    let mut digits = String::new();
    // Units must come in order h, m, s, each at most once.
    let mut next_unit = 0;
    for c in expr.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let (rank, secs) = match c {
            'h' => (1, 3600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return Err(err(FORM)),
        };
        if digits.is_empty() || rank <= next_unit {
            return Err(err(FORM));
        }
        next_unit = rank;
        let n: u64 = digits.parse().map_err(|_| err("the number is too large"))?;
        digits.clear();
        total = n
            .checked_mul(secs)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| err("the interval is too long"))?;
    }
    if !digits.is_empty() {
        return Err(err(FORM));
    }
    if total == 0 {
        return Err(err("an interval must be longer than zero"));
    }
    Ok(Duration::from_secs(total))
}

fn interval_to_cron(d: Duration) -> Result<String, ScheduleError> {
    let expr = format_interval(d);
    let refuse = |reason: String| ScheduleError::NotCronExpressible {
        expr: expr.clone(),
        reason,
    };
    let secs = d.as_secs();
    if !secs.is_multiple_of(60) || d.subsec_nanos() != 0 {
        return Err(refuse(
            "cron runs at whole minutes, so an interval must be a whole number of minutes".into(),
        ));
    }
    let minutes = secs / 60;
    if minutes == 1 {
        return Ok("* * * * *".into());
    }
    if minutes < 60 {
        return if 60 % minutes == 0 {
            Ok(format!("*/{minutes} * * * *"))
        } else {
            Err(refuse(format!(
                "{minutes} minutes does not divide an hour; use one that does (1, 2, 3, 4, 5, 6, 10, 12, 15, 20 or 30 minutes)"
            )))
        };
    }
    if !minutes.is_multiple_of(60) {
        return Err(refuse(
            "an interval over an hour must be a whole number of hours".into(),
        ));
    }
    let hours = minutes / 60;
    match hours {
        1 => Ok("0 * * * *".into()),
        24 => Ok("0 0 * * *".into()),
        h if h < 24 && 24 % h == 0 => Ok(format!("0 */{h} * * *")),
        h if h < 24 => Err(refuse(format!(
            "{h} hours does not divide a day; use one that does (1, 2, 3, 4, 6, 8, 12 or 24 hours)"
        ))),
        _ => Err(refuse(
            "an interval longer than a day cannot be expressed exactly; use a cron schedule".into(),
        )),
    }
}

/// One of the five fields of a cron expression.
struct CronField {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const CRON_FIELDS: [CronField; 5] = [
    CronField {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    CronField {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    CronField {
        name: "day-of-month",
        min: 1,
        max: 31,
        names: &[],
    },
    CronField {
        name: "month",
        min: 1,
        max: 12,
        names: MONTHS,
    },
    CronField {
        name: "day-of-week",
        min: 0,
        max: 6,
        names: WEEKDAYS,
    },
];

/// Checks a 5-field cron expression and normalizes its spacing.
pub fn parse_cron(expr: &str) -> Result<CronExpr, ScheduleError> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.is_empty() {
        return Err(ScheduleError::Empty { kind: "cron" });
    }
    if fields.len() != 5 {
        return Err(ScheduleError::CronFieldCount {
            expr: expr.trim().to_string(),
            found: fields.len(),
        });
    }
    for (value, field) in fields.iter().zip(CRON_FIELDS.iter()) {
        check_cron_field(field, value).map_err(|reason| ScheduleError::CronField {
            expr: expr.trim().to_string(),
            field: field.name,
            value: (*value).to_string(),
            reason,
        })?;
    }
    Ok(CronExpr(fields.join(" ")))
}

fn check_cron_field(field: &CronField, value: &str) -> Result<(), String> {
    for part in value.split(',') {
        if part.is_empty() {
            return Err("a list has an empty item".into());
        }
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        if let Some(step) = step {
            let n: u32 = step
                .parse()
                .map_err(|_| format!("the step \"{step}\" is not a number"))?;
            if n == 0 {
                return Err("a step must be at least 1".into());
            }
        }
        if range == "*" || range == "?" {
            continue;
        }
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (cron_value(field, lo)?, Some(cron_value(field, hi)?)),
            None => (cron_value(field, range)?, None),
        };
        if let Some(hi) = hi
            && lo > hi
        {
            return Err(format!(
                "the range starts at {lo} and ends before it, at {hi}"
            ));
        }
    }
    Ok(())
}

fn cron_value(field: &CronField, text: &str) -> Result<u32, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = field.names.iter().position(|n| *n == lower) {
        // Month names count from 1, weekday names from 0 (Sunday).
        return Ok(field.min + i as u32);
    }
    let n: u32 = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse()
            .map_err(|_| format!("\"{text}\" is out of range"))?
    } else {
        let names = if field.names.is_empty() {
            String::new()
        } else {
            format!(
                " or a name ({}-{})",
                field.names[0].to_uppercase(),
                field.names[field.names.len() - 1].to_uppercase()
            )
        };
        return Err(format!(
            "\"{text}\" is not a number from {} to {}{names}",
            field.min, field.max
        ));
    };
    if n < field.min || n > field.max {
        return Err(format!(
            "{n} is out of range; {} takes {} to {}",
            field.name, field.min, field.max
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expr: &str) -> Result<Schedule, ScheduleError> {
        parse(ScheduleType::Cron, expr)
    }

    fn interval(expr: &str) -> Result<Schedule, ScheduleError> {
        parse(ScheduleType::Interval, expr)
    }

    #[test]
    fn cron_accepts_standard_expressions() {
        for expr in [
            "0 9 * * *",
            "*/5 * * * *",
            "0 0 1 1 *",
            "0 9 * * 1-5",
            "0 9 * * MON-FRI",
            "30 8 ? jan,jul sun",
            "0 0-12/2 * * 0",
            "15 3 1/2 * *",
            "59 23 31 12 6",
        ] {
            assert!(cron(expr).is_ok(), "{expr}: {:?}", cron(expr));
        }
    }

    #[test]
    fn cron_normalizes_spacing() {
        let s = cron("  0   9 * *\t* ").unwrap();
        assert_eq!(s.to_cron().unwrap(), "0 9 * * *");
    }

    #[test]
    fn cron_wants_exactly_five_fields() {
        assert!(matches!(
            cron("0 0 9 * * *"),
            Err(ScheduleError::CronFieldCount { found: 6, .. })
        ));
        assert!(matches!(
            cron("0 9 * *"),
            Err(ScheduleError::CronFieldCount { found: 4, .. })
        ));
        assert!(matches!(
            cron("@daily"),
            Err(ScheduleError::CronFieldCount { found: 1, .. })
        ));
        assert_eq!(cron("  "), Err(ScheduleError::Empty { kind: "cron" }));
    }

    #[test]
    fn cron_refuses_bad_fields() {
        for (expr, field) in [
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day-of-month"),
            ("* * * 13 *", "month"),
            ("* * * * 7", "day-of-week"),
            ("* * * * MOX", "day-of-week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
            ("1,,2 * * * *", "minute"),
            ("* * L * *", "day-of-month"),
            ("* jan * * *", "hour"),
        ] {
            match cron(expr) {
                Err(ScheduleError::CronField { field: f, .. }) => assert_eq!(f, field, "{expr}"),
                other => panic!("{expr}: {other:?}"),
            }
        }
    }

    #[test]
    fn interval_parses_durations() {
        assert_eq!(
            interval("5m").unwrap(),
            Schedule::Interval(Duration::from_secs(300))
        );
        assert_eq!(
            interval("1h").unwrap(),
            Schedule::Interval(Duration::from_secs(3600))
        );
        assert_eq!(
            interval("2h30m").unwrap(),
            Schedule::Interval(Duration::from_secs(9000))
        );
        assert_eq!(
            interval("1h2m3s").unwrap(),
            Schedule::Interval(Duration::from_secs(3723))
        );
        assert_eq!(
            interval("45s").unwrap(),
            Schedule::Interval(Duration::from_secs(45))
        );
    }

    #[test]
    fn interval_refuses_bad_forms() {
        for expr in [
            "", "0m", "0h0m0s", "5", "m", "5x", "1m1h", "1h1h", "1.5h", "-5m", "5 m",
        ] {
            assert!(interval(expr).is_err(), "{expr} should be refused");
        }
        assert!(interval("99999999999999999999h").is_err());
    }

    #[test]
    fn exact_intervals_become_cron() {
        for (expr, want) in [
            ("1m", "* * * * *"),
            ("60s", "* * * * *"),
            ("5m", "*/5 * * * *"),
            ("30m", "*/30 * * * *"),
            ("60m", "0 * * * *"),
            ("1h", "0 * * * *"),
            ("120m", "0 */2 * * *"),
            ("6h", "0 */6 * * *"),
            ("12h", "0 */12 * * *"),
            ("24h", "0 0 * * *"),
        ] {
            assert_eq!(interval(expr).unwrap().to_cron().unwrap(), want, "{expr}");
        }
    }

    #[test]
    fn inexact_intervals_are_refused() {
        for expr in ["7m", "90m", "2h30m", "45s", "5h", "48h", "7h"] {
            match interval(expr).unwrap().to_cron() {
                Err(ScheduleError::NotCronExpressible { .. }) => {}
                other => panic!("{expr}: {other:?}"),
            }
        }
    }

    #[test]
    fn displays_schedules() {
        assert_eq!(interval("2h30m").unwrap().to_string(), "every 2h30m");
        assert_eq!(cron("0 9 * * *").unwrap().to_string(), "cron 0 9 * * *");
        assert_eq!(interval("90s").unwrap().kind(), ScheduleType::Interval);
    }
}
