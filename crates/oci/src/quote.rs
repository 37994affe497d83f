//! Quoting what an image, a registry or a signature said, in a message: at most
//! [`QUOTED_BYTES`] of it, and how long it was. A refusal goes into a Plugin's status and into
//! Events, so it stays a few lines whatever the input it quotes (a media type, a label, a
//! path, a parser's own message) holds.

/// The most bytes of one input a message quotes.
pub const QUOTED_BYTES: usize = 256;

/// `text` when it is short, else its first [`QUOTED_BYTES`] and its length.
pub fn shown(text: &str) -> String {
    if text.len() <= QUOTED_BYTES {
        return text.to_string();
    }
    let mut end = QUOTED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// [`shown`] for bytes, read as UTF-8 (what is not, replaced).
pub fn shown_bytes(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(QUOTED_BYTES)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < bytes.len() {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_quoted_whole_and_long_text_by_its_start() {
        assert_eq!(shown("application/x"), "application/x");
        let long = "é".repeat(QUOTED_BYTES);
        let quoted = shown(&long);
        assert!(
            quoted.starts_with(&"é".repeat(QUOTED_BYTES / 2)),
            "{quoted}"
        );
        assert!(
            quoted.ends_with(&format!("… ({} bytes)", 2 * QUOTED_BYTES)),
            "{quoted}"
        );
        assert_eq!(shown_bytes(b"a\xffb"), "a\u{fffd}b");
        assert!(shown_bytes(&[b'a'; 5000]).ends_with("… (5000 bytes)"));
    }
}
