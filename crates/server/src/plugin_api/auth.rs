//! Who is calling: the bearer token, held to one (plugin, chat). [`decide`] is the pure rule;
//! [`resolve()`] looks the token up and reads the stores for it, once per token while they do not
//! change (`callers`); the [`Caller`] extractor that routes take is in `routes`.
//!
//! In order:
//! 1. no `Authorization: Bearer` header, a malformed one, a token no Secret holds, or one whose
//!    PluginInstance (matched by uid, so a new instance of the same name does not revive an
//!    old token), Plugin or chat is gone or going → 401;
//! 2. the chat's project does not enable the plugin (plugins off in HostConfig, a chat that
//!    runs no plugins, the project's trusted config, see `model::resolve::plugin_enabled`), or the
//!    Plugin's manifest is not valid → 409;
//! 3. each route then requires its capability: approved by the owner
//!    (`Plugin.spec.approvedCapabilities`) and declared by the manifest → else 403.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use kube::{Resource, ResourceExt};

use super::error::{ApiError, ApiResult, Code};
use crate::index::{Index, InstanceKey, TokenOwner};
use ::index::tokens::TokenDigest;
use model::manifest::{Capability, Manifest};
use model::resolve;
use model::resources::{Channel, HostConfig, Plugin, PluginInstance, Project, ProjectTrust};

/// The longest token we look at; the controller's are 64 hex digits.
const MAX_TOKEN: usize = 512;

/// The token of an `Authorization` header value: `Bearer <token>`, the scheme in any case,
/// the token a run of visible ASCII.
pub fn bearer(header: Option<&[u8]>) -> Result<&str, ApiError> {
    let Some(raw) = header else {
        return Err(ApiError::new(
            Code::MissingToken,
            "no Authorization header: send Authorization: Bearer <contents of LOOP_PLUGIN_TOKEN_FILE>",
        ));
    };
    let malformed = |why: &str| {
        ApiError::new(
            Code::MalformedToken,
            format!("the Authorization header {why}; send Bearer <token>"),
        )
    };
    let text = std::str::from_utf8(raw).map_err(|_| malformed("is not text"))?;
    let text = text.trim();
    let (scheme, token) = text
        .split_once(' ')
        .ok_or_else(|| malformed("has no token"))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed("does not use the Bearer scheme"));
    }
    let token = token.trim_start();
    if token.is_empty() || token.len() > MAX_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(malformed("holds no well-formed token"));
    }
    Ok(token)
}

/// The (plugin, chat) a request speaks for, with everything its routes read: decided once per
/// token while nothing that decides it changes ([`super::callers`]), shared by the requests
/// that carry it.
#[derive(Clone, Debug)]
pub struct Caller(Arc<Speaker>);

impl Caller {
    /// Whether both are the one decision (a memo's answer given twice).
    pub fn is(&self, other: &Caller) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Caller {
    type Target = Speaker;

    fn deref(&self) -> &Speaker {
        &self.0
    }
}

/// What a token speaks for.
#[derive(Debug)]
pub struct Speaker {
    pub namespace: String,
    pub instance: Arc<PluginInstance>,
    pub channel: Arc<Channel>,
    pub plugin: Arc<Plugin>,
    pub project: Arc<Project>,
    /// The HostConfig as the index keeps it (read, never copied).
    pub host: Arc<HostConfig>,
    pub manifest: Arc<Manifest>,
    /// The capabilities the owner approved that the manifest declares, found when a route
    /// first asks ([`Speaker::approved`]): most routes ask for one at most.
    approved: OnceLock<BTreeSet<Capability>>,
}

impl Speaker {
    pub fn plugin_id(&self) -> String {
        self.plugin.name_any()
    }

    pub fn channel_name(&self) -> String {
        self.channel.name_any()
    }

    pub fn project_name(&self) -> &str {
        &self.channel.spec.project
    }

    pub fn instance_name(&self) -> String {
        self.instance.name_any()
    }

    pub fn key(&self) -> InstanceKey {
        InstanceKey::new(&self.namespace, &self.instance_name())
    }

    pub fn instance_uid(&self) -> String {
        self.instance.uid().unwrap_or_default()
    }

    /// The capabilities the owner approved that the manifest declares.
    pub fn approved(&self) -> &BTreeSet<Capability> {
        self.approved
            .get_or_init(|| resolve::approved_capabilities(&self.plugin, &self.manifest))
    }

    /// 403 unless the capability is approved.
    pub fn require(&self, capability: Capability) -> ApiResult<()> {
        if self.approved().contains(&capability) {
            return Ok(());
        }
        let why = if self.manifest.declares_capability(capability) {
            "the owner did not approve it"
        } else {
            "the manifest does not declare it"
        };
        Err(ApiError::new(
            Code::CapabilityNotApproved,
            format!("this route needs the capability {capability}, and {why}"),
        ))
    }
}

/// What the stores hold about a token's owner.
pub struct Found<'a> {
    pub owner: &'a TokenOwner,
    pub instance: Option<Arc<PluginInstance>>,
    pub plugin: Option<Arc<Plugin>>,
    pub channel: Option<Arc<Channel>>,
    pub project: Option<Arc<Project>>,
    /// The project's trust (the same-named ProjectTrust).
    pub project_trust: Option<Arc<ProjectTrust>>,
    /// The project's config hash when known (the index keeps it per generation); else it is
    /// computed here.
    pub project_hash: Option<String>,
    pub host: Arc<HostConfig>,
    /// The Plugin's manifest, or why it does not parse (when there is a Plugin).
    pub manifest: Option<Result<Arc<Manifest>, String>>,
}

/// Decides who calls, or the 401 or 409 answer.
pub fn decide(found: Found<'_>) -> ApiResult<Caller> {
    let removed = |what: &str| {
        ApiError::new(
            Code::InvalidToken,
            format!("the token is no longer valid: its {what} was removed"),
        )
    };
    let owner = found.owner;
    let live = |meta: &kube::api::ObjectMeta| meta.deletion_timestamp.is_none();
    let instance = found
        .instance
        .filter(|i| {
            live(i.meta())
                && i.uid().as_deref() == Some(owner.instance_uid.as_str())
                && i.spec.plugin == owner.plugin
                && i.spec.channel == owner.channel
        })
        .ok_or_else(|| removed("plugin instance"))?;
    let plugin = found
        .plugin
        .filter(|p| live(p.meta()))
        .ok_or_else(|| removed("plugin"))?;
    let channel = found
        .channel
        .filter(|c| live(c.meta()))
        .ok_or_else(|| removed("chat"))?;

    let not_enabled = |why: String| ApiError::new(Code::PluginNotEnabled, why);
    let plugin_id = plugin.name_any();
    if !resolve::runs_plugins(&channel.spec) {
        return Err(not_enabled(format!(
            "plugins do not run in chat {}: it is hidden or not a desktop chat",
            channel.name_any()
        )));
    }
    let project = found.project.ok_or_else(|| {
        not_enabled(format!(
            "project {} of chat {} does not exist, so it does not enable plugin {plugin_id}",
            channel.spec.project,
            channel.name_any()
        ))
    })?;
    let mut view = resolve::ProjectView::new(&project, found.project_trust.as_deref());
    if let Some(hash) = &found.project_hash {
        view = view.with_hash(hash);
    }
    let enabled = resolve::plugin_enabled(&found.host.spec.plugins, &plugin_id, view);
    if !enabled.is_enabled() {
        return Err(not_enabled(format!(
            "project {} does not enable plugin {plugin_id}: {}",
            project.name_any(),
            enabled.reason
        )));
    }
    let manifest = match found.manifest {
        Some(Ok(m)) => m,
        Some(Err(why)) => {
            return Err(not_enabled(format!(
                "plugin {plugin_id} is not admitted: its manifest is not valid: {why}"
            )));
        }
        None => return Err(removed("plugin")),
    };
    Ok(Caller(Arc::new(Speaker {
        namespace: owner.namespace.clone(),
        instance,
        channel,
        plugin,
        project,
        host: found.host,
        manifest,
        approved: OnceLock::new(),
    })))
}

/// Who the token whose digest is `presented` speaks for, from the stores as they are.
pub fn resolve(index: &Index, presented: &TokenDigest) -> ApiResult<Caller> {
    let owner = index.tokens.lookup_digest(presented).ok_or_else(|| {
        ApiError::new(
            Code::InvalidToken,
            "the token is not one this host issued, or no longer valid",
        )
    })?;
    let plugin = index.plugin(&owner.plugin);
    let channel = index.channel(&owner.namespace, &owner.channel);
    let project = channel
        .as_ref()
        .and_then(|c| index.project(&owner.namespace, &c.spec.project));
    let project_trust = channel
        .as_ref()
        .and_then(|c| index.project_trust(&owner.namespace, &c.spec.project));
    let project_hash = project.as_ref().map(|p| index.config_hashes.of(p));
    let manifest = plugin
        .as_ref()
        .map(|p| index.manifests.of(p).map_err(|e| e.to_string()));
    decide(Found {
        owner: &owner,
        instance: index.instance(&InstanceKey::new(&owner.namespace, &owner.instance)),
        plugin,
        channel,
        project,
        project_trust,
        project_hash,
        host: index.host_config(),
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_headers() {
        assert_eq!(bearer(Some(b"Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(Some(b"bearer   abc  ")).unwrap(), "abc");
        let code = |h: Option<&[u8]>| bearer(h).unwrap_err().code;
        assert_eq!(code(None), Code::MissingToken);
        assert_eq!(code(Some(b"Basic abc")), Code::MalformedToken);
        assert_eq!(code(Some(b"Bearer")), Code::MalformedToken);
        assert_eq!(code(Some(b"Bearer a b")), Code::MalformedToken);
        assert_eq!(code(Some(b"Bearer \xff")), Code::MalformedToken);
        assert_eq!(code(Some(b"abc")), Code::MalformedToken);
    }
}
