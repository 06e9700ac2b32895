//! Guest strings made safe for a log line: every character that could end the line, start a
//! forged one or drive a terminal is written as a visible escape. Every string a guest hands
//! the host (log messages, handler and reconcile error reasons, queue keys, init failures,
//! admission failures) goes through [`escaped`] before it reaches `tracing`, so that one
//! record stays one line and shows what the guest sent.

use std::borrow::Cow;
use std::fmt;

/// Whether `c` is written as an escape: control characters (C0 with `\n`, `\r`, `\t` and ESC,
/// DEL, C1), the Unicode line and paragraph separators (which some viewers break lines at) and
/// the bidirectional overrides and isolates (which make a line read other than it is).
pub(crate) fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with each character of [`needs_escape`] written as Rust writes it in a string literal
/// (`\n`, `\r`, `\t`, `\u{1b}`, ...); `s` itself, not copied, when it has none. A backslash
/// is left as it is: text that looks like an escape is text, and it cannot end a line.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Displays a guest string [`escaped`], for `tracing` fields (`key = %Escaped(&key)`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Escaped<'a>(pub(crate) &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_escape_and_control_characters_come_out_visible() {
        assert_eq!(
            escaped("a\nb\r\nc\td\u{1b}[31me\0\u{7f}\u{85}"),
            r"a\nb\r\nc\td\u{1b}[31me\u{0}\u{7f}\u{85}"
        );
        assert_eq!(
            escaped("x\u{2028}y\u{2029}z\u{202e}w\u{2066}"),
            r"x\u{2028}y\u{2029}z\u{202e}w\u{2066}"
        );
        assert_eq!(Escaped("ns/a\nb").to_string(), r"ns/a\nb");
    }

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        for plain in ["", "reconcile failed: ümlaut 日本 \\n", "a\\u{1b}b"] {
            assert!(
                matches!(escaped(plain), Cow::Borrowed(s) if s == plain),
                "{plain}"
            );
        }
    }
}
