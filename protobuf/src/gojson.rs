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

fn push_valid(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escape: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\u{2028}' => Some("\\u2028"),
            '\u{2029}' => Some("\\u2029"),
            _ => None,
        };
        let needs_hex = (c as u32) < 0x20 || matches!(c, '<' | '>' | '&');
        if escape.is_none() && !needs_hex {
            continue;
        }
        out.push_str(&s[start..i]);
        match escape {
            Some(e) => out.push_str(e),
            None => {
                let b = c as u8;
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
        start = i + c.len_utf8();
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
