//! `GET .../plugins/{plugin}/panels`: the panes a chat may open for a plugin its project
//! enables, each with a signed link to its page ([`crate::ui`]). A plugin the chat's project
//! does not enable answers `plugin_not_enabled`, as for every host API route, so a pane
//! already open says so. The links name the image the Plugin runs now; the list is built by
//! the pure [`panel_links`].

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::HostState;
use crate::ui::bundle::UI_DIR;
use crate::ui::link::{self, LINK_LIFETIME_SECONDS, Link, LinkKeys, Page};
use crate::ui::route::PREFIX as UI_PREFIX;
use model::manifest::{Capability, Panel};

/// One pane a chat may open, as the list answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PanelLink {
    pub id: String,
    pub label: String,
    pub singleton: bool,
    /// The page's signed link, a path on this server.
    pub url: String,
    /// Unix seconds after which the link opens nothing: list again before.
    pub expires: i64,
}

/// What a chat's panel links are made of.
pub struct Panels<'a> {
    pub plugin: &'a str,
    /// The image digest the Plugin runs.
    pub digest: &'a str,
    /// `<namespace>/<channel>`.
    pub chat: &'a str,
    pub panels: &'a [Panel],
    /// Whether `ui.panel` is approved: without it there are none to open.
    pub approved: bool,
}

/// The signed links of `panels` at `now` (unix seconds).
pub fn panel_links(
    panels: &Panels<'_>,
    keys: &LinkKeys,
    now: i64,
) -> Result<Vec<PanelLink>, link::ClaimError> {
    if !panels.approved {
        return Ok(vec![]);
    }
    let expires = now + LINK_LIFETIME_SECONDS;
    panels
        .panels
        .iter()
        .map(|panel| {
            let token = link::sign(
                keys,
                &Link {
                    plugin: panels.plugin.to_string(),
                    digest: panels.digest.to_string(),
                    chat: panels.chat.to_string(),
                    page: Page::Panel(panel.id.clone()),
                    expires,
                },
            )?;
            let page = panel.entry.strip_prefix(UI_DIR).unwrap_or(&panel.entry);
            Ok(PanelLink {
                id: panel.id.clone(),
                label: panel.label.clone(),
                singleton: panel.singleton,
                url: format!("{UI_PREFIX}/{token}/{page}"),
                expires,
            })
        })
        .collect()
}

pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat, plugin)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    // Serving never starts the container, nor waits for its instance to be made.
    let target = s
        .authorized_enabled(&headers, (&ns, &chat, &plugin), |ns, i| {
            Permission::panels(ns, i)
        })
        .await?;
    let keys = s.link_keys()?;
    let digest = running_digest(&target.plugin)?;
    let links = panel_links(
        &Panels {
            plugin: &plugin,
            digest: &digest,
            chat: &format!("{ns}/{chat}"),
            panels: &target.compiled.manifest.ui.panels,
            approved: target.approved.contains(&Capability::UiPanel),
        },
        &keys,
        jiff::Timestamp::now().as_second(),
    )
    .map_err(|e| HostError::new(Code::Internal, e.to_string()))?;
    // What its frames get as the bridge's `event` (docs/bridge.md): what it subscribes to.
    let events: &[String] = if target.approved.contains(&Capability::EventsSubscribe) {
        &target.compiled.manifest.events
    } else {
        &[]
    };
    Ok(Json(json!({ "panels": links, "events": events })).into_response())
}

/// The digest admission read the Plugin's image at.
fn running_digest(plugin: &model::resources::Plugin) -> HostResult<String> {
    plugin
        .status
        .as_ref()
        .and_then(|s| s.image.as_ref())
        .map(|i| i.digest.clone())
        .ok_or_else(|| {
            HostError::new(
                Code::InstancePending,
                "the plugin's image has not been read yet; try again",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::link::LinkKey;

    fn keys() -> LinkKeys {
        LinkKeys {
            current: LinkKey {
                id: "k".into(),
                secret: b"key".to_vec(),
            },
            previous: None,
        }
    }

    fn main_panel() -> Panel {
        Panel {
            id: "main".into(),
            label: "Echo".into(),
            entry: "ui/main/index.html".into(),
            singleton: true,
        }
    }

    fn panels(list: &[Panel], approved: bool) -> Panels<'_> {
        Panels {
            plugin: "echo",
            digest: "sha256:aa",
            chat: "team/general",
            panels: list,
            approved,
        }
    }

    #[test]
    fn each_panel_gets_a_link_to_its_entry_that_verifies_to_this_chat() {
        let list = [main_panel()];
        let links = panel_links(&panels(&list, true), &keys(), 100).unwrap();
        assert_eq!(links.len(), 1);
        let l = &links[0];
        assert_eq!(
            (l.id.as_str(), l.label.as_str(), l.singleton),
            ("main", "Echo", true)
        );
        assert_eq!(l.expires, 100 + LINK_LIFETIME_SECONDS);
        let rest = l.url.strip_prefix("/ui/v1/").unwrap();
        let (token, page) = rest.split_once('/').unwrap();
        assert_eq!(page, "main/index.html");
        assert_eq!(
            link::verify(&keys(), token, 100).unwrap(),
            Link {
                plugin: "echo".into(),
                digest: "sha256:aa".into(),
                chat: "team/general".into(),
                page: Page::Panel("main".into()),
                expires: 100 + LINK_LIFETIME_SECONDS,
            }
        );
    }

    #[test]
    fn without_ui_panel_approved_there_is_nothing_to_open() {
        let list = [main_panel()];
        assert_eq!(panel_links(&panels(&list, false), &keys(), 100), Ok(vec![]));
    }
}
