//! Asks: a plugin's call that waits for the app's answer (a live control request, a UI
//! command). The plugin's replica writes the ask into a ConfigMap of the chat, the app follows
//! a stream of its chat's asks and answers one, and the plugin's call returns that answer, or
//! gives up at the ask's time limit. Everything goes through the cluster, so any API replica
//! serves any of it.
//!
//! - [`record`]: an ask and its answer as ConfigMap keys, every decision pure;
//! - [`hub`]: the process's reader of one kind's asks and answers from the index;
//! - [`store`]: where the ConfigMaps are read and written (the cluster, or memory for tests).
//!
//! The kinds: `crate::live` (control requests, in `live-<chat>`) and `crate::ui_commands`.

pub mod hub;
pub mod record;
pub mod store;

/// A new ask's id: 16 hex digits.
pub fn random_id() -> String {
    let bytes: [u8; 8] = rand::random();
    hex::encode(bytes)
}

#[cfg(test)]
pub(crate) mod testing {
    use std::time::Duration;

    use jiff::Timestamp;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde::{Deserialize, Serialize};

    use super::record::{self, Ask, DataPatch};

    /// The component label of the tests' maps.
    pub const COMPONENT: &str = "probe";

    /// The smallest ask.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct Probe {
        pub id: String,
        pub created: Timestamp,
        pub expires: Timestamp,
    }

    impl Probe {
        pub fn new(id: &str, created: Timestamp, lasts_seconds: u64) -> Self {
            Self {
                id: id.into(),
                created,
                expires: created + Duration::from_secs(lasts_seconds),
            }
        }
    }

    impl Ask for Probe {
        fn id(&self) -> &str {
            &self.id
        }
        fn chat(&self) -> &str {
            "general"
        }
        fn created(&self) -> Timestamp {
            self.created
        }
        fn expires(&self) -> Timestamp {
            self.expires
        }
    }

    /// ConfigMap `name` of `namespace`, labelled [`COMPONENT`], with `patches` applied.
    pub fn map_of(namespace: &str, name: &str, patches: &[DataPatch]) -> ConfigMap {
        let mut map = ConfigMap::default();
        map.metadata.name = Some(name.into());
        map.metadata.namespace = Some(namespace.into());
        map.metadata.labels = Some(
            [(
                model::names::LABEL_COMPONENT.to_string(),
                COMPONENT.to_string(),
            )]
            .into(),
        );
        for patch in patches {
            record::apply(map.data.get_or_insert_default(), patch);
        }
        map
    }
}
