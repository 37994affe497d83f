//! The sizes of a run and its other settings, read from the environment.
//!
//! `SCALE_QUICK=1` shrinks the world to a tenth (and the steady state to 30 s) for development;
//! the figures of a report come from the full sizes. Every knob has a default that is the
//! issue's number.

use std::time::Duration;

/// Reads `name` from the environment, `default` when unset or unreadable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// How big the world is.
#[derive(Clone, Debug)]
pub struct Sizes {
    /// Projects, one namespace each.
    pub projects: usize,
    /// Desktop channels per project; each has as many threads again (one per channel).
    pub channels_per_project: usize,
    /// Plugins, every one enabled in every project.
    pub plugins: usize,
    /// Whether this is the quick development size.
    pub quick: bool,
}

impl Sizes {
    /// 50 projects × (10 channels + 10 threads) × 3 plugins = 1,000 chats and 3,000 instances;
    /// quick: 5 projects, a tenth.
    pub fn from_env() -> Self {
        let quick = env_or("SCALE_QUICK", 0u8) != 0;
        Self {
            projects: env_or("SCALE_PROJECTS", if quick { 5 } else { 50 }),
            channels_per_project: env_or("SCALE_CHANNELS_PER_PROJECT", 10),
            plugins: env_or("SCALE_PLUGINS", 3),
            quick,
        }
    }

    /// Chats: each channel and its thread.
    pub fn chats(&self) -> usize {
        self.projects * self.channels_per_project * 2
    }

    /// Desktop channels (the ones that get CronJobs).
    pub fn channels(&self) -> usize {
        self.projects * self.channels_per_project
    }

    /// PluginInstances: one per (plugin, chat).
    pub fn instances(&self) -> usize {
        self.chats() * self.plugins
    }

    /// CronJobs: one per (plugin, desktop channel), each plugin having one scheduled action.
    pub fn cronjobs(&self) -> usize {
        self.channels() * self.plugins
    }

    /// The objects the controller makes: instances, their /data claims and Secrets, and
    /// the channels' CronJobs.
    pub fn children(&self) -> usize {
        3 * self.instances() + self.cronjobs()
    }

    /// Statuses the controller writes once: every instance's, chat's and project's.
    pub fn statuses(&self) -> usize {
        self.instances() + self.chats() + self.projects
    }
}

/// The settings of `make bench-scale` besides the sizes.
#[derive(Clone, Debug)]
pub struct BenchKnobs {
    /// How long the steady state is watched.
    pub steady: Duration,
    /// Requests the bare client keeps in flight.
    pub concurrency: usize,
    /// Concurrent callers of the tool-call measure.
    pub callers: usize,
    /// Calls per path (direct, proxied) in the tool-call measure.
    pub calls: usize,
    /// Seconds per GET /channel and /healthz measurement, and how many rounds.
    pub rps_seconds: u64,
    pub rps_rounds: usize,
    /// Keep-alive connections of the requests-per-second loader.
    pub rps_connections: usize,
    /// How long convergence may take before the run fails.
    pub converge_limit: Duration,
}

impl BenchKnobs {
    pub fn from_env(sizes: &Sizes) -> Self {
        Self {
            steady: Duration::from_secs(env_or(
                "SCALE_STEADY_SECONDS",
                if sizes.quick { 30 } else { 300 },
            )),
            concurrency: env_or("SCALE_CONCURRENCY", 32usize).max(1),
            callers: env_or("SCALE_CALLERS", 200usize).max(1),
            calls: env_or("SCALE_CALLS", if sizes.quick { 2000 } else { 10000 }).max(10),
            rps_seconds: env_or("SCALE_RPS_SECONDS", 4),
            rps_rounds: env_or("SCALE_RPS_ROUNDS", 3usize).max(1),
            rps_connections: env_or("SCALE_RPS_CONNECTIONS", 32usize).max(1),
            converge_limit: Duration::from_secs(env_or("SCALE_CONVERGE_LIMIT_SECONDS", 900)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_world_is_the_issues() {
        let full = Sizes {
            projects: 50,
            channels_per_project: 10,
            plugins: 3,
            quick: false,
        };
        assert_eq!(full.chats(), 1000);
        assert_eq!(full.instances(), 3000);
        assert_eq!(full.cronjobs(), 1500);
        assert_eq!(full.children(), 10_500);
        assert_eq!(full.statuses(), 4050);
    }
}
