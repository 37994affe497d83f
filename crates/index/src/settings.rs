//! Each plugin's settings in each project, layered and checked once per version of what they
//! come from (the Plugin, the HostConfig's defaults, the Project's config) rather than on every
//! read. `GET /channel` resolved them anew on each request, checking every configured value
//! against its JSON Schema: 8% of the API server's CPU per request with dropping the result
//! (`make bench`'s profile), and every event delivered did it again for each plugin.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::api::ObjectMeta;
use model::manifest::Manifest;
use model::resolve::{ResolvedSettings, resolve_settings};
use model::resources::{HostConfig, Plugin, Project};

/// Resolutions kept at most; past it, all go (they are resolved again on the next read).
const MAX_KEPT: usize = 20_000;

/// One object's version: its uid and generation (a status write keeps both).
type Version<'a> = (&'a str, i64);

fn version(meta: &ObjectMeta) -> Option<Version<'_>> {
    Some((meta.uid.as_deref()?, meta.generation?))
}

/// What one resolution was made from.
struct Kept {
    plugin: i64,
    project: i64,
    host: (String, i64),
    settings: Arc<ResolvedSettings>,
}

/// The resolved settings by Project uid (`""`: no project), then by Plugin uid.
#[derive(Default)]
struct ByProject {
    projects: HashMap<String, HashMap<String, Kept>>,
    count: usize,
}

/// The settings resolved so far, each with the versions it was resolved from.
#[derive(Default)]
pub struct Settings {
    kept: Mutex<ByProject>,
}

impl Settings {
    /// `plugin`'s settings under `host`'s defaults and `project`'s config (none: the chat's
    /// project does not exist), `manifest` being the Plugin's: the ones resolved from these
    /// versions, else resolved now. An object without a uid or a generation (built, not read,
    /// or the stand-in HostConfig while none exists) makes it resolve every time.
    pub fn of(
        &self,
        manifest: &Manifest,
        plugin: &Plugin,
        project: Option<&Project>,
        host: &HostConfig,
    ) -> Arc<ResolvedSettings> {
        let name = plugin.metadata.name.as_deref().unwrap_or_default();
        let resolve = || {
            Arc::new(resolve_settings(
                manifest,
                host.spec.plugins.defaults.get(name),
                project.and_then(|p| p.spec.plugins.get(name)),
            ))
        };
        let project_version = match project {
            None => Some(("", 0)),
            Some(p) => version(&p.metadata),
        };
        let (Some(plugin_version), Some(project_version), Some(host_version)) = (
            version(&plugin.metadata),
            project_version,
            version(&host.metadata),
        ) else {
            return resolve();
        };
        let fresh = |k: &Kept| {
            k.plugin == plugin_version.1
                && k.project == project_version.1
                && k.host.0 == host_version.0
                && k.host.1 == host_version.1
        };
        if let Some(kept) = self
            .lock()
            .projects
            .get(project_version.0)
            .and_then(|by_plugin| by_plugin.get(plugin_version.0))
            .filter(|k| fresh(k))
        {
            return kept.settings.clone();
        }
        let settings = resolve();
        let kept = Kept {
            plugin: plugin_version.1,
            project: project_version.1,
            host: (host_version.0.to_string(), host_version.1),
            settings: settings.clone(),
        };
        let mut all = self.lock();
        if all.count >= MAX_KEPT {
            *all = ByProject::default();
        }
        let replaced = all
            .projects
            .entry(project_version.0.to_string())
            .or_default()
            .insert(plugin_version.0.to_string(), kept);
        if replaced.is_none() {
            all.count += 1;
        }
        settings
    }

    fn lock(&self) -> MutexGuard<'_, ByProject> {
        // A panic while holding the lock leaves a map that is still whole.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use model::config::PluginConfig;
    use model::resources::{HostConfigSpec, HostPlugins, ProjectSpec};
    use serde_json::{Value, json};

    use super::*;

    fn plugin(generation: i64) -> (Plugin, Manifest) {
        let manifest = json!({
            "id": "quiz", "name": "Quiz", "version": "0.1.0", "api": "1",
            "capabilities": ["files.read"],
            "settings": {"count": {"type": "integer", "minimum": 1, "default": 5}}
        });
        let mut plugin = Plugin::new(
            "quiz",
            model::resources::PluginSpec {
                image: format!("r.test/quiz@sha256:{}", "a".repeat(64)),
                command: vec![],
                manifest: serde_json::from_value(manifest.clone()).expect("a manifest value"),
                approved_capabilities: vec![],
                signature: None,
                purge_on_delete: false,
            },
        );
        plugin.metadata.uid = Some("plugin-uid".into());
        plugin.metadata.generation = Some(generation);
        let manifest = model::manifest::from_value(&manifest).expect("a valid manifest");
        (plugin, manifest)
    }

    fn config(count: Value) -> PluginConfig {
        PluginConfig {
            settings: BTreeMap::from([("count".to_string(), count)]),
            ..Default::default()
        }
    }

    fn project(generation: i64, count: Value) -> Project {
        let mut p = Project::new(
            "proj",
            ProjectSpec {
                plugins: BTreeMap::from([("quiz".to_string(), config(count))]),
            },
        );
        p.metadata.uid = Some("project-uid".into());
        p.metadata.generation = Some(generation);
        p
    }

    fn host(uid: Option<&str>, generation: i64, count: Value) -> HostConfig {
        let mut h = HostConfig::new(
            "default",
            HostConfigSpec {
                plugins: HostPlugins {
                    defaults: BTreeMap::from([("quiz".to_string(), config(count))]),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        h.metadata.uid = uid.map(str::to_string);
        h.metadata.generation = Some(generation);
        h
    }

    fn count(settings: &ResolvedSettings) -> Value {
        settings.values["count"].clone()
    }

    #[test]
    fn settings_are_resolved_once_per_version_of_each_source() {
        let kept = Settings::default();
        let (p1, manifest) = plugin(1);
        let host1 = host(Some("h"), 1, json!(7));
        let first = kept.of(&manifest, &p1, Some(&project(1, json!(9))), &host1);
        assert_eq!(count(&first), json!(9), "the project's value wins");
        // The same versions are taken as kept (their specs cannot differ): the same answer,
        // not a new one.
        let again = kept.of(&manifest, &p1, Some(&project(1, json!(2))), &host1);
        assert!(Arc::ptr_eq(&first, &again));
        // Each source's new generation resolves again.
        let project2 = project(2, json!(3));
        assert_eq!(
            count(&kept.of(&manifest, &p1, Some(&project2), &host1)),
            json!(3)
        );
        let host2 = host(Some("h"), 2, json!(4));
        let no_value = project(3, Value::Null);
        assert_eq!(
            count(&kept.of(&manifest, &p1, Some(&no_value), &host2)),
            json!(4)
        );
        let host3 = host(Some("h"), 3, json!(6));
        assert_eq!(
            count(&kept.of(&manifest, &p1, Some(&no_value), &host3)),
            json!(6)
        );
        // A HostConfig made again (a new uid) at the same generation.
        let remade = host(Some("h2"), 3, json!(8));
        assert_eq!(
            count(&kept.of(&manifest, &p1, Some(&no_value), &remade)),
            json!(8)
        );
        let (p2, _) = plugin(2);
        let refused = project(3, json!(0));
        let resolved = kept.of(&manifest, &p2, Some(&refused), &remade);
        assert_eq!(count(&resolved), json!(8), "0 is below the minimum");
        assert_eq!(resolved.left_out.len(), 1);
    }

    #[test]
    fn no_project_is_its_own_entry_and_objects_never_read_are_resolved_every_time() {
        let kept = Settings::default();
        let (p, manifest) = plugin(1);
        let host1 = host(Some("h"), 1, json!(7));
        assert_eq!(count(&kept.of(&manifest, &p, None, &host1)), json!(7));
        let with = project(1, json!(9));
        assert_eq!(
            count(&kept.of(&manifest, &p, Some(&with), &host1)),
            json!(9)
        );
        assert_eq!(count(&kept.of(&manifest, &p, None, &host1)), json!(7));
        // The stand-in HostConfig has no uid: never kept.
        let stand_in = host(None, 1, json!(2));
        let a = kept.of(&manifest, &p, None, &stand_in);
        let b = kept.of(&manifest, &p, None, &stand_in);
        assert_eq!(count(&a), json!(2));
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
