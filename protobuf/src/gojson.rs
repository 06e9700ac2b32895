//! JSON text as Go's `encoding/json` writes it (the API server's encoder): its string escapes
//! (HTML characters, U+2028/U+2029, invalid UTF-8) and its compaction of raw JSON values.

use crate::error::{Error, Result};

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` as a JSON string, escaped as `encoding/json` does with HTML escaping on:
/// `<`, `>` and `&` as `\u003c`..., control characters as `\n`, `\b`... or `\u00XX`, U+2028 and
/// U+2029 escaped, and every byte of invalid UTF-8 as `\ufffd`.
pub fn push_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    let mut rest = bytes;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, false),
            Err(e) => (
                // SAFETY-free: `valid_up_to` bytes are UTF-8 by definition.
                std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
                true,
            ),
        };
        push_valid(out, valid);
        rest = &rest[valid.len()..];
        if bad {
            out.push_str("\\ufffd");
            rest = &rest[1..];
        }
    }
    out.push('"');
}

/// The bytes [`push_valid`] stops at: control characters, `"`, `\\`, `<`, `>`, `&`, and 0xE2
/// (the first byte of U+2028 and U+2029).
const SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'<' as usize] = true;
    table[b'>' as usize] = true;
    table[b'&' as usize] = true;
    table[0xE2] = true;
    table
};

/// Whether any of the eight bytes of `word` is one [`SPECIAL`] marks. Runs of ordinary bytes
/// (most of a ConfigMap's values) are skipped eight at a time: this copy was a third of a
/// protobuf LIST's client instructions when it went byte by byte (BENCHMARKS.md, "gzip's
/// memory").
fn has_special(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of a byte of the result is set where `x` has a byte below `n` (n <= 0x80);
    // bytes past the first such byte may be flagged wrongly, which leaves "any" exact.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let equal = |b: u8| below(word ^ (ONES * u64::from(b)), 1);
    (below(word, 0x20)
        | equal(b'"')
        | equal(b'\\')
        | equal(b'<')
        | equal(b'>')
        | equal(b'&')
        | equal(0xE2))
        != 0
}

fn push_valid(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        while let Some(word) = bytes.get(i..i + 8) {
            let Ok(word) = <[u8; 8]>::try_from(word) else {
                break;
            };
            if has_special(u64::from_le_bytes(word)) {
                break;
            }
            i += 8;
        }
        let Some(&b) = bytes.get(i) else {
            break;
        };
        if !SPECIAL[usize::from(b)] {
            i += 1;
            continue;
        }
        let (escape, len): (Option<&str>, usize) = match b {
            b'"' => (Some("\\\""), 1),
            b'\\' => (Some("\\\\"), 1),
            b'\n' => (Some("\\n"), 1),
            b'\r' => (Some("\\r"), 1),
            b'\t' => (Some("\\t"), 1),
            0x08 => (Some("\\b"), 1),
            0x0c => (Some("\\f"), 1),
            0xE2 => match bytes.get(i + 1..i + 3) {
                Some([0x80, 0xA8]) => (Some("\\u2028"), 3),
                Some([0x80, 0xA9]) => (Some("\\u2029"), 3),
                // Another character starting with 0xE2: copied as it is.
                _ => {
                    i += 1;
                    continue;
                }
            },
            _ => (None, 1),
        };
        out.push_str(&s[start..i]);
        match escape {
            Some(e) => out.push_str(e),
            None => {
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
        i += len;
        start = i;
    }
    out.push_str(&s[start..]);
}

/// Appends a raw JSON value (a `FieldsV1`, a `RawExtension`) as `encoding/json` embeds what a
/// `MarshalJSON` returned: validated, whitespace outside strings removed, `<`, `>`, `&`, U+2028
/// and U+2029 escaped.
pub fn push_raw(out: &mut String, raw: &[u8]) -> Result<()> {
    serde_json::from_slice::<serde::de::IgnoredAny>(raw)
        .map_err(|e| Error::Value(format!("an embedded JSON value is not JSON: {e}")))?;
    let text = std::str::from_utf8(raw)
        .map_err(|_| Error::Value("an embedded JSON value is not UTF-8".into()))?;
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        } else if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(bytes: &[u8]) -> String {
        let mut out = String::new();
        push_string(&mut out, bytes);
        out
    }

    #[test]
    fn strings_are_escaped_as_go_does() {
        assert_eq!(string(b"plain"), r#""plain""#);
        assert_eq!(
            string("a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}<>&\u{7f}é\u{2028}\u{2029}".as_bytes()),
            r#""a\"b\\c\n\r\t\b\f\u0001\u001f\u003c\u003e\u0026"#.to_owned()
                + "\u{7f}é"
                + r#"\u2028\u2029""#
        );
        assert_eq!(string(b"a\xffb\xe2\x82c"), r#""a\ufffdb\ufffd\ufffdc""#);
        assert_eq!(string(b""), r#""""#);
    }

    /// The eight-byte test flags a word exactly when a byte of it is special, whatever its
    /// place and whatever surrounds it.
    #[test]
    fn the_word_test_agrees_with_the_byte_table() {
        for fill in [b'a', 0x7f, 0x80, 0xE1, 0xE3, 0xff, 0x20, b'!'] {
            for b in 0..=255u8 {
                for place in 0..8 {
                    let mut word = [fill; 8];
                    word[place] = b;
                    let special = word.iter().any(|&x| SPECIAL[usize::from(x)]);
                    assert_eq!(
                        has_special(u64::from_le_bytes(word)),
                        special,
                        "{word:02x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn escaped_strings_read_back_as_the_original() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let alphabet: Vec<char> = "ab\"\\<>&\n\u{1}\u{7f}é€\u{2028}\u{2029}\u{2027}😀 "
            .chars()
            .collect();
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..2000 {
            let n = rng.random_range(0..24);
            let text: String = (0..n)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            let json = string(text.as_bytes());
            assert_eq!(
                serde_json::from_str::<String>(&json).unwrap(),
                text,
                "{json}"
            );
            assert!(
                !json.contains(['<', '>', '&', '\u{2028}', '\u{2029}', '\n']),
                "{json}"
            );
        }
    }

    #[test]
    fn raw_json_is_compacted_and_html_escaped() {
        let mut out = String::new();
        push_raw(
            &mut out,
            b" {\"f:a\" : {\"k:{\\\"x\\\": 1}\": {}, \"<&>\":[1, 2]}}\n",
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"f:a":{"k:{\"x\": 1}":{},"\u003c\u0026\u003e":[1,2]}}"#
        );
        assert!(push_raw(&mut String::new(), b"{").is_err());
    }
}
