//! The index from a plugin token's SHA-256 to the instance whose Secret holds it.
//!
//! The index is fed by the watch of the instances' Secrets (label-selected, only those the
//! controller made), the way a reflector store is, but keeps only each token's digest and where
//! it belongs: the API server never holds a plugin's token or secret in memory past the event
//! that carried it. A lookup finds the entry by digest and then compares the digests in
//! constant time.

use std::collections::HashMap;
use std::sync::RwLock;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use model::contract::TOKEN_KEY;
use model::names;

/// The SHA-256 of a token.
pub type TokenDigest = [u8; 32];

pub fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// Where a token belongs: the instance its Secret was made for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenOwner {
    pub namespace: String,
    /// The PluginInstance's name (label `plugins.loop.dev/instance`).
    pub instance: String,
    /// The uid of the PluginInstance that owns the Secret: a token outlives neither.
    pub instance_uid: String,
    pub plugin: String,
    pub channel: String,
}

#[derive(Clone, Debug)]
struct Entry {
    digest: TokenDigest,
    owner: TokenOwner,
}

#[derive(Default)]
struct Inner {
    by_digest: HashMap<TokenDigest, Entry>,
    /// (namespace, Secret name) → digest, to drop a Secret's old token when it changes.
    by_secret: HashMap<(String, String), TokenDigest>,
    /// Secrets listed since the watch (re)started, swapped in at `InitDone`.
    buffer: Option<Vec<Secret>>,
}

/// Token digests of every live instance Secret.
#[derive(Default)]
pub struct TokenIndex {
    inner: RwLock<Inner>,
}

impl TokenIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event of the Secret watch.
    pub fn apply_watcher_event(&self, event: &watcher::Event<Secret>) {
        let mut inner = self.inner.write().expect("token index lock");
        match event {
            watcher::Event::Apply(secret) => {
                inner.remove(secret);
                inner.insert(secret);
            }
            watcher::Event::Delete(secret) => inner.remove(secret),
            watcher::Event::Init => inner.buffer = Some(Vec::new()),
            watcher::Event::InitApply(secret) => {
                if let Some(buffer) = inner.buffer.as_mut() {
                    buffer.push(secret.clone());
                }
            }
            watcher::Event::InitDone => {
                let listed = inner.buffer.take().unwrap_or_default();
                inner.by_digest.clear();
                inner.by_secret.clear();
                for secret in &listed {
                    inner.insert(secret);
                }
            }
        }
    }

    /// The owner of `token`, if a live Secret holds it.
    pub fn lookup(&self, token: &str) -> Option<TokenOwner> {
        self.lookup_digest(&digest(token))
    }

    /// [`TokenIndex::lookup`] of a presented token's digest.
    pub fn lookup_digest(&self, presented: &TokenDigest) -> Option<TokenOwner> {
        let inner = self.inner.read().expect("token index lock");
        let entry = inner.by_digest.get(presented)?;
        bool::from(entry.digest.ct_eq(presented)).then(|| entry.owner.clone())
    }

    /// How many tokens the index holds.
    pub fn len(&self) -> usize {
        self.inner.read().expect("token index lock").by_digest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn insert(&mut self, secret: &Secret) {
        let Some(entry) = entry_of(secret) else {
            return;
        };
        let key = (secret.namespace().unwrap_or_default(), secret.name_any());
        self.by_secret.insert(key, entry.digest);
        self.by_digest.insert(entry.digest, entry);
    }

    fn remove(&mut self, secret: &Secret) {
        let key = (secret.namespace().unwrap_or_default(), secret.name_any());
        if let Some(old) = self.by_secret.remove(&key) {
            self.by_digest.remove(&old);
        }
    }
}

/// The index entry of an instance's Secret: its token's digest and the instance that owns it.
/// A Secret without the labels, the owner or a token gives none.
fn entry_of(secret: &Secret) -> Option<Entry> {
    if secret.meta().deletion_timestamp.is_some() {
        return None;
    }
    let labels = secret.labels();
    let label = |k: &str| labels.get(k).cloned();
    if labels.get(names::LABEL_MANAGED_BY).map(String::as_str) != Some(names::MANAGED_BY) {
        return None;
    }
    let instance = label(names::LABEL_INSTANCE)?;
    let owner = secret
        .owner_references()
        .iter()
        .find(|o| o.kind == "PluginInstance" && o.name == instance)?;
    let token = secret.data.as_ref()?.get(TOKEN_KEY)?;
    let token = std::str::from_utf8(&token.0).ok()?.trim();
    if token.is_empty() {
        return None;
    }
    Some(Entry {
        digest: digest(token),
        owner: TokenOwner {
            namespace: secret.namespace()?,
            instance,
            instance_uid: owner.uid.clone(),
            plugin: label(names::LABEL_PLUGIN)?,
            channel: label(names::LABEL_CHANNEL)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    /// The token Secret the controller makes for `instance`.
    fn token_secret(
        ns: &str,
        instance: &str,
        uid: &str,
        plugin: &str,
        channel: &str,
        token: &str,
    ) -> Secret {
        let mut labels = names::labels(plugin, "proj", channel, "token");
        labels.insert(names::LABEL_INSTANCE.into(), instance.into());
        let mut s = Secret::default();
        s.metadata.name = Some(names::secret_name(instance));
        s.metadata.namespace = Some(ns.into());
        s.metadata.labels = Some(labels);
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "plugins.loop.dev/v1alpha1".into(),
            kind: "PluginInstance".into(),
            name: instance.into(),
            uid: uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        s.data = Some(BTreeMap::from([
            (TOKEN_KEY.to_string(), ByteString(token.as_bytes().to_vec())),
            ("secret".to_string(), ByteString(b"plugin-secret".to_vec())),
        ]));
        s
    }

    #[test]
    fn the_index_follows_the_watch() {
        let index = TokenIndex::new();
        let a = token_secret("team", "echo-a", "uid-a", "echo", "a", "tok-a");
        index.apply_watcher_event(&watcher::Event::Apply(a.clone()));
        let owner = index.lookup("tok-a").unwrap();
        assert_eq!(owner.instance, "echo-a");
        assert_eq!(owner.instance_uid, "uid-a");
        assert!(index.lookup("tok-b").is_none());

        // A changed token replaces the old one.
        let a2 = token_secret("team", "echo-a", "uid-a", "echo", "a", "tok-a2");
        index.apply_watcher_event(&watcher::Event::Apply(a2.clone()));
        assert!(index.lookup("tok-a").is_none());
        assert!(index.lookup("tok-a2").is_some());

        index.apply_watcher_event(&watcher::Event::Delete(a2));
        assert!(index.is_empty());

        // A relist replaces everything.
        let b = token_secret("team", "echo-b", "uid-b", "echo", "b", "tok-b");
        index.apply_watcher_event(&watcher::Event::Apply(a));
        index.apply_watcher_event(&watcher::Event::Init);
        index.apply_watcher_event(&watcher::Event::InitApply(b));
        assert!(
            index.lookup("tok-a").is_some(),
            "kept until the relist is done"
        );
        index.apply_watcher_event(&watcher::Event::InitDone);
        assert!(index.lookup("tok-a").is_none());
        assert!(index.lookup("tok-b").is_some());
    }

    #[test]
    fn secrets_without_an_owner_or_labels_are_ignored() {
        let index = TokenIndex::new();
        let mut s = token_secret("team", "echo-a", "uid-a", "echo", "a", "tok-a");
        s.metadata.owner_references = None;
        index.apply_watcher_event(&watcher::Event::Apply(s));
        let mut s = token_secret("team", "echo-b", "uid-b", "echo", "b", "tok-b");
        s.metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(names::LABEL_INSTANCE);
        index.apply_watcher_event(&watcher::Event::Apply(s));
        assert!(index.is_empty());
    }
}
