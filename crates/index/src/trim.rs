//! What a stored object loses, so the index holds only what its readers read:
//! - every object its `managedFields`: nothing reads them, and they were 40% of what the
//!   controller's stores held;
//! - an instance's token Secret, as the API server keeps it, its token too: the tokens plugins
//!   call with go to the token index as digests (see `tokens`), and the stored Secret keeps
//!   only the secret each call to the plugin carries;
//! - the children the controller keeps by the thousand are stored as [`crate::compact::Compact`]
//!   objects, trimmed as they are read from the wire.

use k8s_openapi::api::core::v1::Secret;
use kube::Resource;

use model::contract::TOKEN_KEY;

/// Drops the `managedFields`.
pub fn managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Drops a token Secret's `managedFields` and its token.
pub fn token_secret(secret: &mut Secret) {
    managed_fields(secret);
    if let Some(data) = secret.data.as_mut() {
        data.remove(TOKEN_KEY);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    #[test]
    fn a_stored_token_secret_keeps_its_secret_but_no_token_and_no_managed_fields() {
        let mut secret = Secret {
            data: Some(BTreeMap::from([
                (TOKEN_KEY.to_string(), ByteString(b"t".to_vec())),
                ("secret".to_string(), ByteString(b"s".to_vec())),
            ])),
            ..Default::default()
        };
        secret.metadata.managed_fields = Some(vec![Default::default()]);
        token_secret(&mut secret);
        let data = secret.data.unwrap();
        assert!(!data.contains_key(TOKEN_KEY));
        assert!(data.contains_key("secret"));
        assert!(secret.metadata.managed_fields.is_none());
    }

    #[test]
    fn any_other_object_loses_only_its_managed_fields() {
        let mut map = ConfigMap {
            data: Some(BTreeMap::from([(
                TOKEN_KEY.to_string(),
                "kept".to_string(),
            )])),
            ..Default::default()
        };
        map.metadata.managed_fields = Some(vec![Default::default()]);
        managed_fields(&mut map);
        assert!(map.metadata.managed_fields.is_none());
        assert_eq!(map.data.unwrap()[TOKEN_KEY], "kept");
    }
}
