//! One tool call of a run as its transcript keeps it, every decision pure: the entry built from
//! the call ([`entry`]), each part cut to what the ConfigMap can hold ([`MAX_PART`]), the keys a
//! call writes ([`patch`]), and the transcript read back in order ([`Transcript::of`]).
//!
//! A part (the input, the result's text, its structured content) longer than [`MAX_PART`]
//! bytes as stored, or nested deeper than [`MAX_DEPTH`], is kept as the beginning of its text
//! (for a JSON value, of its compact JSON text, as a string) and `cut` says how long it was.
//! JSON values are walked without recursion, so no input, however deep or long, can exhaust
//! the stack or make more than [`MAX_PART`] bytes of text.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config_map::DataPatch;
use crate::tool_calls::ToolResult;

/// The most calls a transcript keeps: the latest; the earlier ones are counted as `dropped`.
pub const MAX_ENTRIES: u32 = 64;
/// The most bytes each part of an entry (input, result text, structured content) takes in the
/// stored entry: 64 entries of three parts stay under 800 KiB, within a ConfigMap's 1 MiB.
pub const MAX_PART: usize = 4096;
/// The most bytes a tool's name takes (the endpoint records only the tools it gives, whose
/// names the manifest bounds; this holds whatever comes).
pub const MAX_TOOL: usize = 256;
/// The deepest JSON a part keeps as a value: deeper, it is cut to text, so an entry always
/// reads back (serde_json refuses to read past 128 levels).
pub const MAX_DEPTH: usize = 64;
/// The key holding how many calls the transcript dropped.
pub const DROPPED_KEY: &str = "dropped";
/// The prefix of a call's key: `call-<seq>`.
pub const CALL_PREFIX: &str = "call-";

/// One call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The call's number in the run, from 1.
    pub seq: u32,
    /// The tool, as the runner called it (its MCP name, `plugin_<tool>`).
    pub tool: String,
    /// The input, or the beginning of its JSON text when cut.
    pub input: Value,
    pub result: EntryResult,
    /// When the call came, RFC 3339 to the millisecond.
    pub at: String,
    /// How long it took to answer, in milliseconds (an approval's wait included).
    pub ms: u64,
    /// The original sizes, in bytes, of the parts that were cut.
    #[serde(default, skip_serializing_if = "Cut::is_empty")]
    pub cut: Cut,
}

/// A call's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntryResult {
    /// The text of the result's content, its blocks joined by newlines.
    pub text: String,
    /// The structured content, or the beginning of its JSON text when cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    pub is_error: bool,
}

/// The sizes, in bytes, of the parts cut (the JSON text's for a value, the UTF-8's for text).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<usize>,
}

impl Cut {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What the endpoint knows of a call once answered.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    pub tool: &'a str,
    pub input: &'a Value,
    pub result: &'a ToolResult,
    /// When it came.
    pub at: jiff::Timestamp,
    pub took: std::time::Duration,
}

/// The entry of call number `seq`.
pub fn entry(seq: u32, call: &Call) -> Entry {
    let mut cut = Cut::default();
    let (input, input_cut) = bounded_value(call.input, MAX_PART);
    cut.input = input_cut;
    let text = joined_text(&call.result.content);
    let kept = cut_escaped(&text, MAX_PART);
    if kept.len() < text.len() {
        cut.text = Some(text.len());
    }
    let structured = call.result.structured_content.as_ref().map(|s| {
        let (value, was) = bounded_value(s, MAX_PART);
        cut.structured = was;
        value
    });
    Entry {
        seq,
        tool: cut_escaped(call.tool, MAX_TOOL).to_string(),
        input,
        result: EntryResult {
            text: kept.to_string(),
            structured,
            is_error: call.result.is_error,
        },
        at: crate::clock::rfc3339_millis(call.at),
        ms: u64::try_from(call.took.as_millis()).unwrap_or(u64::MAX),
        cut,
    }
}

/// The text of MCP content blocks: each block's `text`, joined by newlines.
pub fn joined_text(content: &[Value]) -> String {
    content
        .iter()
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The key of call `seq`.
pub fn key(seq: u32) -> String {
    format!("{CALL_PREFIX}{seq}")
}

/// The keys writing `entry` sets: its own; past [`MAX_ENTRIES`], the call that many before it
/// taken out and the count of those dropped. Each call writes keys of its own, so writes never
/// race (two calls write the same `dropped` only with the same value).
pub fn patch(entry: &Entry) -> DataPatch {
    let mut patch = DataPatch::new();
    let text = serde_json::to_string(entry).expect("an entry serializes");
    patch.insert(key(entry.seq), Some(text));
    if let Some(dropped) = entry.seq.checked_sub(MAX_ENTRIES).filter(|d| *d > 0) {
        patch.insert(key(dropped), None);
        patch.insert(DROPPED_KEY.into(), Some(dropped.to_string()));
    }
    patch
}

/// `patch` applied to `data`, as a merge patch applies it to a ConfigMap's data.
pub fn apply(data: &mut BTreeMap<String, String>, patch: &DataPatch) {
    for (key, value) in patch {
        match value {
            Some(v) => data.insert(key.clone(), v.clone()),
            None => data.remove(key),
        };
    }
}

/// A transcript as read back.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Transcript {
    /// The calls kept, in the order they came.
    pub calls: Vec<Entry>,
    /// How many earlier calls were dropped.
    pub dropped: u32,
}

impl Transcript {
    /// The transcript a ConfigMap holds: its calls in order (an entry that does not read, as a
    /// hand edit may leave, left out), and the count dropped.
    pub fn of(map: &ConfigMap) -> Self {
        Self::of_data(map.data.as_ref().unwrap_or(&BTreeMap::new()))
    }

    pub fn of_data(data: &BTreeMap<String, String>) -> Self {
        let mut calls: Vec<Entry> = data
            .iter()
            .filter(|(k, _)| k.starts_with(CALL_PREFIX))
            .filter_map(|(_, v)| serde_json::from_str(v).ok())
            .collect();
        calls.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.at.cmp(&b.at)));
        let dropped = data
            .get(DROPPED_KEY)
            .and_then(|d| d.trim().parse().ok())
            .unwrap_or(0);
        Self { calls, dropped }
    }
}

/// `value` as kept: itself when its JSON text is at most `max` bytes stored and it is at most
/// [`MAX_DEPTH`] deep; else the beginning of its JSON text as a string, with the text's length.
fn bounded_value(value: &Value, max: usize) -> (Value, Option<usize>) {
    let head = json_head(value, max);
    if head.len <= max && head.depth <= MAX_DEPTH {
        return (value.clone(), None);
    }
    let kept = cut_escaped(&head.text, max).to_string();
    (Value::String(kept), Some(head.len))
}

/// The beginning of a value's compact JSON text.
#[derive(Debug)]
struct Head {
    /// At most the `max` first bytes of the text (on a character boundary).
    text: String,
    /// The whole text's length in bytes.
    len: usize,
    /// How deep the value is (a scalar is 1).
    depth: usize,
}

/// What is left to write of a value, walking without recursion.
enum Step<'a> {
    Value(&'a Value, usize),
    Text(&'static str),
    Key(&'a str),
}

/// The beginning (at most `max` bytes) of `value`'s compact JSON text, as serde_json writes it,
/// with the whole text's length and the value's depth; walked with a stack of its own.
fn json_head(value: &Value, max: usize) -> Head {
    let mut head = Head {
        text: String::new(),
        len: 0,
        depth: 0,
    };
    let push = |head: &mut Head, piece: &str| {
        head.len = head.len.saturating_add(piece.len());
        if head.text.len() < max {
            let room = max - head.text.len();
            head.text.push_str(prefix_within(piece, room));
        }
    };
    let mut steps = vec![Step::Value(value, 1)];
    while let Some(step) = steps.pop() {
        match step {
            Step::Text(t) => push(&mut head, t),
            Step::Key(k) => {
                push(&mut head, &quoted(k));
                push(&mut head, ":");
            }
            Step::Value(v, depth) => {
                head.depth = head.depth.max(depth);
                match v {
                    Value::Array(items) => {
                        push(&mut head, "[");
                        steps.push(Step::Text("]"));
                        for (i, item) in items.iter().enumerate().rev() {
                            steps.push(Step::Value(item, depth + 1));
                            if i > 0 {
                                steps.push(Step::Text(","));
                            }
                        }
                    }
                    Value::Object(fields) => {
                        push(&mut head, "{");
                        steps.push(Step::Text("}"));
                        let fields: Vec<_> = fields.iter().collect();
                        for (i, (k, item)) in fields.into_iter().enumerate().rev() {
                            steps.push(Step::Value(item, depth + 1));
                            steps.push(Step::Key(k));
                            if i > 0 {
                                steps.push(Step::Text(","));
                            }
                        }
                    }
                    Value::String(s) => push(&mut head, &quoted(s)),
                    scalar => push(&mut head, &scalar.to_string()),
                }
            }
        }
    }
    head
}

/// A string as a JSON string literal.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The longest prefix of `s` of at most `max` bytes, on a character boundary.
fn prefix_within(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The longest prefix of `s` whose JSON string literal (quotes and escapes included) is at
/// most `max` bytes: what a part of `max` bytes holds of it.
pub fn cut_escaped(s: &str, max: usize) -> &str {
    let mut used = 2usize;
    for (i, c) in s.char_indices() {
        used += escaped_len(c);
        if used > max {
            return &s[..i];
        }
    }
    s
}

/// How many bytes serde_json writes for `c` inside a string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(text: &str, structured: Option<Value>, is_error: bool) -> ToolResult {
        ToolResult {
            content: vec![json!({ "type": "text", "text": text })],
            structured_content: structured,
            is_error,
            error_code: None,
        }
    }

    fn call<'a>(input: &'a Value, result: &'a ToolResult) -> Call<'a> {
        Call {
            tool: "plugin_echo",
            input,
            result,
            at: "2026-12-05T09:00:01.250Z".parse().unwrap(),
            took: std::time::Duration::from_millis(12),
        }
    }

    /// The entry's stored size, as the ConfigMap holds it.
    fn stored(entry: &Entry) -> usize {
        serde_json::to_string(entry).unwrap().len()
    }

    /// What each part takes stored.
    fn part_len(v: &Value) -> usize {
        serde_json::to_string(v).unwrap().len()
    }

    #[test]
    fn a_small_call_is_kept_whole() {
        let input = json!({ "text": "hello" });
        let r = result(
            r#"{"echo":"hello"}"#,
            Some(json!({ "echo": "hello" })),
            false,
        );
        let e = entry(3, &call(&input, &r));
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({
                "seq": 3, "tool": "plugin_echo", "input": { "text": "hello" },
                "result": { "text": "{\"echo\":\"hello\"}", "structured": { "echo": "hello" }, "is_error": false },
                "at": "2026-12-05T09:00:01.25Z", "ms": 12
            })
        );
    }

    #[test]
    fn the_texts_of_the_blocks_are_joined_and_other_blocks_left_out() {
        let content = vec![
            json!({ "type": "text", "text": "one" }),
            json!({ "type": "image", "data": "…" }),
            json!({ "type": "text", "text": 5 }),
            json!({ "type": "text", "text": "two" }),
        ];
        assert_eq!(joined_text(&content), "one\ntwo");
    }

    #[test]
    fn a_long_input_is_cut_to_the_beginning_of_its_json_with_its_size() {
        let input = json!({ "text": "x".repeat(100_000) });
        let r = result("ok", None, false);
        let e = entry(1, &call(&input, &r));
        let whole = serde_json::to_string(&input).unwrap();
        assert_eq!(e.cut.input, Some(whole.len()));
        let head = e.input.as_str().unwrap();
        assert!(whole.starts_with(head), "{head}");
        assert!(part_len(&e.input) <= MAX_PART);
        // Quotes in the JSON text are escaped in the stored string: it still fits.
        assert!(head.len() > MAX_PART / 2);
    }

    #[test]
    fn a_long_text_and_structured_content_are_cut_each_on_its_own() {
        let input = json!({});
        let big = "é\"\n".repeat(10_000);
        let r = result(&big, Some(json!({ "echo": big })), true);
        let e = entry(1, &call(&input, &r));
        assert_eq!(e.cut.text, Some(big.len()));
        assert!(big.starts_with(&e.result.text));
        assert!(part_len(&json!(e.result.text)) <= MAX_PART);
        let structured = e.result.structured.as_ref().unwrap();
        assert!(structured.is_string() && part_len(structured) <= MAX_PART);
        assert!(e.cut.structured.unwrap() > big.len());
        assert!(e.cut.input.is_none() && e.result.is_error);
    }

    #[test]
    fn json_too_deep_to_read_back_is_cut_to_text() {
        let mut deep = json!("bottom");
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        let r = result("", None, false);
        let e = entry(1, &call(&deep, &r));
        assert!(e.input.is_string(), "deeper than {MAX_DEPTH}: cut");
        assert_eq!(
            e.cut.input,
            Some(serde_json::to_string(&deep).unwrap().len())
        );
        let read: Entry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(read, e);
        // One level less is kept as it is, and reads back.
        let Value::Array(mut inner) = deep else {
            unreachable!()
        };
        let shallower = inner.remove(0);
        let e = entry(1, &call(&shallower, &r));
        assert_eq!(e.input, shallower);
        let read: Entry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(read, e);
    }

    #[test]
    fn a_value_nested_thousands_deep_is_cut_without_recursing() {
        let deep = hostile::inputs::nested_value(3000);
        let r = result("", Some(hostile::inputs::nested_value(3000)), false);
        let e = entry(1, &call(&deep, &r));
        assert_eq!(e.cut.input, Some(6000));
        assert_eq!(e.cut.structured, Some(6000));
        assert!(e.input.as_str().unwrap().starts_with(&"[".repeat(3000)));
        let read: Entry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(read, e);
    }

    #[test]
    fn the_json_head_is_serde_jsons_text() {
        let values = [
            json!(null),
            json!(1.5),
            json!(-7),
            json!("a\"b\\c\u{1}\u{7f}é😀"),
            json!([]),
            json!({}),
            json!({ "b": [1, { "c": null }], "a": "x", "\u{0}k": true }),
        ];
        for v in values {
            let head = json_head(&v, usize::MAX);
            assert_eq!(head.text, serde_json::to_string(&v).unwrap());
            assert_eq!(head.len, head.text.len());
        }
    }

    #[test]
    fn cut_text_is_whole_characters_within_the_bound() {
        for s in ["", "abc", "😀😀😀", "\u{0}\u{1f}\"\\", "e\u{301}e\u{301}"] {
            for max in 0..20 {
                let kept = cut_escaped(s, max);
                assert!(s.starts_with(kept));
                assert!(max < 2 || part_len(&json!(kept)) <= max, "{s:?} {max}");
            }
        }
    }

    #[test]
    fn the_latest_64_are_kept_and_the_dropped_counted() {
        let input = json!({});
        let r = result("ok", None, false);
        let mut data = BTreeMap::new();
        for seq in 1..=MAX_ENTRIES + 5 {
            let p = patch(&entry(seq, &call(&input, &r)));
            apply(&mut data, &p);
        }
        let t = Transcript::of_data(&data);
        assert_eq!(t.dropped, 5);
        let seqs: Vec<u32> = t.calls.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (6..=MAX_ENTRIES + 5).collect::<Vec<_>>());
        assert_eq!(data.len(), MAX_ENTRIES as usize + 1);
    }

    #[test]
    fn calls_read_back_in_their_order_not_their_keys() {
        let input = json!({});
        let r = result("ok", None, false);
        let mut data = BTreeMap::new();
        for seq in [10, 2, 1, 100, 9] {
            let p = patch(&entry(seq, &call(&input, &r)));
            apply(&mut data, &p);
        }
        data.insert("call-7".into(), "not an entry".into());
        data.insert(DROPPED_KEY.into(), "many".into());
        let t = Transcript::of_data(&data);
        let seqs: Vec<u32> = t.calls.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 9, 10, 100]);
        assert_eq!(t.dropped, 0);
    }

    #[test]
    fn a_full_transcript_of_the_largest_entries_stays_well_within_a_config_map() {
        // Every part at its worst: long, escaped, multi-byte, a long tool name.
        let nasty = "\"\\\u{1}😀é".repeat(50_000);
        let input = json!({ "a": nasty, "b": [nasty, nasty] });
        let r = result(&nasty, Some(json!({ "k": nasty })), true);
        let tool = "t".repeat(10_000);
        let mut data = BTreeMap::new();
        let mut biggest = 0;
        for seq in 1..=MAX_ENTRIES * 2 {
            let mut c = call(&input, &r);
            c.tool = &tool;
            let e = entry(seq, &c);
            biggest = biggest.max(stored(&e));
            apply(&mut data, &patch(&e));
        }
        let total: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(biggest <= 3 * MAX_PART + MAX_TOOL + 512, "{biggest}");
        assert!(total < 800 * 1024, "{total}");
    }
}
