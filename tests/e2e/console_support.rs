//! What the console's browser tests stand on: the echo plugin with a card (its page the
//! fixture `tests/e2e/fixtures/console-card`, which uses the bridge module), installed from an
//! image carrying both and enabled in chat `general` of project `proj`; a person's token, bound
//! in the test's namespace to the rules of the chart's `loop-plugins-host-api-caller` role as
//! `deploy/` renders it (so a grant the console needs and the chart lacks fails here); the API
//! server; and headless Chromium with the console open, signed in through the URL's fragment
//! as `loop-plugins console` prints it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use model::resources::{ChannelKind, Plugin};
use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::browser::{Browser, Page};
use testkit::images::{ECHO_ENTRYPOINT, ImageContent};

use crate::controller_support::*;
use crate::host::{HostServer, host};
use crate::support::{Ns, wait};

/// The card's page: `score.html` and what it loads.
pub const CARD_FIXTURE: &str = "tests/e2e/fixtures/console-card";
/// How long the console may take to show something.
pub const SHOW: Duration = Duration::from_secs(60);

/// The console, signed in, in a browser.
pub struct ConsoleWorld {
    pub host: HostServer,
    /// The echo plugin with the card.
    pub plugin: String,
    /// The person's token (the caller role's rules).
    pub token: String,
    /// Kept for as long as the page: dropping it ends the browser.
    _browser: Browser,
    pub page: Page,
    /// The cluster's shared state, held for reading (a test that kills the release's leading
    /// Pod or changes the HostConfig waits until the page is done), or for writing by a test
    /// that changes the HostConfig itself; dropped last.
    _hold: Box<dyn std::any::Any + Send + Sync>,
}

/// The echo plugin under `id`, with a card `score` (`ui/card/score.html`), approved for
/// `ui.notification.card`, `notifications.send` and `ui.command`.
fn console_plugin(id: &str) -> anyhow::Result<Plugin> {
    let mut plugin = echo_plugin(id)?;
    let manifest = &mut plugin.spec.manifest.rest;
    let capabilities = manifest
        .get_mut("capabilities")
        .and_then(Value::as_array_mut)
        .context("the manifest's capabilities")?;
    capabilities.push(json!("ui.notification.card"));
    capabilities.push(json!("notifications.send"));
    capabilities.push(json!("ui.command"));
    manifest.get_mut("ui").context("the manifest's ui")?["cards"] =
        json!([{ "id": "score", "entry": "ui/card/score.html" }]);
    for approved in ["ui.notification.card", "notifications.send", "ui.command"] {
        plugin.spec.approved_capabilities.push(approved.into());
    }
    Ok(plugin)
}

/// The card's files by their path under `ui/`, with the bridge module beside them as an
/// author copies it in.
fn card_files() -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let root = testkit::repo_root();
    let mut files = BTreeMap::new();
    for name in ["score.html", "score.js", "score.css"] {
        let path = root.join(CARD_FIXTURE).join(name);
        files.insert(
            format!("ui/card/{name}"),
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
        );
    }
    let module = root.join("packages/loop-plugin-ui/index.js");
    files.insert(
        "ui/card/loop-plugin-ui.js".into(),
        std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?,
    );
    Ok(files)
}

/// Installs `plugin` from an image carrying the echo example's files and the card's, and
/// waits until admission read the image (the digest its links name).
async fn install_with_card(ns: &Ns, mut plugin: Plugin) -> anyhow::Result<Plugin> {
    let id = plugin.name_any();
    let mut content = ImageContent::for_plugin(&plugin);
    content.files.extend(card_files()?);
    plugin.spec.image = ns.cluster().plugin_images().push(&id, &content).await?;
    plugin.spec.command = vec![ECHO_ENTRYPOINT.into()];
    let plugins: Api<Plugin> = Api::all(ns.client());
    plugins
        .patch(
            &id,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&plugin),
        )
        .await?;
    let image = plugin.spec.image.clone();
    let read = wait::matches(&plugins, &id, "the image read", WAIT, |p: &Plugin| {
        p.status
            .as_ref()
            .and_then(|s| s.image.as_ref())
            .is_some_and(|i| image.ends_with(&format!("@{}", i.digest)))
    })
    .await?;
    Ok(read)
}

/// The console's plugin `id` as a next version, 0.2.0, that also asks for `memory.read`,
/// pushed under the installed image's tag (so Upgrade with no image looks it up again);
/// answers it pinned.
pub async fn push_next_version(ns: &Ns, id: &str) -> anyhow::Result<String> {
    let mut plugin = console_plugin(id)?;
    plugin.spec.manifest.version = Some("0.2.0".into());
    plugin
        .spec
        .manifest
        .rest
        .get_mut("capabilities")
        .and_then(Value::as_array_mut)
        .context("the manifest's capabilities")?
        .push(json!("memory.read"));
    let mut content = ImageContent::for_plugin(&plugin);
    content.files.extend(card_files()?);
    ns.cluster().plugin_images().push(id, &content).await
}

/// The rules of the chart's host API callers' role, as deploy/ renders it.
fn caller_rules() -> anyhow::Result<Vec<k8s_openapi::api::rbac::v1::PolicyRule>> {
    let path = testkit::repo_root().join("deploy/trigger.yaml");
    let text = std::fs::read_to_string(&path)?;
    for doc in text.split("\n---") {
        if !doc.contains("kind: ClusterRole") || !doc.contains("-host-api-caller") {
            continue;
        }
        let role: ClusterRole = serde_saphyr::from_str(doc)
            .with_context(|| format!("the caller role in {}", path.display()))?;
        return Ok(role.rules.unwrap_or_default());
    }
    anyhow::bail!("no host API callers' ClusterRole in {}", path.display())
}

/// A ServiceAccount `name` of the test's namespace holding the caller role's rules there, and
/// a token for it.
pub async fn person_token(ns: &Ns, name: &str) -> anyhow::Result<String> {
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.into());
    apply(ns, &account).await?;
    let mut role = Role {
        rules: Some(caller_rules()?),
        ..Default::default()
    };
    role.metadata.name = Some(name.into());
    apply(ns, &role).await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(name.into());
    apply(ns, &binding).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    ns.api::<ServiceAccount>()
        .create_token_request(name, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")
}

impl ConsoleWorld {
    /// The plugin installed and enabled in `general` (a thread of it and another channel
    /// beside), the person's token, the console open and signed in with `general` chosen.
    pub async fn start(ns: &Ns) -> anyhow::Result<ConsoleWorld> {
        let shared = shared().await;
        Self::start_holding(ns, Box::new(shared)).await
    }

    /// [`ConsoleWorld::start`] for a test that changes the HostConfig: the cluster's state
    /// held for writing until the page is done.
    pub async fn start_exclusive(ns: &Ns) -> anyhow::Result<ConsoleWorld> {
        let exclusive = exclusive().await;
        Self::start_holding(ns, Box::new(exclusive)).await
    }

    async fn start_holding(
        ns: &Ns,
        hold: Box<dyn std::any::Any + Send + Sync>,
    ) -> anyhow::Result<ConsoleWorld> {
        let host = host(ns).await?;
        let id = plugin_id(ns, "con");
        install_with_card(ns, console_plugin(&id)?).await?;
        apply_trusted(ns, "proj", BTreeMap::from([(id.clone(), entry(true, &[]))])).await?;
        for c in [
            channel("general", "proj", ChannelKind::Channel, None),
            channel("general-t1", "proj", ChannelKind::Thread, Some("general")),
            channel("random", "proj", ChannelKind::Channel, None),
        ] {
            apply(ns, &c).await?;
        }
        let token = person_token(ns, "person").await?;
        let browser = Browser::launch(
            ns.cluster()
                .run_dir()
                .join(format!("chromium-{}.log", ns.name())),
        )
        .await?;
        let page = browser.new_page().await?;
        let url = format!(
            "{}/console/#namespace={}&token={token}",
            host.url,
            ns.name()
        );
        page.navigate(&url).await?;
        let world = ConsoleWorld {
            host,
            plugin: id,
            token,
            _browser: browser,
            page,
            _hold: hold,
        };
        world
            .wait(
                "the console signed in",
                "window.loopConsole?.ready === true",
            )
            .await?;
        world
            .wait(
                "chat general chosen with the plugin's instance",
                "document.querySelector('#plugins tr[data-plugin]') !== null",
            )
            .await?;
        Ok(world)
    }

    /// Waits until `expression` holds in the console's page, naming what failed with what the
    /// browser reported.
    pub async fn wait(&self, what: &str, expression: &str) -> anyhow::Result<()> {
        if let Err(e) = self.page.wait_for(expression, SHOW).await {
            anyhow::bail!("{what}: {e}\nthe browser said:\n  {}", self.reports());
        }
        Ok(())
    }

    /// Everything the browser reported, one line each.
    pub fn reports(&self) -> String {
        self.page
            .console()
            .iter()
            .map(|e| format!("[{} {}] {}", e.source, e.level, e.text.trim()))
            .collect::<Vec<_>>()
            .join("\n  ")
    }

    /// The bundles' prefix on the API server: every pane's and card's frame is under it.
    pub fn bundles(&self) -> String {
        format!("{}{}/", self.host.url, server::ui::route::PREFIX)
    }

    /// Posts a card as the plugin (its own token, Plugin API), waiting out the server's
    /// stores catching up with the token; answers the card's id.
    pub async fn post_card(&self, ns: &Ns, title: &str, data: Value) -> anyhow::Result<String> {
        let token = crate::api::api_support::token_of(ns, &self.plugin, "general").await?;
        let http = reqwest::Client::builder().no_proxy().build()?;
        let url = format!("{}{}/cards", self.host.url, server::plugin_api::PREFIX);
        let until = std::time::Instant::now() + WAIT;
        loop {
            let answer = http
                .post(&url)
                .bearer_auth(&token)
                .json(&json!({ "card": "score", "title": title, "data": data }))
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

    /// Posts a notification in chat `general` as the plugin does (`POST /notifications` of
    /// the Plugin API, its own token); answers its id.
    pub async fn post_notification(&self, ns: &Ns, body: Value) -> anyhow::Result<String> {
        let token = crate::api::api_support::token_of(ns, &self.plugin, "general").await?;
        let http = reqwest::Client::builder().no_proxy().build()?;
        let url = format!(
            "{}{}/notifications",
            self.host.url,
            server::plugin_api::PREFIX
        );
        let answer = http
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        ensure!(
            status == StatusCode::CREATED,
            "POST /notifications: {status} {body}"
        );
        body["id"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("a notification's id: {body}"))
    }

    /// Sends a UI command to chat `general` as the plugin does (`POST /ui/commands` of the
    /// Plugin API, its own token); answers the status and the answer.
    pub async fn post_ui_command(&self, ns: &Ns, body: Value) -> anyhow::Result<(u16, Value)> {
        let token = crate::api::api_support::token_of(ns, &self.plugin, "general").await?;
        let http = reqwest::Client::builder().no_proxy().build()?;
        let url = format!(
            "{}{}/ui/commands",
            self.host.url,
            server::plugin_api::PREFIX
        );
        let answer = http
            .post(&url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await?;
        let status = answer.status().as_u16();
        Ok((status, answer.json().await.unwrap_or(Value::Null)))
    }

    /// Starts a run of the plugin's `say` agent in chat `general` as the plugin does
    /// (`POST /runs` of the Plugin API, its own token); answers the run's id.
    pub async fn post_run(&self, ns: &Ns, prompt: &str) -> anyhow::Result<String> {
        let token = crate::api::api_support::token_of(ns, &self.plugin, "general").await?;
        let http = reqwest::Client::builder().no_proxy().build()?;
        let url = format!("{}{}/runs", self.host.url, server::plugin_api::PREFIX);
        let answer = http
            .post(&url)
            .bearer_auth(&token)
            .json(&json!({ "agent": "say", "prompt": prompt }))
            .send()
            .await?;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        ensure!(status.is_success(), "POST /runs: {status} {body}");
        body["run_id"]
            .as_str()
            .or(body["id"].as_str())
            .map(str::to_string)
            .with_context(|| format!("a run's id: {body}"))
    }

    /// Where the run keeps this test's screenshots.
    pub fn screenshot_path(ns: &Ns, what: &str) -> PathBuf {
        ns.cluster()
            .run_dir()
            .join("screenshots")
            .join(format!("{}-{what}.png", ns.name()))
    }

    /// Takes a screenshot; with `LOOP_PLUGINS_CONSOLE_SHOTS` set to a folder, also keeps it
    /// there as `console-<what>.png` (how docs/images/ is made).
    pub async fn screenshot(&self, ns: &Ns, what: &str) -> anyhow::Result<PathBuf> {
        let path = Self::screenshot_path(ns, what);
        self.page.screenshot(&path).await?;
        if let Some(dir) = std::env::var_os("LOOP_PLUGINS_CONSOLE_SHOTS") {
            let kept = PathBuf::from(dir).join(format!("console-{what}.png"));
            std::fs::create_dir_all(kept.parent().unwrap_or(&PathBuf::from(".")))?;
            std::fs::copy(&path, &kept)?;
        }
        Ok(path)
    }
}
