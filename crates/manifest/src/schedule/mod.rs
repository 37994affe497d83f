//! Schedules of scheduled actions: a 5-field cron expression or an interval of a minute or
//! more. How a Kubernetes CronJob runs each is [`ticks`]'s.
//!
//! A scheduled action across the roles:
//!
//! | step | role | where |
//! |---|---|---|
//! | an action's `default_schedule` and `scheduled` trigger, checked with the manifest | manifest | `manifest::model`, here |
//! | schedule entries in the global config and a project's (`plugins.<id>.schedules`) | config | `model::config` |
//! | which entries apply in a chat: the project's replace the global's action by action, once the owner trusts them | pure rules | `model::resolve::schedules` |
//! | one CronJob per (chat, action), with its schedule made a CronJob's ([`ticks`]) | controller | `crates/controller/src/chat/desired.rs`, `cronjob.rs` |
//! | each tick runs `loop-plugins trigger`, which calls the host API's action route as the chat's trigger ServiceAccount | CronJob | `src/trigger.rs`, the chart's `trigger.yaml` |
//! | the action called with `trigger: schedule`, the container started if need be | API server | `crates/server/src/host_api/actions.rs`, `crates/calls` |
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
    /// Every so long: a minute or more.
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
}

/// The shortest interval a schedule may have: a CronJob ticks at most once a minute.
pub const SHORTEST_INTERVAL: Duration = Duration::from_secs(60);

/// Parses a schedule of the given type. An interval must be a minute or more (see
/// [`SHORTEST_INTERVAL`]); any such interval runs (see [`ticks`]).
pub fn parse(kind: ScheduleType, expr: &str) -> Result<Schedule, ScheduleError> {
    match kind {
        ScheduleType::Cron => parse_cron(expr).map(Schedule::Cron),
        ScheduleType::Interval => {
            let every = parse_interval(expr)?;
            if every < SHORTEST_INTERVAL {
                return Err(ScheduleError::Interval {
                    expr: expr.to_string(),
                    reason: "an interval must be at least a minute: a CronJob ticks at most once a minute"
                        .into(),
                });
            }
            Ok(Schedule::Interval(every))
        }
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

    /// How a CronJob runs it: every schedule runs, some on every tick, the other intervals on
    /// the ticks that complete one (see [`Cadence::of`]).
    pub fn cadence(&self) -> Cadence {
        Cadence::of(self)
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

/// Parses a duration as intervals are written: `([0-9]+h)?([0-9]+m)?([0-9]+s)?`, not empty,
/// not negative and not zero. (A schedule's interval must also be a minute or more: see
/// [`parse`]; a time limit such as `45s` need not.)
pub fn parse_interval(expr: &str) -> Result<Duration, ScheduleError> {
    let err = |reason: &str| ScheduleError::Interval {
        expr: expr.to_string(),
        reason: reason.to_string(),
    };
    if expr.trim().is_empty() {
        return Err(ScheduleError::Empty { kind: "interval" });
    }
    if expr.trim_start().starts_with('-') {
        return Err(err("an interval cannot be negative"));
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
        assert_eq!(s, Schedule::Cron(CronExpr("0 9 * * *".into())));
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
            interval("1m30s").unwrap(),
            Schedule::Interval(Duration::from_secs(90))
        );
        assert_eq!(
            interval("60s").unwrap(),
            Schedule::Interval(Duration::from_secs(60))
        );
        // A duration, as a time limit is written, may be shorter than a minute.
        assert_eq!(parse_interval("45s"), Ok(Duration::from_secs(45)));
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

    /// What no schedule can mean is refused, each with its reason.
    #[test]
    fn interval_refusals_say_why() {
        let reason = |expr: &str| match interval(expr) {
            Err(ScheduleError::Interval { reason, .. }) => reason,
            other => panic!("{expr}: {other:?}"),
        };
        assert_eq!(reason("0m"), "an interval must be longer than zero");
        assert_eq!(reason("-5m"), "an interval cannot be negative");
        assert_eq!(reason(" -1h"), "an interval cannot be negative");
        for short in ["45s", "59s", "1s"] {
            assert_eq!(
                reason(short),
                "an interval must be at least a minute: a CronJob ticks at most once a minute",
                "{short}"
            );
        }
        assert!(reason("5 minutes").contains("such as 5m, 1h or 2h30m"));
        assert_eq!(interval(""), Err(ScheduleError::Empty { kind: "interval" }));
    }

    /// Every interval of a minute or more runs; the reference's own (5m, 2h30m) among them.
    #[test]
    fn every_interval_of_a_minute_or_more_runs() {
        for expr in [
            "1m", "5m", "7m", "90s", "61s", "90m", "2h30m", "5h", "48h", "1000h",
        ] {
            assert!(interval(expr).is_ok(), "{expr}: {:?}", interval(expr));
        }
        assert_eq!(
            interval("5m").unwrap().cadence(),
            Cadence::EveryTick("*/5 * * * *".into())
        );
        assert_eq!(
            interval("2h30m").unwrap().cadence(),
            Cadence::Interval(Duration::from_secs(9000))
        );
    }

    #[test]
    fn displays_schedules() {
        assert_eq!(interval("2h30m").unwrap().to_string(), "every 2h30m");
        assert_eq!(cron("0 9 * * *").unwrap().to_string(), "cron 0 9 * * *");
        assert_eq!(interval("90s").unwrap().kind(), ScheduleType::Interval);
    }
}

/// The values one field of a checked cron expression takes, as a bit set (bit `n` is value `n`).
fn cron_set(field: &CronField, value: &str) -> u64 {
    let mut set = 0u64;
    for part in value.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, step.parse::<u32>().unwrap_or(1).max(1)),
            None => (part, 1),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (field.min, field.max)
        } else {
            match range.split_once('-') {
                Some((lo, hi)) => (
                    cron_value(field, lo).unwrap_or(field.min),
                    cron_value(field, hi).unwrap_or(field.max),
                ),
                // `5/15`: from 5 to the end, every 15.
                None if step > 1 => (cron_value(field, range).unwrap_or(field.min), field.max),
                None => {
                    let v = cron_value(field, range).unwrap_or(field.min);
                    (v, v)
                }
            }
        };
        let mut v = lo;
        while v <= hi.min(field.max) {
            set |= 1 << v;
            v += step;
        }
    }
    set
}

/// When a CronJob of `expr` runs next after `after`, in UTC (the time zone a CronJob without
/// one uses in the clusters we make); None when it never runs within a year (`0 0 30 2 *`).
/// A day matches its day-of-month or its day-of-week when both are restricted, as cron does.
pub fn next_run(expr: &CronExpr, after: jiff::Timestamp) -> Option<jiff::Timestamp> {
    use jiff::ToSpan;
    let fields: Vec<&str> = expr.as_str().split_whitespace().collect();
    if fields.len() != 5 {
        return None;
    }
    let sets: Vec<u64> = fields
        .iter()
        .zip(CRON_FIELDS.iter())
        .map(|(v, f)| cron_set(f, v))
        .collect();
    let restricted = |i: usize| !fields[i].starts_with('*') && !fields[i].starts_with('?');
    let day_matches = |d: &jiff::civil::DateTime| {
        let dom = sets[2] & (1 << d.day()) != 0;
        let dow = sets[4] & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        match (restricted(2), restricted(4)) {
            (true, true) => dom || dow,
            (true, false) => dom,
            (false, true) => dow,
            (false, false) => true,
        }
    };
    let utc = jiff::tz::Offset::UTC;
    let start = utc.to_datetime(after);
    let mut t = start
        .with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .ok()?
        .checked_add(1.minute())
        .ok()?;
    let end = start.checked_add(366.days()).ok()?;
    while t <= end {
        if sets[3] & (1 << t.month()) == 0 {
            t = t
                .first_of_month()
                .checked_add(1.month())
                .ok()?
                .start_of_day();
            continue;
        }
        if !day_matches(&t) {
            t = t.checked_add(1.day()).ok()?.start_of_day();
            continue;
        }
        if sets[1] & (1 << t.hour()) == 0 {
            t = t
                .with()
                .minute(0)
                .build()
                .ok()?
                .checked_add(1.hour())
                .ok()?;
            continue;
        }
        if sets[0] & (1 << t.minute()) == 0 {
            t = t.checked_add(1.minute()).ok()?;
            continue;
        }
        return utc.to_timestamp(t).ok();
    }
    None
}

#[cfg(test)]
mod next_run_tests {
    use super::*;

    fn next(expr: &str, after: &str) -> Option<String> {
        let cron = parse_cron(expr).unwrap();
        next_run(&cron, after.parse().unwrap()).map(|t| t.to_string())
    }

    #[test]
    fn the_next_run_is_the_first_minute_every_field_takes() {
        let at = "2026-12-07T05:31:20Z";
        assert_eq!(next("*/5 * * * *", at).unwrap(), "2026-12-07T05:35:00Z");
        assert_eq!(next("0 9 * * 1-5", at).unwrap(), "2026-12-07T09:00:00Z");
        assert_eq!(next("30 2 1 jan *", at).unwrap(), "2027-01-01T02:30:00Z");
        assert_eq!(next("15,45 */6 * * *", at).unwrap(), "2026-12-07T06:15:00Z");
        assert_eq!(next("0 0 * * sun", at).unwrap(), "2026-12-13T00:00:00Z");
        // Both days restricted: either counts (the 13th of December 2026 is a Sunday; so is the
        // 1st of... the 8th is a Tuesday).
        assert_eq!(next("0 12 8 * 0", at).unwrap(), "2026-12-08T12:00:00Z");
        assert_eq!(next("0 0 30 2 *", at), None, "February has no 30th");
        assert_eq!(next("5/20 * * * *", at).unwrap(), "2026-12-07T05:45:00Z");
    }

    #[test]
    fn every_checked_expression_answers_within_a_year_of_steps() {
        let exprs = [
            "* * * * *",
            "59 23 31 12 *",
            "0 0 29 2 *",
            "*/59 */23 */31 */12 */6",
            "1-59/7 0-23/5 1-31/3 1-12/2 0-6/4",
            "0 0 31 4 *",
            "0-59 0-23 1-31 1-12 0-6",
        ];
        for e in exprs {
            let cron = parse_cron(e).unwrap();
            if let Some(t) = next_run(&cron, "2026-12-07T05:31:20Z".parse().unwrap()) {
                assert!(t > "2026-12-07T05:31:20Z".parse().unwrap(), "{e}");
            }
        }
    }
}
