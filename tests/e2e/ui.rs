//! What a plugin shows a person, on the real control plane: the echo plugin's panel served
//! from a signed link out of its admitted image (the server reads the registry, never the
//! plugin's container), under the reference's policy; a changed, an expired link and paths
//! out of the bundle open nothing. The link is signed here with the keys the API server made
//! in its Secret, as the host API's panel list will sign it for a chat.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};
use model::resources::Plugin;
use reqwest::StatusCode;
use server::ui::link::{self, Link, LinkKeys, Page};

use crate::controller_support::*;
use crate::host::host;
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
    let good = sign(now + 600)?;
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
