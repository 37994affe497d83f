//! A container's environment, command and arguments as the process gets them: env from values,
//! Secrets, ConfigMaps and the downward API; `$(VAR)` references expanded; paths under a volume
//! mount rewritten to the folder that plays that volume; the wildcard address (`0.0.0.0`,
//! `[::]`) rewritten to the Pod's own. Pure functions only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, EnvVar, ObjectFieldSelector};

/// The keys of one Secret or ConfigMap, decoded.
pub type Data = BTreeMap<String, String>;

/// The Secrets and ConfigMaps a Pod refers to, by name; absent ones are missing in the cluster.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub secrets: BTreeMap<String, Data>,
    pub config_maps: BTreeMap<String, Data>,
}

/// What the downward API can tell about a Pod.
#[derive(Clone, Debug, Default)]
pub struct PodFacts {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub node_name: String,
    pub service_account: String,
    pub pod_ip: String,
    pub host_ip: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl PodFacts {
    /// The value of a downward-API field path, such as `status.podIP`.
    pub fn field(&self, path: &str) -> Option<String> {
        let quoted = |prefix: &str| {
            path.strip_prefix(prefix)?
                .strip_suffix("']")
                .map(ToString::to_string)
        };
        if let Some(key) = quoted("metadata.labels['") {
            return Some(self.labels.get(&key).cloned().unwrap_or_default());
        }
        if let Some(key) = quoted("metadata.annotations['") {
            return Some(self.annotations.get(&key).cloned().unwrap_or_default());
        }
        Some(match path {
            "metadata.name" => self.name.clone(),
            "metadata.namespace" => self.namespace.clone(),
            "metadata.uid" => self.uid.clone(),
            "spec.nodeName" => self.node_name.clone(),
            "spec.serviceAccountName" => self.service_account.clone(),
            "status.podIP" | "status.podIPs" => self.pod_ip.clone(),
            "status.hostIP" | "status.hostIPs" => self.host_ip.clone(),
            _ => return None,
        })
    }

    /// The value of a `fieldRef`.
    pub fn field_ref(&self, selector: &ObjectFieldSelector) -> Result<String, EnvError> {
        self.field(&selector.field_path)
            .ok_or_else(|| EnvError::UnsupportedField(selector.field_path.clone()))
    }
}

/// Why a container's environment cannot be built yet (or at all).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A required Secret or ConfigMap (or one of its keys) is missing; it may appear later.
    #[error("{kind} {name:?}{} not found", key.as_ref().map(|k| format!(" key {k:?}")).unwrap_or_default())]
    Missing {
        kind: &'static str,
        name: String,
        key: Option<String>,
    },
    /// A downward-API field this stand-in does not know.
    #[error("unsupported fieldRef {0:?}")]
    UnsupportedField(String),
}

/// Where each volume mount of a container lives on this machine: (mountPath, folder).
pub type Mounts = Vec<(String, PathBuf)>;

/// A container's process: its arguments (after the program) and environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Resolves the container's env (envFrom, then env, in order, later names winning), rewrites
/// mount paths, then expands `$(VAR)` in env values, command and args, and last rewrites
/// wildcard addresses to the Pod's (see [`rewrite_wildcards`]).
pub fn invocation(
    container: &Container,
    facts: &PodFacts,
    sources: &Sources,
    mounts: &Mounts,
) -> Result<Invocation, EnvError> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    };
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (data, optional) = if let Some(r) = &from.config_map_ref {
            (
                lookup(&sources.config_maps, "ConfigMap", &r.name, None),
                r.optional,
            )
        } else if let Some(r) = &from.secret_ref {
            (
                lookup(&sources.secrets, "Secret", &r.name, None),
                r.optional,
            )
        } else {
            continue;
        };
        match data {
            Ok(data) => {
                for (k, v) in data {
                    set(&mut env, format!("{prefix}{k}"), rewrite_paths(v, mounts));
                }
            }
            Err(_) if optional == Some(true) => {}
            Err(e) => return Err(e),
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = env_value(var, facts, sources, mounts, &env)? {
            set(&mut env, var.name.clone(), value);
        }
    }
    let vars: BTreeMap<String, String> = env.iter().cloned().collect();
    let expand_all = |words: &Option<Vec<String>>| -> Vec<String> {
        words
            .iter()
            .flatten()
            .map(|w| rewrite_wildcards(&expand(&rewrite_paths(w, mounts), &vars), &facts.pod_ip))
            .collect()
    };
    let command = expand_all(&container.command);
    let args = expand_all(&container.args);
    let env = env
        .into_iter()
        .map(|(k, v)| {
            let v = rewrite_wildcards(&v, &facts.pod_ip);
            (k, v)
        })
        .collect();
    Ok(Invocation { command, args, env })
}

/// Rewrites the wildcard address (`0.0.0.0`, `[::]`) to `pod_ip` wherever it stands as an
/// address of its own (not inside another number, not as a CIDR's base such as `0.0.0.0/0`).
///
/// Why: in a real Pod the wildcard means the Pod's own interfaces, but here every Pod shares the
/// machine's network, so a process listening on `0.0.0.0:8080` (the chart's API server, say)
/// would take port 8080 on every 127.x address and clash with each plugin Pod serving on its
/// own address and the same port. Listening on the Pod's address is what the wildcard means in
/// a Pod's own network namespace. An empty `pod_ip` leaves the input as it is.
pub fn rewrite_wildcards(input: &str, pod_ip: &str) -> String {
    const WILDCARDS: [&str; 2] = ["0.0.0.0", "[::]"];
    if pod_ip.is_empty() {
        return input.to_string();
    }
    // Characters that would make the match part of something longer: a longer address or a
    // name before it; those, or a CIDR's `/`, after it.
    let joins = |c: char| c.is_ascii_alphanumeric() || c == '.';
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let standalone_start = input[..i].chars().next_back().is_none_or(|c| !joins(c));
        let found = WILDCARDS.iter().find(|w| {
            rest.starts_with(**w)
                && rest[w.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !joins(c) && c != '/')
        });
        if standalone_start && let Some(wildcard) = found {
            out.push_str(pod_ip);
            i += wildcard.len();
            continue;
        }
        let c = rest.chars().next().expect("i is within the string");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// One `env` entry's value; None when it comes from an optional source that is missing.
fn env_value(
    var: &EnvVar,
    facts: &PodFacts,
    sources: &Sources,
    mounts: &Mounts,
    earlier: &[(String, String)],
) -> Result<Option<String>, EnvError> {
    let Some(from) = &var.value_from else {
        let vars: BTreeMap<String, String> = earlier.iter().cloned().collect();
        let raw = rewrite_paths(var.value.as_deref().unwrap_or_default(), mounts);
        return Ok(Some(expand(&raw, &vars)));
    };
    let keyed = |found: Result<&str, EnvError>, optional: Option<bool>| match found {
        Ok(v) => Ok(Some(rewrite_paths(v, mounts))),
        Err(_) if optional == Some(true) => Ok(None),
        Err(e) => Err(e),
    };
    if let Some(r) = &from.secret_key_ref {
        let found = lookup(&sources.secrets, "Secret", &r.name, Some(&r.key));
        return keyed(found.map(|d| d[&r.key].as_str()), r.optional);
    }
    if let Some(r) = &from.config_map_key_ref {
        let found = lookup(&sources.config_maps, "ConfigMap", &r.name, Some(&r.key));
        return keyed(found.map(|d| d[&r.key].as_str()), r.optional);
    }
    if let Some(r) = &from.field_ref {
        return facts.field_ref(r).map(Some);
    }
    // resourceFieldRef: no limits are enforced here, so there is nothing true to report.
    Ok(Some(String::new()))
}

fn lookup<'a>(
    all: &'a BTreeMap<String, Data>,
    kind: &'static str,
    name: &str,
    key: Option<&str>,
) -> Result<&'a Data, EnvError> {
    let missing = |key: Option<&str>| EnvError::Missing {
        kind,
        name: name.to_string(),
        key: key.map(ToString::to_string),
    };
    let data = all.get(name).ok_or_else(|| missing(None))?;
    match key {
        Some(k) if !data.contains_key(k) => Err(missing(Some(k))),
        _ => Ok(data),
    }
}

/// Kubernetes' `$(VAR)` expansion: known names are replaced, unknown ones kept as written,
/// and `$$` escapes a `$`.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(close) = inner.find(')')
        {
            let name = &inner[..close];
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Rewrites every path that starts with a mount path to the same path under that mount's
/// folder, in one pass (so a folder never gets rewritten twice). A mount path matches where it
/// starts a path (at the start, or after a character that cannot be in a path such as `=`, `:`
/// or a space) and ends a path component (at the end, or before `/` or such a character).
pub fn rewrite_paths(input: &str, mounts: &Mounts) -> String {
    let mut mounts: Vec<(&str, &PathBuf)> = mounts
        .iter()
        .map(|(path, folder)| (path.trim_end_matches('/'), folder))
        .filter(|(path, _)| path.starts_with('/') && path.len() > 1)
        .collect();
    // Longest first, so /data/cache wins over /data.
    mounts.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let is_path_char = |c: char| c.is_alphanumeric() || "._-~/+@%".contains(c);
    let mut out = String::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let rest = &input[i..];
        let at_start = input[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !is_path_char(c));
        if at_start
            && rest.starts_with('/')
            && let Some((path, folder)) = mounts.iter().find(|(path, _)| {
                rest.starts_with(path)
                    && rest[path.len()..]
                        .chars()
                        .next()
                        .is_none_or(|c| c == '/' || !is_path_char(c))
            })
        {
            out.push_str(&folder.to_string_lossy());
            i += path.len();
            continue;
        }
        let c = rest.chars().next().expect("i is within the string");
        out.push(c);
        i += c.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EnvVarSource, SecretKeySelector};

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let v = vars(&[("A", "1"), ("B", "two")]);
        assert_eq!(expand("$(A)-$(B)", &v), "1-two");
        assert_eq!(expand("$(C) $$(A) $", &v), "$(C) $(A) $");
        assert_eq!(expand("$(A", &v), "$(A");
    }

    #[test]
    fn paths_under_mounts_are_rewritten_once() {
        let mounts: Mounts = vec![
            ("/data".into(), PathBuf::from("/tmp/x/data")),
            ("/data/cache/".into(), PathBuf::from("/tmp/y")),
            ("/tmp".into(), PathBuf::from("/tmp/z")),
        ];
        assert_eq!(rewrite_paths("/data", &mounts), "/tmp/x/data");
        assert_eq!(
            rewrite_paths("--dir=/data/a b", &mounts),
            "--dir=/tmp/x/data/a b"
        );
        assert_eq!(rewrite_paths("/data/cache/k", &mounts), "/tmp/y/k");
        assert_eq!(
            rewrite_paths("/database /x/data http://h/data", &mounts),
            "/database /x/data http://h/data"
        );
        assert_eq!(rewrite_paths("echo > /tmp/f", &mounts), "echo > /tmp/z/f");
    }

    #[test]
    fn env_resolves_sources_fields_and_references() {
        let container = Container {
            name: "c".into(),
            env: Some(vec![
                EnvVar {
                    name: "IP".into(),
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "status.podIP".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                EnvVar {
                    name: "TOKEN".into(),
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: "s".into(),
                            key: "token".into(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                EnvVar {
                    name: "URL".into(),
                    value: Some("http://$(IP):8080/data".into()),
                    ..Default::default()
                },
            ]),
            args: Some(vec!["--listen=$(IP)".into(), "--data=/data".into()]),
            ..Default::default()
        };
        let facts = PodFacts {
            pod_ip: "127.9.0.1".into(),
            ..Default::default()
        };
        let mut sources = Sources::default();
        let mounts: Mounts = vec![("/data".into(), PathBuf::from("/d"))];
        assert!(matches!(
            invocation(&container, &facts, &sources, &mounts),
            Err(EnvError::Missing { kind: "Secret", .. })
        ));
        sources
            .secrets
            .insert("s".into(), vars(&[("token", "t0k")]));
        let inv = invocation(&container, &facts, &sources, &mounts).unwrap();
        assert_eq!(inv.args, vec!["--listen=127.9.0.1", "--data=/d"]);
        let env: BTreeMap<_, _> = inv.env.into_iter().collect();
        assert_eq!(env["TOKEN"], "t0k");
        assert_eq!(env["URL"], "http://127.9.0.1:8080/data");
    }

    #[test]
    fn wildcard_addresses_become_the_pods_own() {
        let ip = "127.9.0.1";
        for (input, expected) in [
            ("--listen=0.0.0.0:8080", "--listen=127.9.0.1:8080"),
            ("0.0.0.0:9090", "127.9.0.1:9090"),
            ("[::]:8080", "127.9.0.1:8080"),
            ("http://0.0.0.0:80/x", "http://127.9.0.1:80/x"),
            // Part of something else: left alone.
            ("10.0.0.0:80", "10.0.0.0:80"),
            ("0.0.0.01", "0.0.0.01"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("host0.0.0.0", "host0.0.0.0"),
            ("--listen=127.0.0.1:8080", "--listen=127.0.0.1:8080"),
        ] {
            assert_eq!(rewrite_wildcards(input, ip), expected, "{input}");
        }
        assert_eq!(rewrite_wildcards("0.0.0.0:1", ""), "0.0.0.0:1");
    }

    #[test]
    fn the_charts_listen_flags_get_the_pods_address() {
        let container = Container {
            name: "api".into(),
            args: Some(vec![
                "api".into(),
                "--listen=0.0.0.0:8080".into(),
                "--metrics-addr=$(BIND):9091".into(),
            ]),
            env: Some(vec![EnvVar {
                name: "BIND".into(),
                value: Some("0.0.0.0".into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let facts = PodFacts {
            pod_ip: "127.9.0.1".into(),
            ..Default::default()
        };
        let inv = invocation(&container, &facts, &Sources::default(), &Mounts::new()).unwrap();
        assert_eq!(
            inv.args,
            [
                "api",
                "--listen=127.9.0.1:8080",
                "--metrics-addr=127.9.0.1:9091"
            ]
        );
        assert_eq!(inv.env, [("BIND".to_string(), "127.9.0.1".to_string())]);
    }
}
