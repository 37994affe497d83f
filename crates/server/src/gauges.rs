//! What the cluster holds, counted from the index at each scrape, under `loop_plugins_api_*`:
//! plugin instances by phase, each plugin's agent runs of the last 24 hours beside
//! `plugins.daily_runs` (the quota an alert watches), the objects the index leaves out
//! because they do not parse, by kind, and the agents' tool calls waiting for a person. Counted from the stores, not kept as
//! gauges a handler sets, so every replica reports the same figures and a restart loses none.

use std::collections::BTreeMap;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::clock::from_kube;
use crate::plugin_api::quota;
use index::Index;
use model::resources::{AgentRun, InstancePhase, PluginInstance};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

/// What the gauges report at one scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Instances by phase.
    pub phases: BTreeMap<&'static str, i64>,
    /// Each plugin's runs of the last 24 hours.
    pub runs: BTreeMap<String, i64>,
    /// `plugins.daily_runs`.
    pub daily_runs: i64,
    /// The objects left out because they do not parse, by kind.
    pub unreadable: BTreeMap<String, i64>,
    /// Agents' tool calls waiting for a person now.
    pub approvals_pending: i64,
}

impl Snapshot {
    /// What `index` holds now.
    pub fn of(index: &Index) -> Self {
        let instances = index.instances.state();
        let runs = index.runs.state();
        Self {
            phases: instances_by_phase(instances.iter().map(|i| i.as_ref())),
            runs: runs_of_the_day(runs.iter().map(|r| r.as_ref()), jiff::Timestamp::now()),
            daily_runs: i64::from(index.host_config().spec.plugins.daily_runs),
            unreadable: index.unreadable.counts(),
            approvals_pending: index
                .approvals
                .state()
                .iter()
                .filter(|a| a.decision() == model::resources::Decision::Pending)
                .count() as i64,
        }
    }
}

/// Where the collector takes its snapshot from.
pub type Source = Box<dyn Fn() -> Snapshot + Send + Sync>;

/// The collector: a [`Snapshot`] taken at each scrape.
pub struct IndexGauges {
    source: Source,
}

impl std::fmt::Debug for IndexGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexGauges").finish_non_exhaustive()
    }
}

impl IndexGauges {
    /// Registers gauges under `loop_plugins_api_*` that report what `source` answers at each
    /// scrape (`Snapshot::of` an index; tests: a fixed snapshot).
    pub fn register_source(registry: &mut Registry, source: Source) {
        registry
            .sub_registry_with_prefix("loop_plugins_api")
            .register_collector(Box::new(Self { source }));
    }
}

/// Instances by phase; one without a status yet counts as `Stopped` (no container runs).
pub fn instances_by_phase<'a>(
    instances: impl IntoIterator<Item = &'a PluginInstance>,
) -> BTreeMap<&'static str, i64> {
    let mut phases: BTreeMap<&'static str, i64> =
        [("Stopped", 0), ("Starting", 0), ("Running", 0)].into();
    for instance in instances {
        let phase = match instance.status.as_ref().and_then(|s| s.phase) {
            None | Some(InstancePhase::Stopped) => "Stopped",
            Some(InstancePhase::Starting) => "Starting",
            Some(InstancePhase::Running) => "Running",
        };
        *phases.entry(phase).or_default() += 1;
    }
    phases
}

/// Each plugin's runs that count against `plugins.daily_runs` at `now` (the quota's own
/// window rule, [`quota::counts_at`]).
pub fn runs_of_the_day<'a>(
    runs: impl IntoIterator<Item = &'a AgentRun>,
    now: jiff::Timestamp,
) -> BTreeMap<String, i64> {
    let mut counts = BTreeMap::new();
    for run in runs {
        let made = run.metadata.creation_timestamp.as_ref().and_then(from_kube);
        if made.is_some_and(|at| quota::counts_at(at, now)) {
            *counts.entry(run.spec.plugin.clone()).or_default() += 1;
        }
    }
    counts
}

impl Collector for IndexGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = (self.source)();
        let mut family = encoder.encode_descriptor(
            "plugin_instances",
            "Plugin instances by phase (Stopped, Starting, Running)",
            None,
            MetricType::Gauge,
        )?;
        for (phase, count) in now.phases {
            ConstGauge::new(count).encode(family.encode_family(&PhaseLabels { phase })?)?;
        }
        let mut family = encoder.encode_descriptor(
            "daily_runs_used",
            "Agent runs each plugin started in the last 24 hours (plugins.daily_runs counts them)",
            None,
            MetricType::Gauge,
        )?;
        for (plugin, count) in now.runs {
            ConstGauge::new(count).encode(family.encode_family(&PluginLabels { plugin })?)?;
        }
        let family = encoder.encode_descriptor(
            "daily_runs_limit",
            "plugins.daily_runs: agent runs each plugin may start in any 24 hours",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(now.daily_runs).encode(family)?;
        let mut family = encoder.encode_descriptor(
            "unreadable_objects",
            "Objects the index leaves out because they do not parse as their type, by kind",
            None,
            MetricType::Gauge,
        )?;
        let mut unreadable = now.unreadable;
        for kind in index::kinds::KINDS {
            unreadable.entry(kind.to_string()).or_default();
        }
        for (kind, count) in unreadable {
            ConstGauge::new(count).encode(family.encode_family(&KindLabels { kind })?)?;
        }
        let family = encoder.encode_descriptor(
            "approvals_pending",
            "Agents' tool calls waiting for a person's approval now",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(now.approvals_pending).encode(family)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use model::resources::{AgentRunSpec, PluginInstanceSpec, PluginInstanceStatus};

    fn instance(phase: Option<InstancePhase>) -> PluginInstance {
        let mut i = PluginInstance::new(
            "i",
            PluginInstanceSpec {
                plugin: "echo".into(),
                channel: "general".into(),
                project: "p".into(),
            },
        );
        i.status = phase.map(|phase| PluginInstanceStatus {
            phase: Some(phase),
            ..Default::default()
        });
        i
    }

    fn run(plugin: &str, hours_ago: i64, now: k8s_openapi::jiff::Timestamp) -> AgentRun {
        let mut r = AgentRun::new(
            "r",
            AgentRunSpec {
                plugin: plugin.into(),
                channel: "general".into(),
                thread: format!("plugin:{plugin}"),
                agent: "a".into(),
                read_only: false,
                tools: vec![],
                prompt: "p".into(),
            },
        );
        r.metadata.creation_timestamp = Some(Time(
            now - k8s_openapi::jiff::SignedDuration::from_hours(hours_ago),
        ));
        r
    }

    #[test]
    fn every_phase_is_reported_and_no_status_is_stopped() {
        let all = [
            instance(None),
            instance(Some(InstancePhase::Running)),
            instance(Some(InstancePhase::Running)),
            instance(Some(InstancePhase::Stopped)),
        ];
        let phases = instances_by_phase(&all);
        assert_eq!(
            phases,
            [("Running", 2), ("Starting", 0), ("Stopped", 2)].into()
        );
    }

    #[test]
    fn only_the_last_24_hours_count() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let runs = [
            run("echo", 1, now),
            run("echo", 23, now),
            run("echo", 25, now),
            run("other", 2, now),
        ];
        let at_now = jiff::Timestamp::from_nanosecond(now.as_nanosecond()).unwrap();
        let counts = runs_of_the_day(&runs, at_now);
        assert_eq!(counts, [("echo".into(), 2), ("other".into(), 1)].into());
    }

    #[test]
    fn a_scrape_shows_the_snapshot() {
        let mut registry = Registry::default();
        let snapshot = Snapshot {
            phases: instances_by_phase(&[instance(Some(InstancePhase::Running))]),
            runs: [("echo".to_string(), 9)].into(),
            daily_runs: 10,
            unreadable: [("Plugin".to_string(), 2)].into(),
            approvals_pending: 0,
        };
        IndexGauges::register_source(&mut registry, Box::new(move || snapshot.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "loop_plugins_api_plugin_instances{phase=\"Running\"} 1",
            "loop_plugins_api_plugin_instances{phase=\"Stopped\"} 0",
            "loop_plugins_api_daily_runs_used{plugin=\"echo\"} 9",
            "loop_plugins_api_daily_runs_limit 10",
            "loop_plugins_api_unreadable_objects{kind=\"Plugin\"} 2",
            "loop_plugins_api_unreadable_objects{kind=\"Channel\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}
