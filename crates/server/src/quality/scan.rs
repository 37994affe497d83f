//! A chat's quality scan, decided purely: the body the app posts (`PUT .../quality`) read and
//! checked, every refusal naming the field's path and the reason ([`parse`]); what the host
//! keeps of it ([`Scan::of`]: the worst functions, sorted, within a byte budget, the totals
//! saying how many there were); where it is kept ([`config_map`], [`write()`], [`read`]); which
//! chat's scan a chat reads ([`chats_read`]); and what is told of it ([`event_data`],
//! [`stored`], [`view`]).
//!
//! | bound | value | refused as |
//! |---|---|---|
//! | the body | [`MAX_BODY_BYTES`] (4 MiB) | 413 `body_too_large` |
//! | functions listed | [`MAX_FUNCTIONS`] (10,000) | 400, `functions` |
//! | a function's `file` | a relative path of the working tree, at most 4096 bytes | 400, `functions[i].file` |
//! | a function's `name` | 1 to [`MAX_NAME`] (512) characters | 400, `functions[i].name` |
//! | `line`, `complexity`, `lines` | whole numbers (`line` from 1), at most 2³²−1 | 400, the field |
//! | `score`, each total | a finite number | 400, the field |
//! | `totals` | `files` and `functions` (whole numbers, `functions` at least the functions listed), at most [`MAX_TOTALS`] (32) numbers named by 1 to 64 of `A-Z a-z 0-9 _ . -` | 400, `totals` or `totals.<name>` |
//! | `commit` | 1 to [`MAX_COMMIT`] (128) characters | 400, `commit` |
//! | kept | the worst [`KEPT_FUNCTIONS`] (1,000), within [`KEPT_BYTES`] (768 KiB) as JSON | never refused: the rest is dropped |
//!
//! Unknown fields are refused, so a misspelt one is not silently lost. What is kept stays
//! well below the 1 MiB a ConfigMap holds.

use std::fmt;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Number, Value, json};

use crate::config_map::DataPatch;
use model::names;
use model::resources::Channel;
pub use sdk::api::wire::{Hotspot, ScanTotals};

/// The event a stored scan sends the chat's plugins that subscribe to it.
pub const EVENT: &str = "quality.scanned";
/// The component label of a chat's quality ConfigMap.
pub const COMPONENT: &str = "quality";
/// The key holding the scan.
pub const KEY: &str = "scan";
/// The largest body `PUT .../quality` reads.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// The most functions one scan lists.
pub const MAX_FUNCTIONS: usize = 10_000;
/// The most functions kept of a scan (its worst).
pub const KEPT_FUNCTIONS: usize = 1_000;
/// The bytes the kept functions may take as JSON.
pub const KEPT_BYTES: usize = 768 * 1024;
/// A function's name, in characters.
pub const MAX_NAME: usize = 512;
/// The commit, in characters.
pub const MAX_COMMIT: usize = 128;
/// The numbers of `totals`, `files` and `functions` among them.
pub const MAX_TOTALS: usize = 32;
/// A total's name, in characters.
pub const MAX_TOTAL_NAME: usize = 64;

// The kept functions, the totals (32 names and numbers of at most ~100 bytes each), the commit
// and the ConfigMap's metadata fit the 1 MiB a ConfigMap holds, with room to spare.
const _: () = assert!(KEPT_BYTES + MAX_TOTALS * 100 + MAX_COMMIT * 4 + 64 * 1024 <= 1024 * 1024);

/// Why a posted scan was refused: the field's path (`functions[3].line`) and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct Invalid {
    pub field: String,
    pub why: String,
}

fn invalid(field: impl Into<String>, why: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        why: why.into(),
    }
}

/// A scan as the app posts it, read and checked.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Posted {
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(deserialize_with = "bounded_totals")]
    pub totals: Vec<(String, Number)>,
    #[serde(deserialize_with = "bounded_functions")]
    pub functions: Vec<PostedFunction>,
}

/// A function as the app posts it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostedFunction {
    pub file: String,
    pub name: String,
    pub line: u32,
    pub complexity: u32,
    pub lines: u32,
    pub score: f64,
}

/// Reads `functions`, refusing the one past [`MAX_FUNCTIONS`] before it is read (a body's
/// worth of tiny functions holds no more than that).
fn bounded_functions<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PostedFunction>, D::Error> {
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<PostedFunction>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an array of at most {MAX_FUNCTIONS} functions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
            while let Some(f) = seq.next_element()? {
                if out.len() == MAX_FUNCTIONS {
                    return Err(serde::de::Error::custom(format!(
                        "a scan lists at most {MAX_FUNCTIONS} functions (its worst)"
                    )));
                }
                out.push(f);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded)
}

/// Reads `totals`, refusing the entry past [`MAX_TOTALS`] before it is read.
fn bounded_totals<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, Number)>, D::Error> {
    struct Bounded;
    impl<'de> Visitor<'de> for Bounded {
        type Value = Vec<(String, Number)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an object of at most {MAX_TOTALS} numbers")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out: Vec<(String, Number)> = Vec::new();
            while let Some(name) = map.next_key::<String>()? {
                if out.len() == MAX_TOTALS {
                    return Err(serde::de::Error::custom(format!(
                        "totals hold at most {MAX_TOTALS} numbers"
                    )));
                }
                let value: Number = map.next_value()?;
                if out.iter().any(|(n, _)| *n == name) {
                    return Err(serde::de::Error::custom(format!(
                        "{name} is given more than once"
                    )));
                }
                out.push((name, value));
            }
            Ok(out)
        }
    }
    d.deserialize_map(Bounded)
}

/// Reads the body of `PUT .../quality` and checks it (see the module's table).
pub fn parse(body: &[u8]) -> Result<Posted, Invalid> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(invalid("the body", "must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let posted: Posted = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        // The root (`.`), a place serde could not tell (`?`), or a key with no name.
        let field = if path.is_empty() || path == "." || path == "?" {
            "the body".to_string()
        } else {
            cut(&path, 256)
        };
        invalid(field, cut(&e.into_inner().to_string(), 512))
    })?;
    de.end()
        .map_err(|e| invalid("the body", format!("has more after its object: {e}")))?;
    check(&posted)?;
    Ok(posted)
}

/// `text`, cut to `max` characters (a refusal quotes what it refuses, which may be long).
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The rules of a posted scan that its types do not hold.
pub fn check(posted: &Posted) -> Result<(), Invalid> {
    if let Some(commit) = &posted.commit {
        sdk::api::limits::check_length("commit", commit, MAX_COMMIT, true)
            .map_err(|why| invalid("commit", why.trim_start_matches("commit ")))?;
    }
    let whole = |name: &str| -> Result<u64, Invalid> {
        let field = format!("totals.{name}");
        let (_, n) = posted
            .totals
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| invalid("totals", format!("has no {name}")))?;
        n.as_u64()
            .ok_or_else(|| invalid(field, "must be a whole number, 0 or more"))
    };
    whole("files")?;
    let measured = whole("functions")?;
    if measured < posted.functions.len() as u64 {
        return Err(invalid(
            "totals.functions",
            format!(
                "is {measured}, fewer than the {} functions listed",
                posted.functions.len()
            ),
        ));
    }
    for (name, n) in &posted.totals {
        let field = format!("totals.{name}");
        let named = !name.is_empty()
            && name.chars().count() <= MAX_TOTAL_NAME
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !named {
            let shown: String = name.chars().take(MAX_TOTAL_NAME).collect();
            return Err(invalid(
                "totals",
                format!(
                    "{shown:?} is not a total's name: 1 to {MAX_TOTAL_NAME} of A-Z a-z 0-9 _ . -"
                ),
            ));
        }
        if !n.as_f64().is_some_and(f64::is_finite) {
            return Err(invalid(field, "must be a finite number"));
        }
    }
    for (i, f) in posted.functions.iter().enumerate() {
        let at = |name: &str| format!("functions[{i}].{name}");
        sdk::api::limits::check_file_path(&f.file).map_err(|why| invalid(at("file"), why))?;
        sdk::api::limits::check_length("name", &f.name, MAX_NAME, true)
            .map_err(|why| invalid(at("name"), why.trim_start_matches("name ")))?;
        if f.line == 0 {
            return Err(invalid(at("line"), "must be 1 or more"));
        }
        if !f.score.is_finite() {
            return Err(invalid(at("score"), "must be a finite number"));
        }
    }
    Ok(())
}

/// A scan as the host keeps it (the ConfigMap's key [`KEY`], as JSON) and the app reads it
/// back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub totals: ScanTotals,
    /// How many functions the app listed; the kept are the worst of them.
    pub listed: usize,
    /// The worst functions listed, worst first ([`Hotspot::worst_first`]).
    pub functions: Vec<Hotspot>,
    /// When the host stored it.
    pub scanned_at: Timestamp,
}

impl Scan {
    /// What the host keeps of a checked scan stored at `now`: its functions sorted worst
    /// first, as many of the worst as fit [`KEPT_FUNCTIONS`] and [`KEPT_BYTES`].
    pub fn of(posted: Posted, now: Timestamp) -> Scan {
        let listed = posted.functions.len();
        let mut functions: Vec<Hotspot> = posted
            .functions
            .into_iter()
            .map(|f| Hotspot {
                file: f.file,
                name: f.name,
                line: f.line,
                complexity: f.complexity,
                lines: f.lines,
                score: f.score,
            })
            .collect();
        functions.sort_by(Hotspot::worst_first);
        functions.truncate(kept(&functions));
        let mut totals = ScanTotals {
            files: 0,
            functions: 0,
            other: Default::default(),
        };
        for (name, n) in posted.totals {
            match name.as_str() {
                "files" => totals.files = n.as_u64().unwrap_or_default(),
                "functions" => totals.functions = n.as_u64().unwrap_or_default(),
                _ => {
                    totals.other.insert(name, n);
                }
            }
        }
        Scan {
            commit: posted.commit,
            totals,
            listed,
            functions,
            scanned_at: now,
        }
    }
}

/// How many of `sorted` are kept: the longest prefix of at most [`KEPT_FUNCTIONS`] whose JSON
/// fits [`KEPT_BYTES`] (a prefix, so what is kept is always the worst).
pub fn kept(sorted: &[Hotspot]) -> usize {
    let mut bytes = 0;
    for (n, f) in sorted.iter().take(KEPT_FUNCTIONS).enumerate() {
        bytes += serde_json::to_vec(f).map_or(usize::MAX, |v| v.len() + 1);
        if bytes > KEPT_BYTES {
            return n;
        }
    }
    sorted.len().min(KEPT_FUNCTIONS)
}

/// The ConfigMap of a chat's scan: `<chat>-quality`.
pub fn name(chat: &str) -> String {
    names::join_name(&[chat, COMPONENT])
}

/// The chat's quality ConfigMap, empty (its key is merged in), owned by the chat, so it goes
/// with it, and labelled for the API server's watch.
pub fn config_map(chat: &Channel) -> ConfigMap {
    let name_of = chat.name_any();
    crate::config_map::empty(
        name(&name_of),
        &chat.namespace().unwrap_or_default(),
        names::labels("", &chat.spec.project, &name_of, COMPONENT),
        kube::Resource::owner_ref(chat, &()),
    )
}

/// The data patch that writes `scan`.
pub fn write(scan: &Scan) -> DataPatch {
    DataPatch::from([(
        KEY.to_string(),
        Some(serde_json::to_string(scan).expect("a scan serializes")),
    )])
}

/// The scan a ConfigMap holds (none when it holds none that parses).
pub fn read(map: &ConfigMap) -> Option<Scan> {
    serde_json::from_str(map.data.as_ref()?.get(KEY)?).ok()
}

/// The chats whose scan `chat` reads, in order: its own, then, for a thread without a working
/// tree of its own (it works on its channel's tree), its channel's.
pub fn chats_read(chat: &Channel) -> Vec<String> {
    let mut chats = vec![chat.name_any()];
    if chat.spec.working_tree.is_none()
        && let Some(parent) = &chat.spec.parent
    {
        chats.push(parent.clone());
    }
    chats
}

/// The data of the `quality.scanned` event: the commit (when the app named one), the totals
/// and when the scan was stored.
pub fn event_data(scan: &Scan) -> Value {
    let mut data = json!({ "totals": scan.totals, "scanned_at": scan.scanned_at });
    if let Some(commit) = &scan.commit {
        data["commit"] = json!(commit);
    }
    data
}

/// What `PUT .../quality` answers of the stored scan (beside the event's deliveries): the
/// chat, the commit, the totals, when it was stored, and how many functions were listed and
/// kept.
pub fn stored(chat: &str, scan: &Scan) -> Value {
    let mut answer = event_data(scan);
    answer["chat"] = json!(chat);
    answer["listed"] = json!(scan.listed);
    answer["kept"] = json!(scan.functions.len());
    answer
}

/// What `GET .../quality` answers: the scan as kept, with its chat.
pub fn view(chat: &str, scan: &Scan) -> Value {
    let mut answer = serde_json::to_value(scan).expect("a scan serializes");
    answer["chat"] = json!(chat);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::{App, ChannelKind, ChannelSpec, WorkingTree};

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn function(i: usize, score: f64) -> Value {
        json!({"file": format!("src/f{i}.rs"), "name": format!("f{i}"), "line": i + 1,
               "complexity": 3, "lines": 20, "score": score})
    }

    fn body(functions: Vec<Value>) -> Value {
        json!({"commit": "3f2c1a9e", "totals": {"files": 2, "functions": functions.len() + 5,
               "lines": 1200, "average_complexity": 2.5}, "functions": functions})
    }

    fn refusal(body: &Value) -> String {
        parse(body.to_string().as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn a_scan_is_kept_worst_first_with_its_totals() {
        let posted = parse(
            body(vec![function(0, 1.0), function(1, 9.5), function(2, 4.0)])
                .to_string()
                .as_bytes(),
        )
        .unwrap();
        let scan = Scan::of(posted, at(0));
        let names: Vec<&str> = scan.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["f1", "f2", "f0"]);
        assert_eq!(
            (scan.listed, scan.totals.files, scan.totals.functions),
            (3, 2, 8)
        );
        assert_eq!(
            serde_json::to_value(&scan.totals).unwrap(),
            json!({"files": 2, "functions": 8, "lines": 1200, "average_complexity": 2.5})
        );
        assert_eq!(scan.commit.as_deref(), Some("3f2c1a9e"));
        // It round-trips through the ConfigMap, owned by its chat and labelled for the watch.
        let mut map = config_map(&chat("general", None, false));
        for (k, v) in write(&scan) {
            map.data.get_or_insert_default().insert(k, v.unwrap());
        }
        assert_eq!(read(&map), Some(scan.clone()));
        assert_eq!(map.metadata.name.as_deref(), Some("general-quality"));
        assert_eq!(map.labels()["app.kubernetes.io/component"], "quality");
        assert_eq!(
            map.metadata.owner_references.as_ref().unwrap()[0].name,
            "general"
        );
        assert_eq!(
            event_data(&scan),
            json!({"commit": "3f2c1a9e", "totals": scan.totals, "scanned_at": at(0)})
        );
        assert_eq!(stored("general", &scan)["kept"], 3);
        assert_eq!(view("general", &scan)["functions"][0]["name"], "f1");
    }

    #[test]
    fn ties_are_ordered_whatever_order_the_app_listed_them_in() {
        let mut listed = vec![
            function(2, 5.0),
            function(1, 5.0),
            json!({"file": "a.rs", "name": "x", "line": 1, "complexity": 9, "lines": 1, "score": 5.0}),
        ];
        let first = Scan::of(
            parse(body(listed.clone()).to_string().as_bytes()).unwrap(),
            at(0),
        );
        listed.reverse();
        let second = Scan::of(parse(body(listed).to_string().as_bytes()).unwrap(), at(0));
        assert_eq!(first.functions, second.functions);
        let names: Vec<&str> = first.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["x", "f1", "f2"]);
    }

    #[test]
    fn only_the_worst_that_fit_are_kept() {
        let many: Vec<Value> = (0..MAX_FUNCTIONS).map(|i| function(i, i as f64)).collect();
        let scan = Scan::of(parse(body(many).to_string().as_bytes()).unwrap(), at(0));
        assert_eq!(
            (scan.listed, scan.functions.len()),
            (MAX_FUNCTIONS, KEPT_FUNCTIONS)
        );
        assert_eq!(scan.functions[0].name, format!("f{}", MAX_FUNCTIONS - 1));
        // Long names and paths: fewer are kept, within the bytes, still the worst.
        let long: Vec<Value> = (0..2000)
            .map(|i| {
                json!({"file": format!("{}/{i}.rs", "d".repeat(3000)), "name": "é".repeat(MAX_NAME),
                       "line": 1, "complexity": 1, "lines": 1, "score": i})
            })
            .collect();
        let scan = Scan::of(parse(body(long).to_string().as_bytes()).unwrap(), at(0));
        assert!(scan.functions.len() < 300, "{}", scan.functions.len());
        assert_eq!(scan.functions[0].score, 1999.0);
        let stored = serde_json::to_string(&scan).unwrap().len();
        assert!(stored <= KEPT_BYTES + 4096, "{stored}");
        assert!(scan.functions.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn refusals_name_the_field() {
        let mut b = body(vec![function(0, 1.0)]);
        b["functions"][0]["line"] = json!(0);
        assert_eq!(refusal(&b), "functions[0].line: must be 1 or more");
        b["functions"][0]["line"] = json!(-1);
        assert!(
            refusal(&b).starts_with("functions[0].line: invalid value"),
            "{}",
            refusal(&b)
        );
        b["functions"][0]["line"] = json!(1.5);
        assert!(refusal(&b).starts_with("functions[0].line: invalid type"));
        b["functions"][0]["line"] = json!(4_294_967_296u64);
        assert!(refusal(&b).starts_with("functions[0].line:"));
        b["functions"][0]["line"] = json!(1);
        for (file, why) in [
            ("/etc/passwd", "is absolute"),
            ("../x", ". or .."),
            ("", "is empty"),
        ] {
            b["functions"][0]["file"] = json!(file);
            let r = refusal(&b);
            assert!(
                r.starts_with("functions[0].file: ") && r.contains(why),
                "{r}"
            );
        }
        b["functions"][0]["file"] = json!("src/a.rs");
        b["functions"][0]["name"] = json!("n".repeat(MAX_NAME + 1));
        assert_eq!(
            refusal(&b),
            "functions[0].name: has 513 characters; at most 512 are allowed"
        );
        b["functions"][0]["name"] = json!("");
        assert_eq!(refusal(&b), "functions[0].name: must not be empty");
        b["functions"][0]["name"] = json!("f");
        b["functions"][0]["score"] = json!("high");
        assert!(refusal(&b).starts_with("functions[0].score: invalid type"));
        b["functions"][0]["score"] = json!(1);
        b["functions"][0]["colour"] = json!("red");
        assert!(
            refusal(&b).contains("unknown field `colour`"),
            "{}",
            refusal(&b)
        );
        b["functions"][0].as_object_mut().unwrap().remove("colour");
        b["functions"][0].as_object_mut().unwrap().remove("lines");
        assert!(refusal(&b).starts_with("functions[0]: missing field `lines`"));
        b["functions"][0]["lines"] = json!(1);

        let mut t = b.clone();
        t["totals"]["functions"] = json!(0);
        assert_eq!(
            refusal(&t),
            "totals.functions: is 0, fewer than the 1 functions listed"
        );
        t["totals"].as_object_mut().unwrap().remove("files");
        assert_eq!(refusal(&t), "totals: has no files");
        t["totals"]["files"] = json!(-2);
        assert_eq!(
            refusal(&t),
            "totals.files: must be a whole number, 0 or more"
        );
        t["totals"]["files"] = json!(2);
        t["totals"]["functions"] = json!(5);
        t["totals"]["lines"] = json!("many");
        assert!(
            refusal(&t).starts_with("totals.lines: invalid type"),
            "{}",
            refusal(&t)
        );
        t["totals"]["lines"] = json!(1);
        t["totals"]["bad name"] = json!(1);
        assert!(refusal(&t).starts_with("totals: \"bad name\" is not a total's name"));
        t["totals"].as_object_mut().unwrap().remove("bad name");
        for i in 0..MAX_TOTALS {
            t["totals"][format!("t{i}")] = json!(i);
        }
        assert!(
            refusal(&t).contains("totals hold at most 32 numbers"),
            "{}",
            refusal(&t)
        );

        let mut c = b.clone();
        c["commit"] = json!("");
        assert_eq!(refusal(&c), "commit: must not be empty");
        c["commit"] = json!("c".repeat(MAX_COMMIT + 1));
        assert!(refusal(&c).starts_with("commit: has 129 characters"));
        c["commit"] = json!(null);
        assert!(parse(c.to_string().as_bytes()).is_ok());
        c["extra"] = json!(1);
        assert!(
            refusal(&c).starts_with("extra: unknown field `extra`"),
            "{}",
            refusal(&c)
        );

        for bad in ["[]", "", "{", "{} {}", "nope"] {
            let r = parse(bad.as_bytes()).unwrap_err();
            assert_eq!(r.field, "the body", "{bad}: {r}");
        }
        // An unknown field with no name, or a very long one, is still named, and shortly.
        let r = parse(br#"{"": 1}"#).unwrap_err();
        assert_eq!(r.field, "the body", "{r}");
        let long = format!(r#"{{"{}": 1}}"#, "k".repeat(10_000));
        let r = parse(long.as_bytes()).unwrap_err();
        assert!(r.to_string().len() < 1000, "{}", r.to_string().len());
        let r = parse(br#"{"totals": {"files": 1, "functions": 1}}"#).unwrap_err();
        assert!(
            r.to_string()
                .starts_with("the body: missing field `functions`"),
            "{r}"
        );
    }

    #[test]
    fn a_scan_past_the_cap_is_refused_before_it_is_read_whole() {
        let many: Vec<Value> = (0..=MAX_FUNCTIONS).map(|i| function(i, 1.0)).collect();
        let r = parse(body(many).to_string().as_bytes()).unwrap_err();
        assert_eq!(r.field, "functions");
        assert!(r.why.contains("at most 10000"), "{r}");
    }

    #[test]
    fn non_finite_scores_are_refused_however_they_come() {
        let posted = Posted {
            commit: None,
            totals: vec![("files".into(), 1.into()), ("functions".into(), 1.into())],
            functions: vec![PostedFunction {
                file: "a.rs".into(),
                name: "a".into(),
                line: 1,
                complexity: 1,
                lines: 1,
                score: f64::NAN,
            }],
        };
        assert_eq!(
            check(&posted).unwrap_err().to_string(),
            "functions[0].score: must be a finite number"
        );
        // JSON itself holds none: a number out of f64's range does not parse.
        let r = parse(br#"{"totals": {"files": 1, "functions": 1}, "functions": [{"file": "a", "name": "a", "line": 1, "complexity": 1, "lines": 1, "score": 1e999}]}"#)
            .unwrap_err();
        assert!(r.field.starts_with("functions[0].score"), "{r}");
    }

    fn chat(name: &str, parent: Option<&str>, tree: bool) -> Channel {
        let mut c = Channel::new(
            name,
            ChannelSpec {
                project: "proj".into(),
                kind: if parent.is_some() {
                    ChannelKind::Thread
                } else {
                    ChannelKind::Channel
                },
                parent: parent.map(Into::into),
                app: App::Desktop,
                hidden: false,
                working_tree: tree.then(|| WorkingTree {
                    claim_name: "repo".into(),
                    sub_path: None,
                }),
            },
        );
        c.metadata.namespace = Some("team".into());
        c.metadata.uid = Some(format!("uid-{name}"));
        c
    }

    #[test]
    fn a_thread_on_its_channels_tree_reads_the_channels_scan_after_its_own() {
        assert_eq!(chats_read(&chat("general", None, true)), ["general"]);
        assert_eq!(
            chats_read(&chat("general-t1", Some("general"), false)),
            ["general-t1", "general"]
        );
        assert_eq!(chats_read(&chat("wt", Some("general"), true)), ["wt"]);
    }
}
