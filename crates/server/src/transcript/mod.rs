//! A run's transcript: each tool call its runner made through the run's MCP endpoint, with its
//! input and answer, recorded by the host (docs/runner.md, "What the run called"). Every
//! runner's calls come through `crate::mcp`, so every runner gets a transcript, without doing
//! anything for it; the console's agent view reads it through the host API
//! (`GET .../channels/{chat}/runs/{run}`, `crate::host_api::runs`).
//!
//! It is kept in a ConfigMap of the run's namespace, `<run>-transcript` ([`name`]), owned by
//! the AgentRun so that it goes with the run, labelled as the run's ([`template`]). Each call is
//! a key of its own, `call-<n>`, merged in by a JSON merge patch, so no write reads first and
//! none races another; the latest [`entry::MAX_ENTRIES`] are kept, each part cut to
//! [`entry::MAX_PART`] bytes.
//!
//! - [`entry`]: an entry, its bounds, the keys it writes and the transcript read back (pure);
//! - [`store`]: where it is written and read (the cluster, or memory for tests);
//! - this file: the ConfigMap of a run, and the one way to record and to read.

pub mod entry;
pub mod store;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Resource, ResourceExt};

use entry::{Call, Transcript};
use model::names;
use model::resources::AgentRun;
use store::TranscriptStore;

/// The component label of a transcript.
pub const COMPONENT: &str = "transcript";

/// The transcript ConfigMap of run `run`.
pub fn name(run: &str) -> String {
    names::join_name(&[run, COMPONENT])
}

/// The transcript of `run` as made when missing: labelled as the run's (its plugin, project,
/// chat and name), owned by the AgentRun, so the garbage collector deletes it with the run.
/// Not the run's controller: the controller does not manage it, and a run's deletion does not
/// wait for it (a blocking owner reference would also need `update` on `agentruns/finalizers`).
pub fn template(run: &AgentRun) -> ConfigMap {
    let project = run
        .labels()
        .get(names::LABEL_PROJECT)
        .cloned()
        .unwrap_or_default();
    let mut labels = names::labels(&run.spec.plugin, &project, &run.spec.channel, COMPONENT);
    labels.insert(names::LABEL_RUN.into(), run.name_any());
    crate::config_map::empty(
        name(&run.name_any()),
        &run.namespace().unwrap_or_default(),
        labels,
        run.owner_ref(&()),
    )
}

/// Whether `map` is this run's transcript, not a leftover of an earlier run of the same name
/// (the garbage collector deletes it a little after its run).
pub fn belongs_to(map: &ConfigMap, run: &AgentRun) -> bool {
    let Some(uid) = run.uid() else {
        return true;
    };
    map.owner_references().iter().any(|o| o.uid == uid)
}

/// Records call number `seq` of `run`. A failed write is logged: the call was answered, and
/// the transcript misses it.
pub async fn record(store: &dyn TranscriptStore, run: &AgentRun, seq: u32, call: &Call<'_>) {
    let entry = entry::entry(seq, call);
    if let Err(e) = store.write(&template(run), &entry::patch(&entry)).await {
        tracing::warn!(run = %run.name_any(), seq, error = %e, "tool call not in the transcript");
    }
}

/// `run`'s transcript as the cluster has it now (empty before its first call).
pub async fn read(store: &dyn TranscriptStore, run: &AgentRun) -> Result<Transcript, String> {
    let namespace = run.namespace().unwrap_or_default();
    Ok(store
        .read(&namespace, &name(&run.name_any()))
        .await?
        .filter(|map| belongs_to(map, run))
        .map(|map| Transcript::of(&map))
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool_calls::ToolResult;
    use model::resources::AgentRunSpec;
    use serde_json::json;
    use store::MemoryTranscripts;

    fn run(name: &str, uid: &str) -> AgentRun {
        let mut run = AgentRun::new(
            name,
            AgentRunSpec {
                plugin: "quiz".into(),
                channel: "general".into(),
                thread: "plugin:quiz".into(),
                agent: "tutor".into(),
                read_only: true,
                tools: vec![],
                prompt: "p".into(),
            },
        );
        run.metadata.namespace = Some("team".into());
        run.metadata.uid = Some(uid.into());
        run.metadata.labels = Some(names::labels("quiz", "proj", "general", "run"));
        run
    }

    #[test]
    fn the_transcript_is_labelled_as_the_run_and_owned_by_it() {
        let map = template(&run("quiz-run-1", "uid-1"));
        assert_eq!(map.name_any(), "quiz-run-1-transcript");
        assert_eq!(map.namespace().as_deref(), Some("team"));
        let labels = map.labels();
        assert_eq!(labels[names::LABEL_COMPONENT], COMPONENT);
        assert_eq!(labels[names::LABEL_MANAGED_BY], names::MANAGED_BY);
        assert_eq!(labels[names::LABEL_RUN], "quiz-run-1");
        assert_eq!(labels[names::LABEL_CHANNEL], "general");
        assert_eq!(labels[names::LABEL_PROJECT], "proj");
        let owners = map.owner_references();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].name.as_str()),
            ("AgentRun", "quiz-run-1")
        );
        assert_eq!(owners[0].uid, "uid-1");
        assert_eq!(owners[0].controller, None);
        // A run's name at its longest still makes a name of at most 63 characters.
        let long = "r".repeat(63);
        assert!(name(&long).len() <= 63);
        assert_ne!(name(&long), name(&"r".repeat(62)));
    }

    #[tokio::test]
    async fn calls_recorded_read_back_in_order_and_an_earlier_runs_map_is_not_read() {
        let store = MemoryTranscripts::default();
        let first = run("quiz-run-1", "uid-1");
        let input = json!({ "text": "hi" });
        let result = ToolResult {
            content: vec![json!({ "type": "text", "text": "hi" })],
            structured_content: Some(json!({ "echo": "hi" })),
            is_error: false,
            error_code: None,
        };
        for seq in [2, 1] {
            let call = Call {
                tool: "plugin_echo",
                input: &input,
                result: &result,
                at: jiff::Timestamp::UNIX_EPOCH,
                took: std::time::Duration::from_millis(5),
            };
            record(&store, &first, seq, &call).await;
        }
        let t = read(&store, &first).await.unwrap();
        assert_eq!(t.calls.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(t.calls[0].result.structured, Some(json!({ "echo": "hi" })));
        // A new run of the same name, before the collector took the old one's map.
        let again = run("quiz-run-1", "uid-2");
        assert_eq!(read(&store, &again).await.unwrap(), Transcript::default());
        // A failed write is logged, nothing more.
        store.fail(true);
        let call = Call {
            tool: "plugin_echo",
            input: &input,
            result: &result,
            at: jiff::Timestamp::UNIX_EPOCH,
            took: std::time::Duration::ZERO,
        };
        record(&store, &first, 3, &call).await;
        store.fail(false);
        assert_eq!(read(&store, &first).await.unwrap().calls.len(), 2);
    }
}
