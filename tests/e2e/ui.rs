//! What a plugin shows a person, on the real control plane: the host API lists a chat's panels
//! with signed links, and the echo plugin's panel is served from its link out of the admitted
//! image (the server reads the registry, never the plugin's container), under the reference's
//! policy; a changed, an expired link and paths out of the bundle open nothing. The expired
//! link is signed here with the keys the API server made in its Secret.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use model::resources::{ChannelKind, Plugin};
use reqwest::StatusCode;
use server::ui::link::{self, Link, LinkKeys, Page};

use crate::controller_support::*;
use crate::host::{Caller, Grant, caller_token, host};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "ui::the_echo_panel_is_served_from_a_signed_link_under_the_policy",
            panel_from_a_signed_link,
        )
        .timeout(Duration::from_secs(180)),
    ]
}

/// Where the API server keeps its link keys: the chart's release namespace and Secret, or the
/// local server's (its client's namespace, the default name).
fn keys_secret(ns: &Ns) -> (String, String) {
    match ns.cluster().existing() {
        Some(existing) => (
            existing.namespace.clone(),
            format!("{}-ui-links", existing.fullname()),
        ),
        None => (
            ns.client().default_namespace().to_string(),
            server::ui::key_store::DEFAULT_SECRET.to_string(),
        ),
    }
}

async fn link_keys(ns: &Ns) -> anyhow::Result<LinkKeys> {
    let (namespace, name) = keys_secret(ns);
    let secrets: Api<Secret> = Api::namespaced(ns.client(), &namespace);
    let secret = wait::exists(&secrets, &name, WAIT).await?;
    let data = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect();
    Ok(server::ui::keys::read(&data)
        .with_context(|| format!("{namespace}/{name} holds no link keys"))?
        .keys)
}

async fn panel_from_a_signed_link(ns: Ns) -> anyhow::Result<()> {
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "ui");
    let plugin = install(&ns, &echo_plugin(&id)?).await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    let admitted = wait::matches(&plugins, &id, "the image read", WAIT, |p: &Plugin| {
        p.status
            .as_ref()
            .and_then(|s| s.image.as_ref())
            .is_some_and(|i| plugin.spec.image.ends_with(&format!("@{}", i.digest)))
    })
    .await?;
    let name = admitted.name_any();
    let digest = admitted
        .status
        .and_then(|s| s.image)
        .context("the image read")?
        .digest;
    let keys = link_keys(&ns).await?;
    let now = jiff::Timestamp::now().as_second();
    let sign = |expires: i64| {
        link::sign(
            &keys,
            &Link {
                plugin: name.clone(),
                digest: digest.clone(),
                chat: format!("{}/general", ns.name()),
                page: Page::Panel("main".into()),
                expires,
            },
        )
    };
    // The chat's panels, as a caller the chart's caller role grants sees them.
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[]))]),
    )
    .await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "viewer", Grant::All).await?),
    );
    let listed = caller
        .send_ready(
            "GET",
            &format!("/channels/general/plugins/{id}/panels"),
            None,
        )
        .await?;
    ensure!(listed.status == StatusCode::OK, "{listed:?}");
    let panel = &listed.json["panels"][0];
    ensure!(
        panel["id"] == "main" && panel["label"] == "Echo",
        "{listed:?}"
    );
    let good = panel["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("/ui/v1/"))
        .and_then(|rest| rest.strip_suffix("/main/index.html"))
        .with_context(|| format!("a link to the panel's entry: {listed:?}"))?
        .to_string();
    ensure!(
        link::verify(&keys, &good, now)?.chat == format!("{}/general", ns.name()),
        "the link names the chat"
    );
    let http = reqwest::Client::builder().no_proxy().build()?;
    let get = |token: String, path: &str| {
        let url = format!("{}/ui/v1/{token}/{path}", host.url);
        let http = http.clone();
        async move { http.get(url).send().await }
    };

    // The panel, as the image ships it, with every header of the policy.
    let answer = get(good.clone(), "main/index.html").await?;
    ensure!(answer.status() == StatusCode::OK, "{answer:?}");
    let headers = answer.headers().clone();
    let csp = headers["content-security-policy"].to_str()?.to_string();
    let own = format!("/ui/v1/{good}/");
    for directive in [
        "default-src 'none'",
        "form-action 'none'",
        "frame-src 'none'",
        "base-uri 'none'",
        "sandbox allow-scripts",
    ] {
        ensure!(csp.contains(directive), "{directive} missing: {csp}");
    }
    for directive in ["script-src", "style-src", "connect-src"] {
        let sources = csp
            .split(';')
            .map(str::trim)
            .find_map(|d| d.strip_prefix(directive))
            .with_context(|| format!("{directive} missing: {csp}"))?;
        ensure!(
            sources.trim().starts_with("http://") && sources.trim().ends_with(&own),
            "{directive} names more than the bundle: {sources}"
        );
    }
    ensure!(
        !csp.contains("unsafe") && !csp.contains("allow-same-origin"),
        "{csp}"
    );
    ensure!(headers["x-content-type-options"] == "nosniff");
    ensure!(headers["referrer-policy"] == "no-referrer");
    ensure!(headers["content-type"] == "text/html; charset=utf-8");
    ensure!(headers["etag"].to_str()? == format!("\"{digest}\""));
    let shipped =
        std::fs::read(testkit::repo_root().join("examples/echo-plugin/ui/main/index.html"))?;
    ensure!(answer.bytes().await?.as_ref() == shipped.as_slice());
    let script = get(good.clone(), "main/app.js").await?;
    ensure!(script.status() == StatusCode::OK, "{script:?}");
    ensure!(script.headers()["content-type"] == "text/javascript; charset=utf-8");

    // A changed byte, an expired link: 403.
    let mut changed = good.clone().into_bytes();
    changed[5] = if changed[5] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed)?;
    for (what, token) in [("changed", changed), ("expired", sign(now - 1)?)] {
        let answer = get(token, "main/index.html").await?;
        ensure!(
            answer.status() == StatusCode::FORBIDDEN,
            "{what}: {answer:?}"
        );
    }
    // Paths out of the bundle, encoded so the client sends them as written: 404.
    for path in [
        "..%2fplugin.json",
        "main%2f..%2f..%2fplugin.json",
        "main/%252e%252e/plugin.json",
        "plugin.json",
        "main",
    ] {
        let answer = get(good.clone(), path).await?;
        ensure!(
            answer.status() == StatusCode::NOT_FOUND,
            "{path}: {answer:?}"
        );
    }
    Ok(())
}
