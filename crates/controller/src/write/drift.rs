//! Whether a live object already is what we would apply: every field we set (the desired
//! object, as JSON) has the same value in the live object. Fields the API server or others add
//! are not ours and do not count; a field we set that someone edited or removed does.
//!
//! Compared this way, rather than by a hash we wrote on the object ourselves, a hand edit shows
//! as a difference and is undone, while a steady state still makes no write. The rules follow
//! what server-side apply would do with the same object:
//! - an object matches when each of our keys matches;
//! - a list whose items all have a `name` is keyed by it (containers, env, volumes, ports,
//!   owner references): each of our items must be there and match, others' items may be too;
//! - any other list is atomic (args, command, capabilities, access modes): same length, each
//!   item matching in order;
//! - `false`, `0`, `""` and empty objects or lists match a missing field, as Go's `omitempty`
//!   drops them;
//! - resource quantities (under `limits`, `requests` or `capacity`) match by value, as the API
//!   server rewrites them in canonical form (`1000` becomes `1k`).

use serde_json::{Map, Value};

/// The first field, as a path like `spec.containers[plugin].image`, whose live value is not the
/// one desired; `None` when every field desired has its value in `live`.
pub fn difference(desired: &Value, live: &Value) -> Option<String> {
    diff(desired, Some(live), &mut String::new(), Within::Other)
}

/// What holds the value being compared.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Within {
    /// A map of resource quantities (`limits`, `requests`, `capacity`).
    Quantities,
    Other,
}

impl Within {
    fn key(key: &str) -> Self {
        match key {
            "limits" | "requests" | "capacity" => Within::Quantities,
            _ => Within::Other,
        }
    }
}

fn diff(
    desired: &Value,
    live: Option<&Value>,
    path: &mut String,
    within: Within,
) -> Option<String> {
    let Some(live) = live.filter(|l| !l.is_null()) else {
        return (!omitted(desired)).then(|| at(path));
    };
    match desired {
        Value::Null => None,
        Value::Object(ours) => {
            let Value::Object(theirs) = live else {
                return Some(at(path));
            };
            diff_object(ours, theirs, path, within)
        }
        Value::Array(ours) => {
            let Value::Array(theirs) = live else {
                return Some(at(path));
            };
            diff_list(ours, theirs, path)
        }
        Value::String(ours) if within == Within::Quantities => match live {
            Value::String(theirs) if same_quantity(ours, theirs) => None,
            _ => Some(at(path)),
        },
        scalar => (scalar != live).then(|| at(path)),
    }
}

fn diff_object(
    ours: &Map<String, Value>,
    theirs: &Map<String, Value>,
    path: &mut String,
    within: Within,
) -> Option<String> {
    for (key, value) in ours {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        // The values of a quantity map are quantities; elsewhere a key may name such a map.
        let inner = match within {
            Within::Quantities => Within::Quantities,
            Within::Other => Within::key(key),
        };
        let found = diff(value, theirs.get(key), path, inner);
        path.truncate(len);
        if found.is_some() {
            return found;
        }
    }
    None
}

fn diff_list(ours: &[Value], theirs: &[Value], path: &mut String) -> Option<String> {
    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    let keyed: Option<Vec<String>> = ours.iter().map(name).collect();
    let len = path.len();
    match keyed {
        Some(names) if !ours.is_empty() => {
            for (item, item_name) in ours.iter().zip(names) {
                path.push_str(&format!("[{item_name}]"));
                let live = theirs
                    .iter()
                    .find(|t| name(t).as_deref() == Some(item_name.as_str()));
                let found = diff(item, live, path, Within::Other);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ => {
            if ours.len() != theirs.len() {
                return Some(at(path));
            }
            for (i, (item, live)) in ours.iter().zip(theirs).enumerate() {
                path.push_str(&format!("[{i}]"));
                let found = diff(item, Some(live), path, Within::Other);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
    }
}

/// A value Go's `omitempty` leaves out of what the API server answers.
fn omitted(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "(the object)".into()
    } else {
        path.to_string()
    }
}

fn same_quantity(a: &str, b: &str) -> bool {
    a == b
        || matches!((quantity(a), quantity(b)), (Some(x), Some(y)) if (x - y).abs() <= f64::EPSILON * x.abs().max(y.abs()) * 4.0)
}

/// A resource quantity's value: a decimal number with an optional exponent or suffix
/// (`Ki`..`Ei`, `n`, `u`, `m`, `k`, `M`..`E`).
fn quantity(text: &str) -> Option<f64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => 10f64.powi(exponent[1..].parse().ok()?),
        _ => return None,
    };
    Some(number * scale)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p", "labels": { "a": "1" }, "annotations": {} },
            "spec": {
                "automountServiceAccountToken": false,
                "containers": [{
                    "name": "plugin", "image": "img@sha256:0",
                    "args": ["--a", "--b"],
                    "resources": { "limits": { "memory": "64Mi", "cpu": "250m" } },
                    "volumeMounts": [{ "name": "data", "mountPath": "/data", "readOnly": false }],
                }],
            },
        })
    }

    /// The Pod as the API server answers: defaults filled in, `readOnly: false` and the
    /// empty annotations dropped, quantities canonical, others' additions.
    fn served() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p", "uid": "u1", "labels": { "a": "1", "theirs": "x" } },
            "spec": {
                "automountServiceAccountToken": false,
                "dnsPolicy": "ClusterFirst",
                "containers": [
                    { "name": "sidecar", "image": "other" },
                    {
                        "name": "plugin", "image": "img@sha256:0",
                        "imagePullPolicy": "IfNotPresent",
                        "args": ["--a", "--b"],
                        "resources": { "limits": { "memory": "67108864", "cpu": "0.25" } },
                        "volumeMounts": [{ "name": "data", "mountPath": "/data" }],
                    },
                ],
            },
            "status": { "phase": "Running" },
        })
    }

    #[test]
    fn what_the_server_adds_is_not_a_difference() {
        assert_eq!(difference(&pod(), &served()), None);
    }

    #[test]
    fn an_edited_or_removed_field_we_set_is() {
        type Edit = fn(&mut Value);
        let cases: [(&str, Edit); 6] = [
            ("metadata.labels.a", |v| {
                v["metadata"]["labels"]["a"] = json!("2")
            }),
            ("metadata.labels.a", |v| {
                v["metadata"]["labels"].as_object_mut().unwrap().remove("a");
            }),
            ("spec.containers[plugin].image", |v| {
                v["spec"]["containers"][1]["image"] = json!("evil")
            }),
            ("spec.containers[plugin].args", |v| {
                v["spec"]["containers"][1]["args"] = json!(["--a"])
            }),
            ("spec.containers[plugin].args[1]", |v| {
                v["spec"]["containers"][1]["args"][1] = json!("--c")
            }),
            ("spec.containers[plugin].resources.limits.memory", |v| {
                v["spec"]["containers"][1]["resources"]["limits"]["memory"] = json!("128Mi")
            }),
        ];
        for (path, edit) in cases {
            let mut live = served();
            edit(&mut live);
            assert_eq!(difference(&pod(), &live).as_deref(), Some(path));
        }
        let mut gone = served();
        gone["spec"]["containers"].as_array_mut().unwrap().remove(1);
        assert_eq!(
            difference(&pod(), &gone).as_deref(),
            Some("spec.containers[plugin]")
        );
        assert_eq!(
            difference(&json!({ "suspend": true }), &json!({ "suspend": false })).as_deref(),
            Some("suspend")
        );
        assert_eq!(difference(&json!({ "suspend": false }), &json!({})), None);
    }

    #[test]
    fn quantities_match_by_value_only_where_they_are_quantities() {
        for (a, b, same) in [
            ("1Gi", "1073741824", true),
            ("500m", "0.5", true),
            ("1000", "1k", true),
            ("1e3", "1k", true),
            ("128Mi", "128M", false),
            ("1Gi", "2Gi", false),
        ] {
            assert_eq!(same_quantity(a, b), same, "{a} {b}");
        }
        // Elsewhere a string is a string.
        assert!(
            difference(
                &json!({ "env": [{ "name": "N", "value": "1000" }] }),
                &json!({ "env": [{ "name": "N", "value": "1k" }] })
            )
            .is_some()
        );
    }
}
