//! Trust is separable from editing, on the real API server's RBAC: people bound to the chart's
//! `<fullname>-project-editor` and `<fullname>-project-trustee` ClusterRoles (RoleBindings in
//! the test's namespace, ServiceAccount tokens), the controller running under the chart's own
//! RBAC. An editor changes a project's config but cannot trust it (403), and the edit does not
//! count until a trustee trusts it; a trustee trusts but cannot edit.

use std::collections::BTreeMap;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use model::resources::{Channel, ChannelKind, PluginInstance, Project, ProjectTrust};
use operator::OperatorError;

use crate::chart::{Check, allowed};
use crate::controller_support::{
    RELEASE, WAIT, apply, channel, echo_plugin, entry, install, list_until, plugin_id, project,
    setup, shared,
};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    // Two people's RBAC bindings to propagate, an image to publish and two trust verdicts to
    // wait for: on kind, among the suite's other tests, that took longer than the default.
    vec![
        test(
            "trust::an_editor_changes_the_config_but_only_a_trustee_makes_it_count",
            editor_and_trustee,
        )
        .timeout(std::time::Duration::from_secs(240)),
    ]
}

/// Someone bound to one of the chart's project roles in the test's namespace.
struct Person {
    client: Client,
}

/// The chart's ClusterRole `<fullname>-project-<which>`.
fn role(ns: &Ns, which: &str) -> String {
    let fullname = match ns.cluster().existing() {
        Some(existing) => existing.fullname(),
        None => format!("{RELEASE}-loop-plugins"),
    };
    format!("{fullname}-project-{which}")
}

/// A ServiceAccount `account` bound (RoleBinding in the test's namespace) to the chart's
/// project role `which`, with a client using its token, once RBAC lets it do `probe` (the
/// authorizer learns of a binding through its own informer).
async fn person(ns: &Ns, account: &str, which: &str, probe: &Check<'_>) -> anyhow::Result<Person> {
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.into());
    apply(ns, &sa).await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: role(ns, which),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(format!("{account}-{which}"));
    apply(ns, &binding).await?;
    let user = format!("system:serviceaccount:{}:{account}", ns.name());
    let deadline = tokio::time::Instant::now() + WAIT;
    while !allowed(ns.client(), &user, probe).await? {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "RBAC never let {user} {probe:?} (ClusterRole {})",
            role(ns, which)
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = ns
        .api::<ServiceAccount>()
        .create_token_request(account, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    Ok(Person {
        client: ns.cluster().client_with_token(&token)?,
    })
}

/// The call was refused by RBAC (403).
fn forbidden<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) -> anyhow::Result<()> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
        other => bail!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// Waits for the Project's Trusted condition to have `reason` for its generation `generation`.
async fn trust_reason(ns: &Ns, reason: &'static str, generation: i64) -> anyhow::Result<Project> {
    wait::matches(
        &ns.api::<Project>(),
        "proj",
        &format!("Trusted: {reason} at generation {generation}"),
        WAIT,
        move |p: &Project| {
            p.status.as_ref().is_some_and(|s| {
                s.observed_generation == Some(generation)
                    && s.conditions
                        .iter()
                        .any(|c| c.r#type == "Trusted" && c.reason == reason)
            })
        },
    )
    .await
}

async fn editor_and_trustee(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "ts");
    install(&ns, &echo_plugin(&id)?).await?;
    let check = |verb, resource| Check {
        verb,
        group: "plugins.loop.dev",
        resource,
        namespace: Some(ns.name()),
        name: None,
    };
    let editor = person(&ns, "editor", "editor", &check("patch", "projects")).await?;
    let trustee = person(&ns, "trustee", "trustee", &check("patch", "projecttrusts")).await?;
    let as_editor: Api<Project> = Api::namespaced(editor.client.clone(), ns.name());
    let as_trustee: Api<Project> = Api::namespaced(trustee.client.clone(), ns.name());
    let trusts_as_editor: Api<ProjectTrust> = Api::namespaced(editor.client.clone(), ns.name());
    let by = |manager: &str| PatchParams::apply(manager).force();

    // The editor makes the project, not enabling the plugin; the trustee trusts it.
    let off = BTreeMap::from([(id.clone(), entry(false, &[]))]);
    let on = BTreeMap::from([(id.clone(), entry(true, &[]))]);
    let made = as_editor
        .patch("proj", &by("editor"), &Patch::Apply(&project("proj", off)))
        .await
        .context("the editor makes the project")?;
    operator::trust_project(trustee.client.clone(), ns.name(), "proj", None)
        .await
        .context("the trustee trusts it")?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let first = made.metadata.generation.unwrap_or_default();
    let trusted = trust_reason(&ns, "Trusted", first).await?;
    let old_hash = trusted.status.and_then(|s| s.config_hash);

    // The editor enables the plugin: allowed, but it does not count, as the status says.
    let edited = as_editor
        .patch(
            "proj",
            &by("editor"),
            &Patch::Apply(&project("proj", on.clone())),
        )
        .await
        .context("the editor edits the config")?;
    let second = edited.metadata.generation.unwrap_or_default();
    ensure!(second > first, "the edit did not change the generation");
    let reviewed = trust_reason(&ns, "LastApproved", second).await?;
    // A chat made now is reconciled after the controller saw the edit (the Project's status
    // above came from the same stores): its status shows the plugin does not run.
    apply(&ns, &channel("marker", "proj", ChannelKind::Channel, None)).await?;
    let marker = wait::matches(
        &ns.api::<Channel>(),
        "marker",
        "the marker chat reconciled",
        WAIT,
        |c: &Channel| c.status.is_some(),
    )
    .await?;
    let plugins = marker.status.map(|s| s.plugins).unwrap_or_default();
    ensure!(plugins.is_empty(), "an untrusted edit counted: {plugins:?}");
    let instances = ns.api::<PluginInstance>().list(&Default::default()).await?;
    ensure!(
        instances.items.is_empty(),
        "an untrusted edit made instances"
    );

    // The editor cannot trust it: not with the verb, not by writing or deleting the
    // ProjectTrust, not by writing the Project's status.
    match operator::trust_project(editor.client.clone(), ns.name(), "proj", None).await {
        Err(OperatorError::Trust {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 403 => {}
        other => bail!("the editor's `project trust`: expected 403, got {other:?}"),
    }
    forbidden(
        "the editor applies a ProjectTrust",
        trusts_as_editor
            .patch(
                "proj",
                &by("editor"),
                &Patch::Apply(&ProjectTrust::of("proj", &on)),
            )
            .await,
    )?;
    forbidden(
        "the editor deletes the ProjectTrust",
        trusts_as_editor
            .delete("proj", &DeleteParams::default())
            .await,
    )?;
    let status = serde_json::json!({ "status": { "conditions": [] } });
    forbidden(
        "the editor writes the Project's status",
        as_editor
            .patch_status("proj", &PatchParams::default(), &Patch::Merge(&status))
            .await,
    )?;
    // Nor can the trustee edit the config.
    forbidden(
        "the trustee edits the config",
        as_trustee
            .patch(
                "proj",
                &by("trustee"),
                &Patch::Apply(&project("proj", BTreeMap::new())),
            )
            .await,
    )?;

    // The trustee trusts the version it reviewed (not an older one): now it counts.
    let reviewed = reviewed
        .status
        .and_then(|s| s.config_hash)
        .context("no status.configHash")?;
    match operator::trust_project(
        trustee.client.clone(),
        ns.name(),
        "proj",
        old_hash.as_deref(),
    )
    .await
    {
        Err(OperatorError::ConfigChanged { .. }) => {}
        other => bail!("trusting the old hash: expected ConfigChanged, got {other:?}"),
    }
    operator::trust_project(trustee.client.clone(), ns.name(), "proj", Some(&reviewed))
        .await
        .context("the trustee trusts the edit")?;
    let label = format!("plugins.loop.dev/plugin={id}");
    list_until(
        &ns.api::<PluginInstance>(),
        Some(&label),
        "an instance in each chat once trusted",
        WAIT,
        |all| all.len() == 2,
    )
    .await?;
    trust_reason(&ns, "Trusted", second).await?;
    Ok(())
}
