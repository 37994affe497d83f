//! Each Project's config hash, computed once per version of its spec. Trust is decided by
//! comparing the config's canonical hash with the one its ProjectTrust approved, and every
//! call through the host API decides whether its plugin is enabled: hashing the config anew
//! each time was 2 to 3% of the API server's CPU per proxied call (`make bench`'s profile).

use std::collections::HashMap;
use std::sync::Mutex;

use model::config::config_hash;
use model::resources::Project;

/// Projects whose hash is kept at most; past it, the oldest versions go (all of them: they
/// are recomputed on the next call).
const MAX_KEPT: usize = 10_000;

/// The config hashes by Project uid, each with the generation it was computed at.
#[derive(Default)]
pub struct ConfigHashes {
    kept: Mutex<HashMap<String, (i64, String)>>,
}

impl ConfigHashes {
    /// The hash of `project`'s current config (`spec.plugins`): the one computed for this
    /// generation, else computed now. A Project without a uid or a generation (one built, not
    /// read) is hashed every time.
    pub fn of(&self, project: &Project) -> String {
        let meta = &project.metadata;
        let (Some(uid), Some(generation)) = (meta.uid.as_deref(), meta.generation) else {
            return config_hash(&project.spec.plugins);
        };
        if let Some((at, hash)) = self.kept.lock().expect("hash lock").get(uid)
            && *at == generation
        {
            return hash.clone();
        }
        let hash = config_hash(&project.spec.plugins);
        let mut kept = self.kept.lock().expect("hash lock");
        if kept.len() >= MAX_KEPT {
            kept.clear();
        }
        kept.insert(uid.to_string(), (generation, hash.clone()));
        hash
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use model::config::PluginConfig;
    use model::resources::ProjectSpec;

    use super::*;

    fn project(generation: i64, enabled: bool) -> Project {
        let mut p = Project::new(
            "proj",
            ProjectSpec {
                plugins: BTreeMap::from([(
                    "echo".to_string(),
                    PluginConfig {
                        enabled: Some(enabled),
                        ..Default::default()
                    },
                )]),
            },
        );
        p.metadata.uid = Some("uid-1".into());
        p.metadata.generation = Some(generation);
        p
    }

    #[test]
    fn a_hash_is_kept_per_generation_and_is_the_configs() {
        let hashes = ConfigHashes::default();
        let first = project(1, true);
        assert_eq!(hashes.of(&first), config_hash(&first.spec.plugins));
        // The same generation is taken as kept (its spec cannot differ).
        assert_eq!(hashes.of(&project(1, false)), hashes.of(&first));
        // A new generation is hashed again.
        let second = project(2, false);
        assert_eq!(hashes.of(&second), config_hash(&second.spec.plugins));
        assert_ne!(hashes.of(&second), hashes.of(&first));
        // Without a uid: hashed every time.
        let mut built = project(3, true);
        built.metadata.uid = None;
        assert_eq!(hashes.of(&built), config_hash(&built.spec.plugins));
    }
}
