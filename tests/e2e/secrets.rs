//! Secret settings on the real control plane (issue 30): the full plugin's `api_token` is
//! secret, a Secret of the test's namespace holds its value, and the trusted Project
//! references it (and, wrongly, also writes a value inline). The plugin reads the value with
//! `GET /settings/secrets/api_token`, each call a live read that names the Secret's revision,
//! so a rotation shows on the very next call; `GET /channel` never has it; without
//! `secrets.read` approved it is 403; and neither value is in any status, Event or log line of
//! the controller or the API server. A Project's reference has no namespace field: applying
//! one is refused, and a write that lets unknown fields through has it dropped.

use std::collections::BTreeMap;

use anyhow::{Context, ensure};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use model::config::SecretSettingSource;
use model::resources::{Channel, ChannelKind, Plugin, PluginInstance, Project};
use serde_json::{Value, json};

use crate::api::api_support::{ApiServer, PROJECT, chat, full_entry, full_plugin, world};
use crate::controller_support::{WAIT, apply_trusted, plugin_id, shared};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "secrets::a_secret_setting_is_read_live_and_appears_nowhere_else",
            read_live,
        )
        .local_only("searches the logs of the controller and the API server on this machine"),
        test(
            "secrets::a_projects_secret_reference_takes_no_namespace",
            no_namespace,
        ),
    ]
}

const ROUTE: &str = "/settings/secrets/api_token";
/// The Secret the project references, and its key.
const CREDS: &str = "plugin-creds";
const KEY: &str = "token";

fn secret(value: &str) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(CREDS.into());
    s.data = Some(BTreeMap::from([(
        KEY.to_string(),
        ByteString(value.as_bytes().to_vec()),
    )]));
    s
}

/// What the chart's `projectNamespaces` does for a namespace, done by hand for the test's own
/// (as docs/projects.md tells an operator): the chart's ServiceAccount may get Secrets there.
async fn grant_secret_reads(ns: &Ns) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    let (account, namespace) = match ns.cluster().existing() {
        Some(existing) => (
            if existing.release.contains("loop-plugins") {
                existing.release.clone()
            } else {
                format!("{}-loop-plugins", existing.release)
            },
            existing.namespace.clone(),
        ),
        None => (
            crate::controller_support::CONTROLLER_ACCOUNT.to_string(),
            crate::controller_support::CONTROLLER_NAMESPACE.to_string(),
        ),
    };
    let name = "api-secret-settings";
    let role = Role {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        }]),
    };
    let binding = RoleBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account,
            namespace: Some(namespace),
            ..Default::default()
        }]),
    };
    ns.api::<Role>()
        .create(&PostParams::default(), &role)
        .await?;
    ns.api::<RoleBinding>()
        .create(&PostParams::default(), &binding)
        .await?;
    Ok(())
}

async fn read_live(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    // Values no other test has, so a search for them finds only what this test caused.
    let first = format!("first-{}-7f3a", ns.name());
    let second = format!("second-{}-91bc", ns.name());
    let inline = format!("inline-{}-c2d4", ns.name());
    let secrets = ns.api::<Secret>();
    secrets
        .create(&PostParams::default(), &secret(&first))
        .await?;
    grant_secret_reads(&ns).await?;

    let id = plugin_id(&ns, "sec");
    let w = world(
        &ns,
        &[full_plugin(&id, None)?],
        &[chat("general", ChannelKind::Channel, None)],
    )
    .await?;
    let token = w.token("general");
    let mut entry = full_entry(true);
    entry
        .secret_settings
        .insert("api_token".into(), SecretSettingSource::key_of(CREDS, KEY));
    entry.settings.insert("api_token".into(), json!(inline));
    apply_trusted(&ns, PROJECT, BTreeMap::from([(id.clone(), entry)])).await?;
    let api = ApiServer::start(&ns).await?;

    // The value, at the Secret's revision, once the server's stores hold the trusted config.
    let answer = api.until(200, "GET", ROUTE, Some(token), None).await?;
    let read = answer.json()?;
    let revision = secrets.get(CREDS).await?.resource_version();
    ensure!(
        read == json!({ "name": "api_token", "value": first, "revision": revision }),
        "GET {ROUTE} answered {answer}"
    );
    ensure!(
        answer.header("cache-control") == Some("no-store"),
        "no Cache-Control: no-store: {:?}",
        answer.headers
    );

    // Rotated: the very next call reads the new value, at the new revision (no cache, no wait).
    let rotated = secrets
        .replace(CREDS, &PostParams::default(), &{
            let mut s = secrets.get(CREDS).await?;
            s.data = secret(&second).data;
            s
        })
        .await?;
    let answer = api.call("GET", ROUTE, Some(token), None).await?;
    answer.expect(200, None)?;
    ensure!(
        answer.json()?
            == json!({ "name": "api_token", "value": second, "revision": rotated.resource_version() }),
        "after the rotation GET {ROUTE} answered {answer}"
    );

    // GET /channel has neither the value nor the setting.
    let answer = api.call("GET", "/channel", Some(token), None).await?;
    answer.expect(200, None)?;
    ensure!(
        answer.json()?["settings"].get("api_token").is_none(),
        "GET /channel answered {answer}"
    );

    // The inline value is left out and shown as refused, without the value.
    let instances = ns.api::<PluginInstance>();
    let instance = model::names::instance_name(&id, "general");
    let shown = wait::matches(
        &instances,
        &instance,
        "the inline value of api_token shown as refused",
        WAIT,
        |i| {
            i.status
                .as_ref()
                .is_some_and(|s| s.refused_settings.iter().any(|r| r.setting == "api_token"))
        },
    )
    .await?;
    let status = shown.status.unwrap_or_default();
    let refused = status
        .refused_settings
        .iter()
        .find(|r| r.setting == "api_token")
        .context("no refused api_token")?;
    ensure!(
        refused.value.is_none() && refused.reason.contains("the setting is secret"),
        "{refused:?}"
    );
    let condition = status
        .conditions
        .iter()
        .find(|c| c.r#type == "SettingsValid")
        .context("no SettingsValid condition")?;
    ensure!(
        condition.message.contains(
            "the project value of setting \"api_token\" is left out: the setting is secret"
        ),
        "{condition:?}"
    );

    // Without secrets.read approved: 403, as soon as the Plugin says so.
    let others: Vec<String> = model::manifest::Capability::ALL
        .iter()
        .filter(|c| **c != model::manifest::Capability::SecretsRead)
        .map(|c| c.to_string())
        .collect();
    Api::<Plugin>::all(ns.client())
        .patch(
            &id,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": { "approvedCapabilities": others } })),
        )
        .await?;
    let answer = api.until(403, "GET", ROUTE, Some(token), None).await?;
    answer.expect(403, Some("capability_not_approved"))?;
    ensure!(
        answer.json()?["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("secrets.read")),
        "{answer}"
    );

    // Nowhere else: no status of ours, no Event, no log line of the controller or the API
    // server holds a value (the Project's spec holds the inline one, as written).
    let mut places: Vec<(String, String)> = vec![];
    let status_of = |what: String, status: Value| (what, status.to_string());
    for i in instances.list(&ListParams::default()).await? {
        places.push(status_of(
            format!("PluginInstance {}", i.name_any()),
            json!(i.status),
        ));
    }
    for c in ns.api::<Channel>().list(&ListParams::default()).await? {
        places.push(status_of(
            format!("Channel {}", c.name_any()),
            json!(c.status),
        ));
    }
    let project: Project = ns.get(PROJECT).await?;
    places.push(status_of(
        format!("Project {PROJECT}"),
        json!(project.status),
    ));
    let plugin = Api::<Plugin>::all(ns.client()).get(&id).await?;
    places.push(status_of(format!("Plugin {id}"), json!(plugin.status)));
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&ListParams::default())
        .await?;
    places.push((
        "events.k8s.io Events".into(),
        serde_json::to_string(&events.items)?,
    ));
    let core_events = ns
        .api::<k8s_openapi::api::core::v1::Event>()
        .list(&ListParams::default())
        .await?;
    places.push((
        "core Events".into(),
        serde_json::to_string(&core_events.items)?,
    ));
    places.push((
        "the API server's log".into(),
        std::fs::read_to_string(api.log()?)?,
    ));
    let controller_log = ns.cluster().dev()?.run_dir().join("controller.log");
    places.push((
        "the controller's log".into(),
        std::fs::read_to_string(&controller_log)
            .with_context(|| format!("reading {}", controller_log.display()))?,
    ));
    let mut found = vec![];
    for (place, text) in &places {
        for value in [&first, &second, &inline] {
            if text.contains(value.as_str()) {
                found.push(format!("{place} holds {value}"));
            }
        }
    }
    ensure!(found.is_empty(), "{}", found.join("\n"));
    Ok(())
}

async fn no_namespace(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    crate::controller_support::setup(&ns).await?;
    let projects = ns.api::<Project>();
    let with_namespace = |name: &str| {
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1",
            "kind": "Project",
            "metadata": { "name": name },
            "spec": { "plugins": { "echo": { "secretSettings": { "api_token": {
                "secretKeyRef": { "name": "creds", "key": "token", "namespace": "elsewhere" }
            } } } } },
        })
    };
    // As kubectl applies it (field validation Strict): refused, naming the field.
    let refused = projects
        .patch(
            "strict",
            &PatchParams::apply("e2e").validation_strict(),
            &Patch::Apply(with_namespace("strict")),
        )
        .await;
    let err = refused.err().context("a namespace field was accepted")?;
    ensure!(
        err.to_string().contains("namespace"),
        "refused for another reason: {err}"
    );
    // Server-side apply refuses it whatever the validation asked for.
    let applied = projects
        .patch(
            "applied",
            &PatchParams::apply("e2e"),
            &Patch::Apply(with_namespace("applied")),
        )
        .await;
    ensure!(applied.is_err(), "server-side apply took a namespace field");
    // A plain create (field validation left to the server: Warn) has it dropped: the reference
    // stays in the Project's own namespace.
    let objects = Api::<kube::api::DynamicObject>::namespaced_with(
        ns.client(),
        ns.name(),
        &kube::api::ApiResource::erase::<Project>(&()),
    );
    let dynamic: kube::api::DynamicObject = serde_json::from_value(with_namespace("pruned"))?;
    objects.create(&PostParams::default(), &dynamic).await?;
    let raw = serde_json::to_value(objects.get("pruned").await?)?;
    let reference = &raw["spec"]["plugins"]["echo"]["secretSettings"]["api_token"];
    ensure!(
        *reference == json!({ "secretKeyRef": { "name": "creds", "key": "token" } }),
        "stored {raw}"
    );
    Ok(())
}
