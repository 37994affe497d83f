//! Generators of hostile input that several targets share: JSON values and JSON5 text with
//! every feature of the syntax, nesting far past any limit, and byte-level mutations of valid
//! seeds (flips, insertions, deletions, repeats, splices), which reach the corners of a parser
//! that random bytes never do.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// A small deterministic generator for choices made while rendering (xorshift).
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Strings that parsers treat specially.
const NASTY_STRINGS: &[&str] = &[
    "",
    "..",
    "../../etc/passwd",
    "/abs",
    "a\u{0}b",
    "\u{feff}",
    "\u{202e}rtl",
    "ui/../../x",
    "*",
    "**/..",
    "__",
    "plugin_",
    "%2e%2e",
    "\\\\server\\share",
    "C:\\x",
    "a\nb",
    "\"'`",
    "${HOME}",
    "{{.x}}",
    "0 9 * * *",
    "*/0 * * * *",
    "99999999999999999999",
    "-0",
    "1e400",
    "NaN",
];

/// Any JSON value, nested at most `depth` levels (a scalar is 1), with nasty strings and
/// numbers among the plain ones.
pub fn json_value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (0..NASTY_STRINGS.len()).prop_map(|i| Value::String(NASTY_STRINGS[i].into())),
        "[a-z_]{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(depth.saturating_sub(1), 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![
        "[a-z_]{1,10}",
        (0..NASTY_STRINGS.len()).prop_map(|i| NASTY_STRINGS[i].to_string()),
        any::<String>(),
    ]
    .boxed()
}

/// `seeds` with one to four of their values replaced: by any value, by one nested `depth`
/// deep, by a long string or array, or by a value of another type. Keep `depth` to a few
/// thousand: dropping a value recurses once per level (make deeper nesting as text).
pub fn json_mutated(seeds: Vec<Value>, depth: u32) -> BoxedStrategy<Value> {
    assert!(!seeds.is_empty());
    let n = seeds.len();
    (
        0..n,
        prop::collection::vec((any::<u64>(), replacement(depth)), 1..5),
    )
        .prop_map(move |(i, edits)| {
            let mut v = seeds[i].clone();
            for (at, with) in edits {
                replace_at(&mut v, at, with);
            }
            v
        })
        .boxed()
}

/// `seeds` with one to four of their scalars replaced, most often by one of the same type (a
/// nasty, long or unicode string for a string, any number for a number), else by any scalar:
/// the shape stays, so the input reaches what reads the values.
pub fn json_leaves_mutated(seeds: Vec<Value>) -> BoxedStrategy<Value> {
    assert!(!seeds.is_empty());
    let n = seeds.len();
    let string = prop_oneof![
        (0..NASTY_STRINGS.len()).prop_map(|i| NASTY_STRINGS[i].to_string()),
        any::<String>(),
        (0usize..100_000).prop_map(|n| "é".repeat(n)),
    ];
    let number = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
    ];
    let edit = (any::<u64>(), any::<bool>(), string, number, json_value(1));
    (0..n, prop::collection::vec(edit, 1..5))
        .prop_map(move |(i, edits)| {
            let mut v = seeds[i].clone();
            for (at, same_type, string, number, any) in edits {
                replace_leaf(&mut v, at, |old| match old {
                    Value::String(_) if same_type => Value::String(string),
                    Value::Number(_) if same_type => number,
                    Value::Bool(b) if same_type => Value::Bool(!b),
                    _ => any,
                });
            }
            v
        })
        .boxed()
}

/// Replaces a scalar chosen by `at` (a walk down from the root), if the walk finds one.
fn replace_leaf(root: &mut Value, at: u64, with: impl FnOnce(&Value) -> Value) {
    let mut dice = Dice::new(at);
    let mut here = root;
    loop {
        let len = match &*here {
            Value::Array(items) => items.len(),
            Value::Object(members) => members.len(),
            _ => {
                *here = with(here);
                return;
            }
        };
        if len == 0 {
            return;
        }
        let i = dice.below(len as u64) as usize;
        here = match here {
            Value::Array(items) => &mut items[i],
            Value::Object(members) => members.values_mut().nth(i).expect("index within length"),
            _ => unreachable!("only containers have members"),
        };
    }
}

fn replacement(depth: u32) -> BoxedStrategy<Value> {
    prop_oneof![
        4 => json_value(4),
        1 => (1..=depth as usize).prop_map(nested_value),
        1 => (0usize..200_000).prop_map(|n| Value::String("x".repeat(n))),
        1 => (0usize..20_000).prop_map(|n| Value::Array(vec![Value::from(1); n])),
        1 => (0usize..5_000).prop_map(|n| {
            Value::Object((0..n).map(|i| (format!("k{i}"), Value::Null)).collect())
        }),
    ]
    .boxed()
}

/// An array nested `depth` levels, built without recursion.
pub fn nested_value(depth: usize) -> Value {
    let mut v = Value::Array(vec![]);
    for _ in 1..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// Replaces the value at a position chosen by `at` (a walk down from the root).
fn replace_at(root: &mut Value, at: u64, with: Value) {
    let mut dice = Dice::new(at);
    let mut here = root;
    loop {
        let len = match &*here {
            Value::Array(items) => items.len(),
            Value::Object(members) => members.len(),
            _ => 0,
        };
        if len == 0 || dice.one_in(3) {
            *here = with;
            return;
        }
        let i = dice.below(len as u64) as usize;
        here = match here {
            Value::Array(items) => &mut items[i],
            Value::Object(members) => members.values_mut().nth(i).expect("index within length"),
            _ => unreachable!("only containers have members"),
        };
    }
}

/// JSON5 text: values rendered with the syntax's every feature, nesting far past any limit
/// (open and never closed, or closed), and mutations of both.
pub fn json5_text() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        3 => (json_value(8), any::<u64>()).prop_map(|(v, seed)| render_json5(&v, seed).into_bytes()),
        1 => deep_text(),
        2 => (json_value(6), any::<u64>())
            .prop_map(|(v, seed)| render_json5(&v, seed).into_bytes())
            .prop_flat_map(|text| mutated(vec![text])),
    ]
    .boxed()
}

/// Text nested `1..100_000` deep with arrays, objects or both, closed or not, at the top or
/// inside a member.
pub fn deep_text() -> BoxedStrategy<Vec<u8>> {
    (1usize..100_000, 0u8..3, any::<bool>(), any::<bool>())
        .prop_map(|(depth, kind, closed, inside)| {
            let (open, close) = match kind {
                0 => ("[", "]"),
                1 => ("{\"a\":", "}"),
                _ => ("[{a:", "}]"),
            };
            let mut text = String::new();
            if inside {
                text.push_str("{\"id\": \"x\", \"x\": ");
            }
            text.push_str(&open.repeat(depth));
            text.push('1');
            if closed {
                text.push_str(&close.repeat(depth));
                if inside {
                    text.push('}');
                }
            }
            text.into_bytes()
        })
        .boxed()
}

/// Renders a value as JSON5, choosing for each part among the forms the syntax allows:
/// comments, trailing commas, unquoted and single-quoted keys and strings, hexadecimal and
/// signed numbers, `Infinity` and `NaN`, escapes and line continuations.
pub fn render_json5(value: &Value, seed: u64) -> String {
    let mut out = String::new();
    let mut dice = Dice::new(seed);
    // (value, what to write after it) on an explicit stack, so any depth renders.
    enum Step<'a> {
        Value(&'a Value),
        Text(String),
    }
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => out.push_str(&t),
            Step::Value(v) => {
                if dice.one_in(8) {
                    out.push_str(comment(&mut dice));
                }
                match v {
                    Value::Null => out.push_str("null"),
                    Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                    Value::Number(n) => out.push_str(&number(n, &mut dice)),
                    Value::String(s) => out.push_str(&string(s, &mut dice)),
                    Value::Array(items) => {
                        out.push('[');
                        let mut tail = vec![Step::Text(trailing(&mut dice, "]", items.is_empty()))];
                        for (i, item) in items.iter().enumerate().rev() {
                            tail.push(Step::Value(item));
                            if i > 0 {
                                tail.push(Step::Text(",".into()));
                            }
                        }
                        stack.extend(tail);
                    }
                    Value::Object(members) => {
                        out.push('{');
                        let mut tail =
                            vec![Step::Text(trailing(&mut dice, "}", members.is_empty()))];
                        let entries: Vec<_> = members.iter().collect();
                        for (i, (k, m)) in entries.into_iter().enumerate().rev() {
                            tail.push(Step::Value(m));
                            tail.push(Step::Text(format!("{}:", key_text(k, &mut dice))));
                            if i > 0 {
                                tail.push(Step::Text(",".into()));
                            }
                        }
                        stack.extend(tail);
                    }
                }
            }
        }
    }
    out
}

fn comment(dice: &mut Dice) -> &'static str {
    match dice.below(3) {
        0 => "// a comment\n",
        1 => "/* a [ comment { */",
        _ => "\n\t ",
    }
}

/// The closing bracket, after a trailing comma now and then (only after a member).
fn trailing(dice: &mut Dice, close: &str, empty: bool) -> String {
    if !empty && dice.one_in(3) {
        format!(",{close}")
    } else {
        close.to_string()
    }
}

fn number(n: &Number, dice: &mut Dice) -> String {
    if let Some(u) = n.as_u64() {
        match dice.below(4) {
            0 => format!("0x{u:X}"),
            1 => format!("+{u}"),
            _ => u.to_string(),
        }
    } else if let Some(f) = n.as_f64() {
        match dice.below(6) {
            0 => "Infinity".into(),
            1 => "-NaN".into(),
            2 => format!("{f:e}"),
            _ => n.to_string(),
        }
    } else {
        n.to_string()
    }
}

fn string(s: &str, dice: &mut Dice) -> String {
    let json = serde_json::to_string(s).expect("a string serializes");
    match dice.below(4) {
        // Single quotes: swap the delimiters and escape what needs it.
        0 => format!(
            "'{}'",
            json[1..json.len() - 1]
                .replace("\\\"", "\"")
                .replace('\'', "\\'")
        ),
        // A line continuation (after the opening quote: never inside an escape).
        1 => format!("\"\\\n{}", &json[1..]),
        _ => json,
    }
}

fn key_text(k: &str, dice: &mut Dice) -> String {
    let plain = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain && dice.one_in(2) {
        k.to_string()
    } else {
        string(k, dice)
    }
}

/// Byte-level mutations of `seeds`: each input is one seed with one to eight edits.
pub fn mutated(seeds: Vec<Vec<u8>>) -> BoxedStrategy<Vec<u8>> {
    assert!(!seeds.is_empty());
    let n = seeds.len();
    (0..n, prop::collection::vec(any::<(u8, u64, u64)>(), 1..9))
        .prop_map(move |(i, edits)| {
            let mut bytes = seeds[i].clone();
            for (op, a, b) in edits {
                mutate(&mut bytes, op, a, b, &seeds);
            }
            bytes
        })
        .boxed()
}

const TOKENS: &[&[u8]] = &[
    b"[",
    b"]",
    b"{",
    b"}",
    b"\"",
    b"'",
    b"\\",
    b"/*",
    b"//",
    b"\n",
    b",",
    b":",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"Infinity",
    b"-",
    b"1e999",
    b"0x",
    b"\\u0000",
    b"\\uD800",
    b"..",
    b"/",
];

fn mutate(bytes: &mut Vec<u8>, op: u8, a: u64, b: u64, seeds: &[Vec<u8>]) {
    let len = bytes.len();
    let at = if len == 0 {
        0
    } else {
        (a % (len as u64 + 1)) as usize
    };
    match op % 7 {
        // Flip bits of one byte.
        0 if len > 0 => {
            let i = at.min(len - 1);
            bytes[i] ^= (b as u8) | 1;
        }
        // Insert a token the syntax cares about.
        1 => {
            let t = TOKENS[(b % TOKENS.len() as u64) as usize];
            bytes.splice(at..at, t.iter().copied());
        }
        // Delete a range.
        2 if len > 0 => {
            let end = (at + (b % 64) as usize + 1).min(len);
            bytes.drain(at.min(end)..end);
        }
        // Repeat a range many times (deep nesting, huge strings).
        3 if len > 0 => {
            let start = at.min(len - 1);
            let end = (start + (b % 16) as usize + 1).min(len);
            let times = ((b >> 8) % 4096) as usize + 1;
            let piece = bytes[start..end].to_vec();
            let insert: Vec<u8> = piece
                .iter()
                .copied()
                .cycle()
                .take(piece.len() * times)
                .collect();
            bytes.splice(end..end, insert);
        }
        // Splice in part of another seed.
        4 => {
            let other = &seeds[(b % seeds.len() as u64) as usize];
            if !other.is_empty() {
                let from = ((b >> 16) % other.len() as u64) as usize;
                let to = (from + ((b >> 32) % 256) as usize).min(other.len());
                bytes.splice(at..at, other[from..to].iter().copied());
            }
        }
        // Cut the input short.
        5 => bytes.truncate(at),
        // A random byte.
        _ => bytes.insert(at, b as u8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn rendered_json5_reads_back_as_the_value() {
        let mut runner = TestRunner::deterministic();
        for _ in 0..300 {
            let v = json_value(6).new_tree(&mut runner).unwrap().current();
            let seed = runner.rng().next_u64();
            let text = render_json5(&v, seed);
            let back: Value = json5::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            // Non-finite numbers read back as null, as serde_json makes them; compare shapes.
            assert_eq!(shape(&back), shape(&v), "{text}");
        }
    }

    fn shape(v: &Value) -> String {
        match v {
            Value::Array(items) => format!(
                "[{}]",
                items.iter().map(shape).collect::<Vec<_>>().join(",")
            ),
            Value::Object(m) => format!(
                "{{{}}}",
                m.iter()
                    .map(|(k, v)| format!("{k:?}:{}", shape(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Value::String(s) => format!("{s:?}"),
            _ => "scalar".into(),
        }
    }

    #[test]
    fn nested_values_are_as_deep_as_asked() {
        let mut v = nested_value(5);
        let mut depth = 1;
        while let Value::Array(mut items) = v {
            match items.pop() {
                Some(inner) => {
                    depth += 1;
                    v = inner;
                }
                None => break,
            }
        }
        assert_eq!(depth, 5);
    }
}
