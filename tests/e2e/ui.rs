//! What a plugin shows a person, on the real control plane: the host API lists a chat's panels
//! with signed links, and the echo plugin's panel is served from its link out of the admitted
//! image (the server reads the registry, never the plugin's container), under the reference's
//! policy; a changed, an expired link and paths out of the bundle open nothing. The expired
//! link is signed here with the keys the API server made in its Secret.
//!
//! The card drawer: cards a plugin posts (`POST /cards` of the Plugin API, with the plugin's
//! own token) list in the chat's drawer newest first, unread until marked read, each page
//! loading from its link; a caller without `channels/cards` is refused; a card of a plugin no
//! longer approved for `ui.notification.card` lists as a note; removing the plugin drops its
//! cards.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::resources::{ChannelKind, Plugin};
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::ui::link::{self, Link, LinkKeys, Page};

use crate::controller_support::*;
use crate::host::{Caller, Grant, HostServer, caller_token, host};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "ui::the_echo_panel_is_served_from_a_signed_link_under_the_policy",
            panel_from_a_signed_link,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "ui::posted_cards_list_in_the_drawer_newest_first_until_marked_read",
            cards_in_the_drawer,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "ui::a_card_lists_as_a_note_without_its_approval_and_goes_with_its_plugin",
            cards_of_a_plugin_that_changed,
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

pub(crate) async fn link_keys(ns: &Ns) -> anyhow::Result<LinkKeys> {
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

/// Installs `plugin` and waits until admission read its image: the digest its links name.
async fn install_read(ns: &Ns, plugin: &Plugin) -> anyhow::Result<String> {
    let plugin = install(ns, plugin).await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    let admitted = wait::matches(
        &plugins,
        &plugin.name_any(),
        "the image read",
        WAIT,
        |p: &Plugin| {
            p.status
                .as_ref()
                .and_then(|s| s.image.as_ref())
                .is_some_and(|i| plugin.spec.image.ends_with(&format!("@{}", i.digest)))
        },
    )
    .await?;
    Ok(admitted
        .status
        .and_then(|s| s.image)
        .context("the image read")?
        .digest)
}

async fn panel_from_a_signed_link(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "ui");
    let digest = install_read(&ns, &echo_plugin(&id)?).await?;
    let name = id.clone();
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

/// The echo plugin with a card `score` (`ui/score.html`), `ui.notification.card` approved.
fn card_plugin(id: &str) -> anyhow::Result<Plugin> {
    let mut plugin = echo_plugin(id)?;
    let manifest = &mut plugin.spec.manifest.rest;
    manifest
        .get_mut("capabilities")
        .and_then(Value::as_array_mut)
        .context("the manifest's capabilities")?
        .push(json!("ui.notification.card"));
    manifest.get_mut("ui").context("the manifest's ui")?["cards"] =
        json!([{ "id": "score", "entry": "ui/score.html" }]);
    plugin
        .spec
        .approved_capabilities
        .push("ui.notification.card".into());
    Ok(plugin)
}

/// [`card_plugin`] `id` installed (its image read) and enabled in chat `general`; the
/// plugin's Plugin API token there.
async fn card_world(ns: &Ns, id: &str) -> anyhow::Result<String> {
    install_read(ns, &card_plugin(id)?).await?;
    apply_trusted(
        ns,
        "proj",
        BTreeMap::from([(id.to_string(), entry(true, &[]))]),
    )
    .await?;
    apply(ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    crate::api::api_support::token_of(ns, id, "general").await
}

/// Posts a card as the plugin (its token), waiting out the server's stores catching up with
/// the token; answers the card's id.
async fn post_card(host: &HostServer, token: &str, title: &str) -> anyhow::Result<String> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let url = format!("{}{}/cards", host.url, server::plugin_api::PREFIX);
    let until = std::time::Instant::now() + WAIT;
    loop {
        let answer = http
            .post(&url)
            .bearer_auth(token)
            .json(&json!({ "card": "score", "title": title, "data": { "title": title } }))
            .send()
            .await?;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        if status == StatusCode::CREATED {
            return body["id"]
                .as_str()
                .map(str::to_string)
                .with_context(|| format!("a card's id: {body}"));
        }
        ensure!(
            status == StatusCode::UNAUTHORIZED && std::time::Instant::now() < until,
            "POST /cards: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The chat's drawer, once `done` holds for it (the index catching up with a write).
async fn drawer_until(
    caller: &Caller,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let a = caller
            .send_ready("GET", "/channels/general/cards", None)
            .await?;
        ensure!(a.status == StatusCode::OK, "GET .../cards: {a:?}");
        if done(&a.json) {
            return Ok(a.json);
        }
        ensure!(std::time::Instant::now() < until, "{what}: {}", a.json);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The drawer's (id, unread) pairs, in its order.
fn ids_and_flags(drawer: &Value) -> Vec<(String, bool)> {
    drawer["cards"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["id"].as_str().unwrap_or("").to_string(),
                c["unread"] == true,
            )
        })
        .collect()
}

async fn cards_in_the_drawer(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "card");
    let token = card_world(&ns, &id).await?;
    let first = post_card(&host, &token, "First").await?;
    let second = post_card(&host, &token, "Second").await?;

    // Both, newest first, unread, each with a link to its page.
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "viewer", Grant::All).await?),
    );
    let drawer = drawer_until(&caller, "both cards", |d| {
        d["cards"].as_array().is_some_and(|c| c.len() == 2)
    })
    .await?;
    ensure!(
        ids_and_flags(&drawer) == [(second.clone(), true), (first.clone(), true)],
        "{drawer}"
    );
    ensure!(drawer["unread"] == 2, "{drawer}");
    let newest = &drawer["cards"][0];
    ensure!(
        newest["plugin"] == id.as_str()
            && newest["title"] == "Second"
            && newest["height"] == 160
            && newest["data"] == json!({ "title": "Second" }),
        "{newest}"
    );
    let url = newest["url"]
        .as_str()
        .context("a link to the card's page")?;
    ensure!(url.ends_with("/score.html"), "{url}");
    let http = reqwest::Client::builder().no_proxy().build()?;
    let page = http.get(format!("{}{url}", host.url)).send().await?;
    ensure!(page.status() == StatusCode::OK, "{page:?}");
    ensure!(
        page.headers()["content-security-policy"]
            .to_str()?
            .contains("sandbox allow-scripts"),
        "{page:?}"
    );
    ensure!(page.text().await?.contains("<title>"), "the card's page");

    // Marking the older one read leaves one unread, there and in the namespace's counts.
    let marked = caller
        .post("/channels/general/cards/read", json!({ "ids": [first] }))
        .await?;
    ensure!(
        marked.status == StatusCode::OK && marked.json == json!({ "unread": 1 }),
        "{marked:?}"
    );
    let drawer = drawer_until(&caller, "the older card read", |d| d["unread"] == 1).await?;
    ensure!(
        ids_and_flags(&drawer) == [(second.clone(), true), (first.clone(), false)],
        "{drawer}"
    );
    let counts = caller.send("GET", "/cards/unread", None).await?;
    ensure!(
        counts.status == StatusCode::OK && counts.json["chats"]["general"] == 1,
        "{counts:?}"
    );

    // A caller without channels/cards reads and marks nothing.
    let other = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "runner", Grant::Actions).await?),
    );
    for (method, path, body) in [
        ("GET", "/channels/general/cards", None),
        (
            "POST",
            "/channels/general/cards/read",
            Some(json!({ "all": true })),
        ),
        ("GET", "/cards/unread", None),
    ] {
        let a = other.send(method, path, body).await?;
        ensure!(
            a.status == StatusCode::FORBIDDEN && a.code() == "forbidden",
            "{method} {path}: {a:?}"
        );
    }
    Ok(())
}

async fn cards_of_a_plugin_that_changed(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "cnote");
    let token = card_world(&ns, &id).await?;
    let card = post_card(&host, &token, "Score").await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "viewer", Grant::All).await?),
    );
    drawer_until(&caller, "the card with its link", |d| {
        d["cards"][0]["id"] == card.as_str() && d["cards"][0]["url"].is_string()
    })
    .await?;

    // The owner takes back ui.notification.card: the plugin stays, its card lists as a note.
    let plugins: Api<Plugin> = Api::all(ns.client());
    let mut approved = plugins.get(&id).await?.spec.approved_capabilities;
    approved.retain(|c| c != "ui.notification.card");
    plugins
        .patch(
            &id,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "approvedCapabilities": approved } })),
        )
        .await?;
    let drawer = drawer_until(&caller, "the card as a note", |d| {
        d["cards"][0]["reason"] == "not_approved"
    })
    .await?;
    let noted = &drawer["cards"][0];
    ensure!(
        noted["id"] == card.as_str()
            && noted["note"]
                == format!("plugin {id} is no longer approved for ui.notification.card")
            && noted.get("url").is_none()
            && drawer["unread"] == 1,
        "{drawer}"
    );

    // Removing the plugin drops its cards.
    plugins.delete(&id, &Default::default()).await?;
    drawer_until(&caller, "the removed plugin's cards gone", |d| {
        d["cards"].as_array().is_some_and(Vec::is_empty) && d["unread"] == 0
    })
    .await?;
    Ok(())
}
