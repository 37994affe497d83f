//! What a run says: progress lines per phase with their timings and the machine's load, and
//! the summary block at the end, one `name=value` line per figure, each figure with its
//! baseline and their ratio where it has one.

use std::time::Instant;

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> (f64, f64, f64) {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut parts = text
        .split_whitespace()
        .map(|p| p.parse().unwrap_or(f64::NAN));
    (
        parts.next().unwrap_or(f64::NAN),
        parts.next().unwrap_or(f64::NAN),
        parts.next().unwrap_or(f64::NAN),
    )
}

/// The 1-minute load average, for a summary line.
pub fn load1() -> f64 {
    load_average().0
}

/// Phases of a run, timed, each with the load average at its end.
pub struct Phases {
    started: Instant,
    phase: Option<(String, Instant)>,
}

impl Default for Phases {
    fn default() -> Self {
        Self::new()
    }
}

impl Phases {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            phase: None,
        }
    }

    /// Ends the current phase (printing its time) and starts `name`.
    pub fn next(&mut self, name: &str) {
        self.end();
        let (one, five, _) = load_average();
        eprintln!(
            "==> {name} (at {:.0} s; load average {one:.2} {five:.2})",
            self.started.elapsed().as_secs_f64()
        );
        self.phase = Some((name.to_string(), Instant::now()));
    }

    /// Ends the current phase.
    pub fn end(&mut self) {
        if let Some((name, at)) = self.phase.take() {
            let (one, five, _) = load_average();
            eprintln!(
                "    {name}: {:.1} s (load average {one:.2} {five:.2})",
                at.elapsed().as_secs_f64()
            );
        }
    }

    /// Seconds since the run started.
    pub fn total(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }
}

/// The summary's lines.
#[derive(Default)]
pub struct Summary {
    lines: Vec<(String, String)>,
}

impl Summary {
    /// A figure.
    pub fn put(&mut self, name: &str, value: impl std::fmt::Display) {
        self.lines.push((name.to_string(), value.to_string()));
    }

    /// A number with `digits` decimals.
    pub fn num(&mut self, name: &str, value: f64, digits: usize) {
        self.put(name, format!("{value:.digits$}"));
    }

    /// A figure, its baseline and their ratio (`name`, `name_baseline`, `name_ratio`).
    pub fn ratio(&mut self, name: &str, value: f64, baseline: f64, digits: usize) {
        self.num(name, value, digits);
        self.num(&format!("{name}_baseline"), baseline, digits);
        self.num(&format!("{name}_ratio"), value / baseline, 3);
    }

    /// Prints the block on standard output.
    pub fn print(&self, title: &str) {
        println!();
        println!("# {title}");
        for (name, value) in &self.lines {
            println!("{name}={value}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_come_with_their_baseline() {
        let mut s = Summary::default();
        s.ratio("rate", 90.0, 100.0, 1);
        s.put("note", "x y");
        let lines: Vec<String> = s.lines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            lines,
            [
                "rate=90.0",
                "rate_baseline=100.0",
                "rate_ratio=0.900",
                "note=x y"
            ]
        );
    }

    #[test]
    fn the_load_average_reads() {
        let (one, five, fifteen) = load_average();
        assert!(one >= 0.0 && five >= 0.0 && fifteen >= 0.0);
    }
}
