//! What the benches that call the echo plugin through the host API share (`host_calls` on the
//! local control plane, `cold_start` on kind): the chat it is enabled in, an app's token
//! allowed to call it, one tool call checked, an instance's phase awaited, and percentiles of
//! what they time.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use kube::{Api, Client};
use model::config::PluginConfig;
use model::resources::{
    App, Channel, ChannelKind, ChannelSpec, InstancePhase, PluginInstance, Project, ProjectSpec,
    ProjectTrust,
};
use serde_json::{Value, json};

use crate::world::apply;

/// The `p`th percentile of `samples` (nearest rank; 100 is the slowest). `samples` must not be
/// empty.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The echo plugin's `echo` tool called with `text` at `url` (the host API's
/// `.../tools/echo`, or the plugin's own with its secret); its answer, failing unless it is a
/// success.
pub async fn tool_call(
    http: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    text: &str,
) -> anyhow::Result<Value> {
    let mut request = http.post(url).json(&json!({
        "input": {"text": text}, "agent": "say", "thread_id": "t", "run_id": "r"
    }));
    if let Some(b) = bearer {
        request = request.bearer_auth(b);
    }
    let response = request.send().await?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    ensure!(
        status.is_success() && body["is_error"] == false,
        "{url}: {status} {body}"
    );
    Ok(body)
}

/// Waits up to `wait` until `instance` in `namespace` is in `phase`.
pub async fn wait_phase(
    client: &Client,
    namespace: &str,
    instance: &str,
    phase: InstancePhase,
    wait: Duration,
) -> anyhow::Result<()> {
    let api: Api<PluginInstance> = Api::namespaced(client.clone(), namespace);
    let cond = move |i: Option<&PluginInstance>| {
        i.and_then(|i| i.status.as_ref())
            .and_then(|s| s.phase)
            .is_some_and(|p| p == phase)
    };
    tokio::time::timeout(
        wait,
        kube::runtime::wait::await_condition(api, instance, cond),
    )
    .await
    .with_context(|| format!("waiting for {namespace}/{instance} to be {phase:?}"))??;
    Ok(())
}

/// A project `proj` in `namespace` that enables `plugin`, trusted as it is, and its chat `chat`
/// (a desktop channel).
pub async fn enabled_in_chat(
    client: &Client,
    namespace: &str,
    plugin: &str,
    chat: &str,
) -> anyhow::Result<()> {
    let config = BTreeMap::from([(
        plugin.to_string(),
        PluginConfig {
            enabled: Some(true),
            ..Default::default()
        },
    )]);
    let trust = ProjectTrust::of("proj", &config);
    let project = Project::new("proj", ProjectSpec { plugins: config });
    apply(
        &Api::<Project>::namespaced(client.clone(), namespace),
        &project,
    )
    .await?;
    apply(
        &Api::<ProjectTrust>::namespaced(client.clone(), namespace),
        &trust,
    )
    .await?;
    let channel = Channel::new(
        chat,
        ChannelSpec {
            project: "proj".into(),
            kind: ChannelKind::Channel,
            parent: None,
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    );
    apply(
        &Api::<Channel>::namespaced(client.clone(), namespace),
        &channel,
    )
    .await?;
    Ok(())
}

/// A ServiceAccount `bench-app` in `namespace` allowed to call tools, actions and `/x`, and a
/// token for it.
pub async fn caller_token(client: &Client, namespace: &str) -> anyhow::Result<String> {
    let name = "bench-app";
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(name.into());
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    apply(&accounts, &sa).await?;
    let mut role = Role {
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["plugins.loop.dev".into()]),
            resources: Some(vec![
                "plugininstances/tools".into(),
                "plugininstances/actions".into(),
                "plugininstances/x".into(),
            ]),
            verbs: vec!["create".into(), "get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    role.metadata.name = Some(name.into());
    apply(&Api::<Role>::namespaced(client.clone(), namespace), &role).await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(name.into());
    apply(
        &Api::<RoleBinding>::namespaced(client.clone(), namespace),
        &binding,
    )
    .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        let samples = ms(&[5, 1, 4, 2, 3]);
        assert_eq!(percentile(&samples, 50.0), Duration::from_millis(3));
        assert_eq!(percentile(&samples, 100.0), Duration::from_millis(5));
        assert_eq!(percentile(&samples, 0.0), Duration::from_millis(1));
        assert_eq!(percentile(&ms(&[7]), 99.0), Duration::from_millis(7));
    }
}
