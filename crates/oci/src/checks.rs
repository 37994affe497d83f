//! The reference's image checks, each refusal a typed error naming what is wrong: the image
//! config (linux/amd64, label `dev.loop.plugin=1`, a numeric non-root USER, something to run)
//! before any layer is fetched, then the merged layers (/loop-plugin a directory holding a
//! plugin.json, /data a directory owned by the USER). Pure: parsed values in, facts out.
//! plugin.json's content is not judged here (the model crate parses it); its bytes are returned.

use std::collections::BTreeMap;
use std::sync::Arc;

use model::contract::RunAs;
use serde::Deserialize;

use crate::digest::{Digest, DigestError};
use crate::manifest::{PLATFORM_ARCH, PLATFORM_OS};
use crate::quote::shown;
use crate::rootfs::{DATA_DIR, LOOP_PLUGIN_DIR, Meta, NodeKind, PLUGIN_JSON, RootFs};

/// The label every plugin image carries, and its value.
pub const PLUGIN_LABEL: &str = "dev.loop.plugin";
pub const PLUGIN_LABEL_VALUE: &str = "1";

/// What the image config says, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFacts {
    pub run_as: RunAs,
    /// The image's ENTRYPOINT and CMD: the Plugin's command is entrypoint followed by cmd.
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    /// `rootfs.diff_ids`, one per layer.
    pub diff_ids: Vec<Digest>,
}

/// One path under /loop-plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginEntry {
    File { bytes: Arc<Vec<u8>>, mode: u32 },
    Dir,
    Symlink { target: String },
    Other,
}

/// What the merged layers hold that the host needs, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFacts {
    /// /loop-plugin/plugin.json as shipped.
    pub plugin_json: Arc<Vec<u8>>,
    /// Its sha256, hex: what a signature payload names.
    pub plugin_json_sha256: String,
    /// Every path under /loop-plugin, relative to it (`plugin.json`, `ui/main/index.html`).
    pub loop_plugin: BTreeMap<String, PluginEntry>,
    /// Bytes of the regular files under /loop-plugin (hard links counted again).
    pub loop_plugin_bytes: u64,
    /// /data's owner and mode.
    pub data: Meta,
}

impl TreeFacts {
    /// The UI bundle: the regular files under /loop-plugin/ui/, by path below it (a symlink
    /// or a device is not a file of the bundle). The API server serves these and
    /// `conformance IMAGE` draws these.
    pub fn ui_files(&self) -> impl Iterator<Item = (&str, &Arc<Vec<u8>>)> {
        self.loop_plugin.iter().filter_map(|(path, entry)| {
            let below = path.strip_prefix("ui/")?;
            match entry {
                PluginEntry::File { bytes, .. } => Some((below, bytes)),
                _ => None,
            }
        })
    }
}

/// A refusal of the image, quoting the config by the start of what it said; `reason()` is a
/// stable name for conditions and Events.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("image config is not JSON of an OCI image config: {}", shown(&.0.to_string()))]
    Config(#[source] serde_json::Error),
    #[error("image config rootfs.diff_ids: {0}")]
    DiffId(#[source] DigestError),
    #[error("image config lists {diff_ids} diff_ids for {layers} layers")]
    DiffIdCount { diff_ids: usize, layers: usize },
    #[error("image is for {os}/{architecture}, not {PLATFORM_OS}/{PLATFORM_ARCH}")]
    Platform { os: String, architecture: String },
    #[error("image has no label {PLUGIN_LABEL} (want {PLUGIN_LABEL}={PLUGIN_LABEL_VALUE})")]
    LabelMissing,
    #[error("image label {PLUGIN_LABEL} is {value:?}, not {PLUGIN_LABEL_VALUE:?}")]
    LabelValue { value: String },
    #[error(
        "image has no USER, so it would run as root; plugins run as a numeric non-root uid (USER uid or uid:gid)"
    )]
    UserUnset,
    #[error("image USER {user:?} is root; plugins run as a numeric non-root uid")]
    UserRoot { user: String },
    #[error(
        "image USER {user:?} is a name; use a numeric uid or uid:gid (the pod's runAsUser is a number)"
    )]
    UserName { user: String },
    #[error("image USER {user:?} names its group; use a numeric gid")]
    GroupName { user: String },
    #[error("image USER {user:?} is not uid or uid:gid")]
    UserMalformed { user: String },
    #[error("image has neither ENTRYPOINT nor CMD: nothing to run")]
    NoCommand,
    #[error("image has no /loop-plugin directory")]
    LoopPluginMissing,
    #[error("image's /loop-plugin is {kind}, not a directory")]
    LoopPluginNotDir { kind: &'static str },
    #[error("image has no /loop-plugin/plugin.json")]
    PluginJsonMissing,
    #[error("image's /loop-plugin/plugin.json is {kind}, not a regular file")]
    PluginJsonNotFile { kind: &'static str },
    #[error("image's /loop-plugin holds {bytes} bytes, over the {limit}-byte cap")]
    LoopPluginTooBig { bytes: u64, limit: u64 },
    #[error("image has no /data directory")]
    DataMissing,
    #[error("image's /data is {kind}, not a directory")]
    DataNotDir { kind: &'static str },
    #[error("image's /data is owned by {uid}:{gid}, not by the image's USER {want}")]
    DataOwner { uid: u32, gid: u32, want: String },
}

impl CheckError {
    /// A stable name for the refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            CheckError::Config(_) | CheckError::DiffId(_) | CheckError::DiffIdCount { .. } => {
                "ImageConfigInvalid"
            }
            CheckError::Platform { .. } => "ImagePlatform",
            CheckError::LabelMissing | CheckError::LabelValue { .. } => "ImageLabelMissing",
            CheckError::UserUnset | CheckError::UserRoot { .. } => "ImageUserRoot",
            CheckError::UserName { .. }
            | CheckError::GroupName { .. }
            | CheckError::UserMalformed { .. } => "ImageUserNotNumeric",
            CheckError::NoCommand => "ImageNoCommand",
            CheckError::LoopPluginMissing | CheckError::LoopPluginNotDir { .. } => {
                "ImageLoopPluginMissing"
            }
            CheckError::PluginJsonMissing | CheckError::PluginJsonNotFile { .. } => {
                "ImagePluginJsonMissing"
            }
            CheckError::LoopPluginTooBig { .. } => "ImageLoopPluginTooBig",
            CheckError::DataMissing | CheckError::DataNotDir { .. } => "ImageDataMissing",
            CheckError::DataOwner { .. } => "ImageDataOwner",
        }
    }
}

#[derive(Deserialize)]
struct ConfigFile {
    architecture: String,
    os: String,
    #[serde(default)]
    config: Option<Runtime>,
    rootfs: RootFsJson,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct Runtime {
    user: Option<String>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    labels: Option<BTreeMap<String, String>>,
    env: Option<Vec<String>>,
    working_dir: Option<String>,
}

#[derive(Deserialize)]
struct RootFsJson {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// Checks the image config of an image with `layers` layers.
pub fn check_config(config: &[u8], layers: usize) -> Result<ConfigFacts, CheckError> {
    let file: ConfigFile = serde_json::from_slice(config).map_err(CheckError::Config)?;
    if file.os != PLATFORM_OS || file.architecture != PLATFORM_ARCH {
        return Err(CheckError::Platform {
            os: shown(&file.os),
            architecture: shown(&file.architecture),
        });
    }
    let diff_ids = file
        .rootfs
        .diff_ids
        .iter()
        .map(|d| Digest::parse(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CheckError::DiffId)?;
    if diff_ids.len() != layers {
        return Err(CheckError::DiffIdCount {
            diff_ids: diff_ids.len(),
            layers,
        });
    }
    let runtime = file.config.unwrap_or_default();
    let labels = runtime.labels.unwrap_or_default();
    match labels.get(PLUGIN_LABEL) {
        None => return Err(CheckError::LabelMissing),
        Some(v) if v != PLUGIN_LABEL_VALUE => {
            return Err(CheckError::LabelValue { value: shown(v) });
        }
        Some(_) => {}
    }
    let run_as = parse_user(runtime.user.as_deref().unwrap_or(""))?;
    let entrypoint = runtime.entrypoint.unwrap_or_default();
    let cmd = runtime.cmd.unwrap_or_default();
    if entrypoint.is_empty() && cmd.is_empty() {
        return Err(CheckError::NoCommand);
    }
    Ok(ConfigFacts {
        run_as,
        entrypoint,
        cmd,
        labels,
        env: runtime.env.unwrap_or_default(),
        working_dir: runtime.working_dir,
        diff_ids,
    })
}

/// The image's USER, `uid` or `uid:gid`: numeric, each id one a Linux uid holds (32 bits),
/// uid not 0. The one parser of USER.
pub fn parse_user(user: &str) -> Result<RunAs, CheckError> {
    let owned = || shown(user);
    if user.trim().is_empty() {
        return Err(CheckError::UserUnset);
    }
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if u == "root" {
        return Err(CheckError::UserRoot { user: owned() });
    }
    if !numeric(u) {
        return if u.is_empty() {
            Err(CheckError::UserMalformed { user: owned() })
        } else {
            Err(CheckError::UserName { user: owned() })
        };
    }
    let uid: u32 = u
        .parse()
        .map_err(|_| CheckError::UserMalformed { user: owned() })?;
    let uid = i64::from(uid);
    if uid == 0 {
        return Err(CheckError::UserRoot { user: owned() });
    }
    let gid = match g {
        None => None,
        Some(g) if numeric(g) => Some(i64::from(
            g.parse::<u32>()
                .map_err(|_| CheckError::UserMalformed { user: owned() })?,
        )),
        Some("") => return Err(CheckError::UserMalformed { user: owned() }),
        Some(_) => return Err(CheckError::GroupName { user: owned() }),
    };
    Ok(RunAs { uid, gid })
}

/// Checks the merged layers for the plugin running as `run_as`.
pub fn check_tree(
    fs: &RootFs,
    run_as: RunAs,
    loop_plugin_limit: u64,
) -> Result<TreeFacts, CheckError> {
    match fs.get(LOOP_PLUGIN_DIR).map(|n| &n.kind) {
        None => return Err(CheckError::LoopPluginMissing),
        Some(NodeKind::Dir) => {}
        Some(other) => {
            return Err(CheckError::LoopPluginNotDir {
                kind: kind_name(other),
            });
        }
    }
    if fs.loop_plugin_bytes() > loop_plugin_limit {
        return Err(CheckError::LoopPluginTooBig {
            bytes: fs.loop_plugin_bytes(),
            limit: loop_plugin_limit,
        });
    }
    let plugin_json = match fs.get(PLUGIN_JSON).map(|n| &n.kind) {
        None => return Err(CheckError::PluginJsonMissing),
        Some(NodeKind::File {
            content: Some(bytes),
            ..
        }) => bytes.clone(),
        Some(other) => {
            return Err(CheckError::PluginJsonNotFile {
                kind: kind_name(other),
            });
        }
    };
    let data = match fs.get(DATA_DIR) {
        None => return Err(CheckError::DataMissing),
        Some(n) if n.kind == NodeKind::Dir => n.meta,
        Some(n) => {
            return Err(CheckError::DataNotDir {
                kind: kind_name(&n.kind),
            });
        }
    };
    if i64::from(data.uid) != run_as.uid || run_as.gid.is_some_and(|g| g != i64::from(data.gid)) {
        return Err(CheckError::DataOwner {
            uid: data.uid,
            gid: data.gid,
            want: run_as.to_string(),
        });
    }
    let prefix = format!("{LOOP_PLUGIN_DIR}/");
    let loop_plugin = fs
        .below(LOOP_PLUGIN_DIR)
        .map(|(path, node)| {
            let entry = match &node.kind {
                NodeKind::File {
                    content: Some(bytes),
                    ..
                } => PluginEntry::File {
                    bytes: bytes.clone(),
                    mode: node.meta.mode,
                },
                NodeKind::File { content: None, .. } | NodeKind::Other => PluginEntry::Other,
                NodeKind::Dir => PluginEntry::Dir,
                NodeKind::Symlink { target } => PluginEntry::Symlink {
                    target: target.clone(),
                },
            };
            let below = match path.strip_prefix(&prefix) {
                Some(below) => below.to_string(),
                None => path,
            };
            (below, entry)
        })
        .collect();
    Ok(TreeFacts {
        plugin_json_sha256: Digest::of(&plugin_json).hex().to_string(),
        plugin_json,
        loop_plugin,
        loop_plugin_bytes: fs.loop_plugin_bytes(),
        data,
    })
}

fn kind_name(kind: &NodeKind) -> &'static str {
    match kind {
        NodeKind::Dir => "a directory",
        NodeKind::File { .. } => "a regular file",
        NodeKind::Symlink { .. } => "a symlink",
        NodeKind::Other => "a device or FIFO",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rootfs::EntryKind;
    use serde_json::json;

    fn config(runtime: serde_json::Value) -> Vec<u8> {
        json!({"architecture": "amd64", "os": "linux", "config": runtime, "rootfs": {"type": "layers", "diff_ids": [Digest::of(b"").to_string()]}})
            .to_string()
            .into_bytes()
    }

    fn good() -> serde_json::Value {
        json!({"User": "1000:1001", "Entrypoint": ["/echo"], "Cmd": ["--serve"], "Labels": {"dev.loop.plugin": "1"}})
    }

    #[test]
    fn good_config_gives_its_facts() {
        let facts = check_config(&config(good()), 1).unwrap();
        assert_eq!(
            facts.run_as,
            RunAs {
                uid: 1000,
                gid: Some(1001)
            }
        );
        assert_eq!(
            (facts.entrypoint, facts.cmd),
            (vec!["/echo".to_string()], vec!["--serve".to_string()])
        );
        assert_eq!(
            facts.labels.get(PLUGIN_LABEL).map(String::as_str),
            Some("1")
        );
    }

    #[test]
    fn each_config_refusal_names_what_is_wrong() {
        let with = |key: &str, value: serde_json::Value| {
            let mut runtime = good();
            if value.is_null() {
                runtime.as_object_mut().unwrap().remove(key);
            } else {
                runtime[key] = value;
            }
            check_config(&config(runtime), 1).unwrap_err()
        };
        assert!(matches!(
            with("Labels", json!({"other": "x"})),
            CheckError::LabelMissing
        ));
        assert!(matches!(
            with("Labels", serde_json::Value::Null),
            CheckError::LabelMissing
        ));
        assert!(matches!(
            with("Labels", json!({"dev.loop.plugin": "true"})),
            CheckError::LabelValue { .. }
        ));
        assert!(matches!(
            with("User", serde_json::Value::Null),
            CheckError::UserUnset
        ));
        assert!(matches!(
            with("User", json!("0")),
            CheckError::UserRoot { .. }
        ));
        assert!(matches!(
            with("User", json!("0:1000")),
            CheckError::UserRoot { .. }
        ));
        assert!(matches!(
            with("User", json!("root")),
            CheckError::UserRoot { .. }
        ));
        assert!(matches!(
            with("User", json!("app")),
            CheckError::UserName { .. }
        ));
        assert!(matches!(
            with("User", json!("1000:staff")),
            CheckError::GroupName { .. }
        ));
        assert!(matches!(
            with("User", json!("1000:")),
            CheckError::UserMalformed { .. }
        ));
        assert!(matches!(
            with("User", json!("99999999999")),
            CheckError::UserMalformed { .. }
        ));
        let mut none = good();
        none.as_object_mut().unwrap().remove("Entrypoint");
        none.as_object_mut().unwrap().remove("Cmd");
        assert!(matches!(
            check_config(&config(none), 1),
            Err(CheckError::NoCommand)
        ));
        let arm = json!({"architecture": "arm64", "os": "linux", "config": good(), "rootfs": {"diff_ids": [Digest::of(b"").to_string()]}});
        let err = check_config(arm.to_string().as_bytes(), 1).unwrap_err();
        assert!(err.to_string().contains("linux/arm64"), "{err}");
        assert!(matches!(
            check_config(&config(good()), 2),
            Err(CheckError::DiffIdCount {
                diff_ids: 1,
                layers: 2
            })
        ));
        assert_eq!(
            with("User", json!("app")).to_string(),
            "image USER \"app\" is a name; use a numeric uid or uid:gid (the pod's runAsUser is a number)"
        );
    }

    #[test]
    fn user_forms() {
        assert_eq!(
            parse_user("65532").unwrap(),
            RunAs {
                uid: 65532,
                gid: None
            }
        );
        assert_eq!(
            parse_user("65532:0").unwrap(),
            RunAs {
                uid: 65532,
                gid: Some(0)
            }
        );
    }

    fn tree(entries: &[(&str, EntryKind, u32)]) -> RootFs {
        let mut fs = RootFs::new(1 << 20);
        for (path, kind, uid) in entries {
            let body = vec![
                b'x';
                if let EntryKind::File { size } = kind {
                    *size as usize
                } else {
                    0
                }
            ];
            fs.apply(
                path,
                kind.clone(),
                Meta {
                    uid: *uid,
                    gid: *uid,
                    mode: 0o755,
                },
                &mut &body[..],
            )
            .unwrap();
        }
        fs
    }

    const RUN_AS: RunAs = RunAs {
        uid: 1000,
        gid: Some(1000),
    };

    #[test]
    fn good_tree_gives_plugin_json_and_data() {
        let fs = tree(&[
            ("loop-plugin/plugin.json", EntryKind::File { size: 2 }, 0),
            (
                "loop-plugin/ui/main/index.html",
                EntryKind::File { size: 3 },
                0,
            ),
            ("data", EntryKind::Dir, 1000),
        ]);
        let facts = check_tree(&fs, RUN_AS, 1 << 20).unwrap();
        assert_eq!(facts.plugin_json.as_slice(), b"xx");
        assert_eq!(facts.plugin_json_sha256, Digest::of(b"xx").hex());
        assert_eq!(
            facts.loop_plugin.keys().collect::<Vec<_>>(),
            ["plugin.json", "ui", "ui/main", "ui/main/index.html"]
        );
        assert_eq!(facts.loop_plugin_bytes, 5);
        assert_eq!(facts.data.uid, 1000);
    }

    #[test]
    fn each_tree_refusal_names_what_is_wrong() {
        let pj = ("loop-plugin/plugin.json", EntryKind::File { size: 2 }, 0);
        let data = ("data", EntryKind::Dir, 1000);
        let check = |entries: &[(&str, EntryKind, u32)]| {
            check_tree(&tree(entries), RUN_AS, 1 << 20).unwrap_err()
        };
        assert!(matches!(
            check(std::slice::from_ref(&data)),
            CheckError::LoopPluginMissing
        ));
        assert!(matches!(
            check(&[("loop-plugin/ui", EntryKind::Dir, 0), data.clone()]),
            CheckError::PluginJsonMissing
        ));
        assert!(matches!(
            check(std::slice::from_ref(&pj)),
            CheckError::DataMissing
        ));
        assert!(matches!(
            check(&[pj.clone(), ("data", EntryKind::File { size: 0 }, 1000)]),
            CheckError::DataNotDir { .. }
        ));
        let err = check(&[pj.clone(), ("data", EntryKind::Dir, 1001)]);
        assert_eq!(
            err.to_string(),
            "image's /data is owned by 1001:1001, not by the image's USER 1000:1000"
        );
        // A /data made only because a deeper path needed it belongs to root.
        assert!(matches!(
            check(&[pj.clone(), ("data/x", EntryKind::File { size: 0 }, 1000)]),
            CheckError::DataOwner { uid: 0, .. }
        ));
        let linked = [
            ("opt/p/plugin.json", EntryKind::File { size: 2 }, 0),
            (
                "loop-plugin",
                EntryKind::Symlink {
                    target: "opt/p".into(),
                },
                0,
            ),
            data.clone(),
        ];
        assert!(matches!(
            check(&linked),
            CheckError::LoopPluginNotDir { kind: "a symlink" }
        ));
        let tight = check_tree(&tree(&[pj, data]), RUN_AS, 1).unwrap_err();
        assert!(matches!(
            tight,
            CheckError::LoopPluginTooBig { bytes: 2, limit: 1 }
        ));
    }

    #[test]
    fn refusals_quote_the_config_by_its_start() {
        let long = "9".repeat(100_000);
        for (key, value) in [
            ("User", json!(long)),
            ("User", json!(format!("1000:{long}x"))),
            ("Labels", json!({"dev.loop.plugin": long})),
            ("Cmd", json!(long)),
        ] {
            let mut runtime = good();
            runtime[key] = value;
            let err = check_config(&config(runtime), 1).unwrap_err().to_string();
            assert!(err.len() < 600, "{key}: {err}");
        }
    }
}
