//! The real runner against the scripted chat-completions server (crates/testkit): what it
//! offers the model, how it answers the calls it cannot make, and how a run ends.

use std::time::Duration;

use loop_plugins_agent::run_env::RunEnv;
use loop_plugins_agent::tools::NoTools;
use loop_plugins_agent::{Error, ModelSettings};
use testkit::chat_model::{ScriptedModel, Step};

fn env(read_only: bool, limit: Duration) -> RunEnv {
    RunEnv {
        run_id: "echo-1".into(),
        agent: "helper".into(),
        read_only,
        plugin: "echo".into(),
        thread: "plugin:echo".into(),
        tools: vec![],
        prompt: "Summarize the chat.".into(),
        time_limit: limit,
        mcp: None,
        workspace: None,
    }
}

/// What each test runs the model with; first, this test binary's TLS provider for reqwest
/// (ring's, as `loop-plugins`' main installs it), before the runner builds its client.
fn settings(model: &ScriptedModel, max_turns: usize) -> ModelSettings {
    let _ = rustls::crypto::ring::default_provider().install_default();
    ModelSettings {
        url: model.url.clone(),
        model: "scripted".into(),
        api_key: Some("key".into()),
        max_turns,
    }
}

#[tokio::test]
async fn a_run_ends_with_the_models_answer_after_its_wrong_call_is_refused() {
    let model = ScriptedModel::start(vec![
        Step::call("plugin_delete_everything", "{}")
            .offering(&[])
            .after_message_containing("Summarize the chat."),
        Step::answer("Nothing to summarize.")
            .after_message_containing("unknown tool plugin_delete_everything"),
    ])
    .await
    .unwrap();
    let ended = loop_plugins_agent::run(
        &env(true, Duration::from_secs(30)),
        &settings(&model, 4),
        &NoTools,
    )
    .await
    .unwrap();
    assert_eq!(model.failures(), Vec::<String>::new());
    assert_eq!(ended.message, "Nothing to summarize.");
    assert!(
        ended.tools_called.is_empty(),
        "the refused call ran nothing"
    );
    let first = &model.requests()[0];
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "a read-only agent is told so: {first}"
    );
}

#[tokio::test]
async fn a_model_that_never_answers_ends_the_run_at_its_turn_limit() {
    let model = ScriptedModel::start(vec![
        Step::call("plugin_x", "{}"),
        Step::call("plugin_x", "{}"),
    ])
    .await
    .unwrap();
    let err = loop_plugins_agent::run(
        &env(false, Duration::from_secs(30)),
        &settings(&model, 2),
        &NoTools,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::TooManyTurns(2)), "{err}");
}

#[tokio::test]
async fn a_model_that_refuses_the_request_fails_the_run_with_its_answer() {
    let model = ScriptedModel::start(vec![Step::answer("never").offering(&["plugin_y"])])
        .await
        .unwrap();
    let err = loop_plugins_agent::run(
        &env(false, Duration::from_secs(30)),
        &settings(&model, 2),
        &NoTools,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("offered tools"), "{err}");
}
