//! How a Kubernetes CronJob runs a schedule, and which of its ticks run the action.
//!
//! A CronJob ticks on a 5-field cron expression. It runs a cron schedule as written, and an
//! interval that a cron step matches (1m, 5m, 30m, 1h, 6h, 24h: each divides an hour or a day)
//! on every tick ([`Cadence::EveryTick`]). Any other interval of a minute or more (7m, 90s, 90m,
//! 2h30m, 5h, 48h) runs exactly all the same ([`Cadence::Interval`]):
//!
//! - its CronJob ticks at a step that divides it: the longest of at most an hour that cron
//!   keeps evenly (a number of minutes dividing 60), so 30m for 90m and 2h30m, 1h for 5h and
//!   48h, 1m for 7m and for an interval that is not a whole number of minutes (90s);
//! - it counts from an anchor: the tick at or before the moment its entry was applied
//!   ([`Cadence::timing`]), set once per change to the entry and written in the CronJob, so a
//!   restart of the controller keeps it and a pause and resume of the task keep its rhythm;
//! - `loop-plugins trigger`, which each tick runs, runs the action on the tick that completes an
//!   interval and on no other. A tick at `t` runs it when a completion, `anchor + k × interval`
//!   for some k ≥ 1, lies in `(t - step, t]` ([`AnchoredInterval::due`]). The windows of
//!   successive ticks meet end to end, so each completion lies in exactly one: one that falls
//!   on a tick (a whole number of minutes) runs on it, one between two (90s) on the next.
//!
//! The decision is stateless: it reads the anchor, the interval and the time of the tick itself,
//! the one the CronJob controller made the Job for (it names the Job `<cronjob>-<minutes since
//! the epoch>`, see [`scheduled_tick`]), and no clock. So:
//!
//! - a Job that starts late, or is made late (the CronJob controller was down, or the Job of
//!   the tick before still ran under `concurrencyPolicy: Forbid`), decides for its own tick: a
//!   completion in its window runs late, once;
//! - nothing runs twice: the CronJob controller makes one Job for a tick (its name is taken),
//!   and no two ticks share a completion; a restart of the controller, of the trigger or of the
//!   node changes none of the inputs;
//! - a step of the clock of the node that runs the Job changes nothing, and a step of the
//!   CronJob controller's clock is, for the ticks it skips, a missed tick, and for the ticks it
//!   goes back over, ticks whose Jobs it made already;
//! - a missed tick: when the CronJob controller comes back after more than one tick, it makes a
//!   Job for the latest tick it missed and none for the others (its rule for every CronJob: a
//!   cron task loses those ticks too). That Job runs the action if its own window holds a
//!   completion. A completion in the window of a tick that never got a Job is not run by
//!   another tick: the task runs again at its next completion, on time. That is what a missed
//!   tick drops: the completion its window held, if any, as a cron task loses that tick's run;
//!   never does a missed tick make a run twice or early.
//!
//! A Job without a tick (made by hand, as `kubectl create job --from=cronjob/...` does) is
//! someone asking for a run now: it runs the action, as it would for a cron task.
//!
//! Ticks at most an hour apart stay evenly spaced in whatever time zone the CronJob controller
//! reads them, as a daylight-saving change moves a wall clock by a whole hour, so the windows
//! meet whatever its zone. (The one exception, Lord Howe Island's half-hour change, spaces a
//! 4, 12, 20 or 60-minute step unevenly once on each change.) Longer steps would not (`0 */3`
//! ticks two or four hours apart across such a change), so an interval of hours ticks hourly.

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;

use super::{Schedule, format_interval};

/// The steps a CronJob ticks at evenly, in minutes, longest first: each divides an hour.
const STEPS: [u64; 12] = [60, 30, 20, 15, 12, 10, 6, 5, 4, 3, 2, 1];

/// The label the Job controller puts on each Pod of a Job, holding the Job's name.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// The variable through which the trigger's container learns its Job's name (from
/// [`JOB_NAME_LABEL`], by the downward API).
pub const JOB_ENV: &str = "LOOP_PLUGINS_JOB";

/// How a CronJob runs a schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cadence {
    /// Every tick of this 5-field expression runs the action.
    EveryTick(String),
    /// The CronJob ticks at [`tick_step`] of this interval; the ticks that complete an
    /// interval run the action.
    Interval(Duration),
}

impl Cadence {
    /// How a CronJob runs `schedule`.
    pub fn of(schedule: &Schedule) -> Self {
        match schedule {
            Schedule::Cron(expr) => Cadence::EveryTick(expr.as_str().to_string()),
            Schedule::Interval(every) => {
                exact_cron(*every).map_or(Cadence::Interval(*every), Cadence::EveryTick)
            }
        }
    }

    /// What a task of this cadence runs on. An interval counts from `anchor` when given (the
    /// task's, kept while its entry stays the same), else from the tick at or before `now`.
    pub fn timing(&self, anchor: Option<Timestamp>, now: Timestamp) -> Timing {
        match self {
            Cadence::EveryTick(cron) => Timing::EveryTick(cron.clone()),
            Cadence::Interval(every) => Timing::Interval(AnchoredInterval {
                every: *every,
                anchor: anchor.unwrap_or_else(|| tick_at_or_before(now, tick_step(*every))),
            }),
        }
    }
}

/// What a task's CronJob runs on: all it takes to make the CronJob again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timing {
    /// Every tick of this 5-field expression runs the action.
    EveryTick(String),
    /// The ticks that complete an interval since the anchor run it.
    Interval(AnchoredInterval),
}

impl Timing {
    /// The 5-field expression the CronJob ticks on.
    pub fn cron(&self) -> String {
        match self {
            Timing::EveryTick(cron) => cron.clone(),
            Timing::Interval(interval) => interval.cron(),
        }
    }

    /// The interval and its anchor, for a task whose ticks do not all run it.
    pub fn interval(&self) -> Option<&AnchoredInterval> {
        match self {
            Timing::EveryTick(_) => None,
            Timing::Interval(interval) => Some(interval),
        }
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Timing::EveryTick(cron) => write!(f, "cron {cron}"),
            Timing::Interval(interval) => write!(f, "{interval}"),
        }
    }
}

/// An interval counted from its anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnchoredInterval {
    pub every: Duration,
    pub anchor: Timestamp,
}

/// Whether a tick runs the action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// It does: its window holds the completion at `completed`.
    Runs { completed: Timestamp },
    /// It does not; the next completion is at `next`.
    Waits { next: Timestamp },
}

impl AnchoredInterval {
    /// How far apart the CronJob's ticks are.
    pub fn step(&self) -> Duration {
        tick_step(self.every)
    }

    /// The 5-field expression the CronJob ticks on.
    pub fn cron(&self) -> String {
        step_cron(self.step())
    }

    /// Whether the tick scheduled at `tick` runs the action: whether a completion (the anchor
    /// plus a whole number of intervals, at least one) lies in `(tick - step, tick]`.
    pub fn due(&self, tick: Timestamp) -> Due {
        let anchor = i128::from(self.anchor.as_second());
        let every = i128::from(self.every.as_secs());
        let step = i128::from(self.step().as_secs());
        let tick = i128::from(tick.as_second());
        let first = anchor + every;
        if tick < first {
            return Due::Waits {
                next: timestamp(first),
            };
        }
        let completed = anchor + (tick - anchor) / every * every;
        if completed > tick - step {
            Due::Runs {
                completed: timestamp(completed),
            }
        } else {
            Due::Waits {
                next: timestamp(completed + every),
            }
        }
    }
}

impl fmt::Display for AnchoredInterval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "every {} from {}",
            format_interval(self.every),
            crate::time::rfc3339(self.anchor)
        )
    }
}

/// The tick the CronJob controller made a Job for, from the Job's name: it names each
/// `<cronjob>-<the tick, in minutes since the epoch>`. `None` for a Job named otherwise, one
/// made by hand.
pub fn scheduled_tick(cronjob: &str, job: &str) -> Option<Timestamp> {
    let minutes = job.strip_prefix(cronjob)?.strip_prefix('-')?;
    if minutes.is_empty() || !minutes.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let minutes: i64 = minutes.parse().ok()?;
    Timestamp::from_second(minutes.checked_mul(60)?).ok()
}

/// The step a CronJob ticks at for `every`: the longest of [`STEPS`] that divides it, or a
/// minute for an interval that is not a whole number of minutes.
pub fn tick_step(every: Duration) -> Duration {
    let secs = every.as_secs();
    let minutes = if secs.is_multiple_of(60) && every.subsec_nanos() == 0 {
        STEPS
            .into_iter()
            .find(|step| (secs / 60).is_multiple_of(*step))
            .unwrap_or(1)
    } else {
        1
    };
    Duration::from_secs(minutes * 60)
}

/// The cron expression that ticks every `step` (one of [`STEPS`]).
fn step_cron(step: Duration) -> String {
    match step.as_secs() / 60 {
        60 => "0 * * * *".into(),
        1 => "* * * * *".into(),
        minutes => format!("*/{minutes} * * * *"),
    }
}

/// The expression whose every tick completes `every`, when cron has one: a number of minutes
/// dividing an hour, or of hours dividing a day.
fn exact_cron(every: Duration) -> Option<String> {
    let secs = every.as_secs();
    if every.subsec_nanos() != 0 || !secs.is_multiple_of(60) {
        return None;
    }
    let minutes = secs / 60;
    if minutes <= 60 {
        return (60 % minutes == 0).then(|| step_cron(every));
    }
    if !minutes.is_multiple_of(60) {
        return None;
    }
    match minutes / 60 {
        24 => Some("0 0 * * *".into()),
        hours if hours < 24 && 24 % hours == 0 => Some(format!("0 */{hours} * * *")),
        _ => None,
    }
}

/// The tick at or before `at`, on a grid of `step` counted from the epoch.
fn tick_at_or_before(at: Timestamp, step: Duration) -> Timestamp {
    let step = i128::from(step.as_secs());
    let at = i128::from(at.as_second());
    timestamp(at - at.rem_euclid(step))
}

/// A count of seconds since the epoch as a timestamp, held to the range a timestamp has.
fn timestamp(seconds: i128) -> Timestamp {
    let clamped = seconds.clamp(
        i128::from(Timestamp::MIN.as_second()),
        i128::from(Timestamp::MAX.as_second()),
    );
    Timestamp::from_second(clamped as i64).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{ScheduleType, parse};

    fn cadence(expr: &str) -> Cadence {
        parse(ScheduleType::Interval, expr).unwrap().cadence()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn every(expr: &str, anchor: &str) -> AnchoredInterval {
        match cadence(expr).timing(Some(at(anchor)), Timestamp::UNIX_EPOCH) {
            Timing::Interval(interval) => interval,
            other => panic!("{expr} runs on every tick: {other:?}"),
        }
    }

    /// The ticks of `interval`'s CronJob from `from` (inclusive) for `count` steps.
    fn ticks(interval: &AnchoredInterval, from: Timestamp, count: i64) -> Vec<Timestamp> {
        let step = interval.step().as_secs() as i64;
        (0..count)
            .map(|i| Timestamp::from_second(from.as_second() + i * step).unwrap())
            .collect()
    }

    /// The completions the ticks run, in order.
    fn runs(interval: &AnchoredInterval, ticks: &[Timestamp]) -> Vec<Timestamp> {
        ticks
            .iter()
            .filter_map(|tick| match interval.due(*tick) {
                Due::Runs { completed } => Some(completed),
                Due::Waits { .. } => None,
            })
            .collect()
    }

    #[test]
    fn intervals_cron_matches_run_on_every_tick() {
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
            assert_eq!(cadence(expr), Cadence::EveryTick(want.into()), "{expr}");
        }
        let cron = parse(ScheduleType::Cron, "0 9 * * 1-5").unwrap();
        assert_eq!(cron.cadence(), Cadence::EveryTick("0 9 * * 1-5".into()));
    }

    #[test]
    fn other_intervals_tick_at_the_longest_step_that_divides_them() {
        for (expr, step, cron) in [
            ("7m", 1, "* * * * *"),
            ("90s", 1, "* * * * *"),
            ("1h0m30s", 1, "* * * * *"),
            ("45m", 15, "*/15 * * * *"),
            ("100m", 20, "*/20 * * * *"),
            ("90m", 30, "*/30 * * * *"),
            ("2h30m", 30, "*/30 * * * *"),
            ("5h", 60, "0 * * * *"),
            ("48h", 60, "0 * * * *"),
        ] {
            let interval = every(expr, "2026-12-01T10:00:00Z");
            assert_eq!(interval.step(), Duration::from_secs(step * 60), "{expr}");
            assert_eq!(interval.cron(), cron, "{expr}");
            assert_eq!(Timing::Interval(interval).cron(), cron, "{expr}");
        }
    }

    #[test]
    fn the_anchor_is_the_tick_at_or_before_the_entry_was_applied() {
        let applied = at("2026-12-01T10:47:13Z");
        let anchor = |expr: &str| match cadence(expr).timing(None, applied) {
            Timing::Interval(i) => i.anchor,
            other => panic!("{other:?}"),
        };
        assert_eq!(anchor("90m"), at("2026-12-01T10:30:00Z"));
        assert_eq!(anchor("2h30m"), at("2026-12-01T10:30:00Z"));
        assert_eq!(anchor("5h"), at("2026-12-01T10:00:00Z"));
        assert_eq!(anchor("7m"), at("2026-12-01T10:47:00Z"));
        assert_eq!(anchor("90s"), at("2026-12-01T10:47:00Z"));
        // A task's own anchor is kept.
        let kept = at("2026-11-30T08:00:00Z");
        assert_eq!(
            cadence("90m").timing(Some(kept), applied),
            Timing::Interval(AnchoredInterval {
                every: Duration::from_secs(5400),
                anchor: kept
            })
        );
        // A cron cadence has none.
        assert_eq!(
            cadence("5m").timing(Some(kept), applied),
            Timing::EveryTick("*/5 * * * *".into())
        );
    }

    #[test]
    fn ninety_minutes_run_on_every_third_half_hour_tick() {
        let interval = every("90m", "2026-12-01T10:00:00Z");
        let decide = |t: &str| interval.due(at(t));
        // The anchor's own tick and the two after it complete nothing.
        assert_eq!(
            decide("2026-12-01T10:00:00Z"),
            Due::Waits {
                next: at("2026-12-01T11:30:00Z")
            }
        );
        assert!(matches!(decide("2026-12-01T10:30:00Z"), Due::Waits { .. }));
        assert!(matches!(decide("2026-12-01T11:00:00Z"), Due::Waits { .. }));
        assert_eq!(
            decide("2026-12-01T11:30:00Z"),
            Due::Runs {
                completed: at("2026-12-01T11:30:00Z")
            }
        );
        assert_eq!(
            decide("2026-12-01T12:00:00Z"),
            Due::Waits {
                next: at("2026-12-01T13:00:00Z")
            }
        );
        assert!(matches!(decide("2026-12-01T12:30:00Z"), Due::Waits { .. }));
        assert!(matches!(decide("2026-12-01T13:00:00Z"), Due::Runs { .. }));
        // Before the anchor (a tick the controller's clock went back to), nothing.
        assert!(matches!(decide("2026-12-01T08:30:00Z"), Due::Waits { .. }));
    }

    #[test]
    fn an_interval_between_two_ticks_runs_on_the_next() {
        let interval = every("90s", "2026-12-01T10:00:00Z");
        let ticks = ticks(&interval, at("2026-12-01T10:00:00Z"), 7);
        let ran: Vec<(Timestamp, Timestamp)> = ticks
            .iter()
            .filter_map(|t| match interval.due(*t) {
                Due::Runs { completed } => Some((*t, completed)),
                Due::Waits { .. } => None,
            })
            .collect();
        assert_eq!(
            ran,
            [
                (at("2026-12-01T10:02:00Z"), at("2026-12-01T10:01:30Z")),
                (at("2026-12-01T10:03:00Z"), at("2026-12-01T10:03:00Z")),
                (at("2026-12-01T10:05:00Z"), at("2026-12-01T10:04:30Z")),
                (at("2026-12-01T10:06:00Z"), at("2026-12-01T10:06:00Z")),
            ]
        );
    }

    /// Over days of ticks, each completion runs once, in order, on the first tick at or after
    /// it: never twice, never early, never a step late.
    #[test]
    fn each_completion_runs_on_exactly_one_tick() {
        for (expr, anchor) in [
            ("7m", "2026-12-01T10:07:00Z"),
            ("90s", "2026-12-01T10:00:00Z"),
            ("61s", "2026-12-01T10:00:00Z"),
            ("90m", "2026-12-01T10:30:00Z"),
            ("2h30m", "2026-12-01T00:00:00Z"),
            ("100m", "2026-12-01T10:40:00Z"),
            ("5h", "2026-12-01T23:00:00Z"),
            ("48h", "2026-12-01T10:00:00Z"),
            // An anchor off the grid (written by hand) runs on the tick after each completion.
            ("90m", "2026-12-01T10:07:00Z"),
        ] {
            let interval = every(expr, anchor);
            let step = interval.step().as_secs() as i64;
            let count = 3 * 24 * 3600 / step;
            // The CronJob's ticks, on their grid from the one at or before the anchor.
            let first = tick_at_or_before(at(anchor), interval.step());
            let all = ticks(&interval, first, count);
            let last_tick = first.as_second() + (count - 1) * step;
            let want: Vec<Timestamp> = (1..)
                .map(|k| at(anchor).as_second() + k * interval.every.as_secs() as i64)
                .take_while(|c| *c <= last_tick)
                .map(|c| Timestamp::from_second(c).unwrap())
                .collect();
            assert!(!want.is_empty(), "{expr}");
            assert_eq!(runs(&interval, &all), want, "{expr} from {anchor}");
            for tick in all {
                if let Due::Runs { completed } = interval.due(tick) {
                    let late = tick.as_second() - completed.as_second();
                    assert!((0..step).contains(&late), "{expr}: {tick} for {completed}");
                }
            }
        }
    }

    /// The rule for a tick that never got a Job: its completion is not run by another tick,
    /// and every other completion still runs once, on its own tick.
    #[test]
    fn a_missed_tick_drops_its_own_completion_only() {
        let interval = every("90m", "2026-12-01T10:00:00Z");
        let all = ticks(&interval, at("2026-12-01T10:00:00Z"), 12);
        let missed = at("2026-12-01T11:30:00Z");
        let kept: Vec<Timestamp> = all.iter().copied().filter(|t| *t != missed).collect();
        assert_eq!(
            runs(&interval, &kept),
            [at("2026-12-01T13:00:00Z"), at("2026-12-01T14:30:00Z"),]
        );
        // A Job made late for the missed tick (the CronJob controller back before the next
        // tick) decides for its tick, whenever it runs: it runs the completion, once.
        assert_eq!(interval.due(missed), Due::Runs { completed: missed });
    }

    #[test]
    fn the_tick_is_read_from_the_name_the_cronjob_controller_gives_its_job() {
        // 2026-12-01T11:30:00Z is 29,935,410 minutes after the epoch.
        let tick = at("2026-12-01T11:30:00Z");
        assert_eq!(tick.as_second() / 60, 29_935_410);
        assert_eq!(
            scheduled_tick("echo-c-tick", "echo-c-tick-29935410"),
            Some(tick)
        );
        // Made by hand, or another CronJob's.
        for job in [
            "manual-run",
            "echo-c-tick",
            "echo-c-tick-",
            "echo-c-tick-manual",
            "echo-c-tick-2-29935410",
            "echo-c-tic-29935410",
            "echo-c-tick-+29935410",
            "echo-c-tick-99999999999999999999",
        ] {
            assert_eq!(scheduled_tick("echo-c-tick", job), None, "{job}");
        }
    }

    #[test]
    fn timings_say_what_they_run_on() {
        assert_eq!(
            Timing::EveryTick("*/15 * * * *".into()).to_string(),
            "cron */15 * * * *"
        );
        assert_eq!(
            Timing::Interval(every("90m", "2026-12-01T10:00:00Z")).to_string(),
            "every 1h30m from 2026-12-01T10:00:00Z"
        );
    }
}
