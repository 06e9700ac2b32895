//! Splits a label selector into tokens, remembering where each one starts.

/// One token of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token<'s> {
    /// A key, a value, or the words `in` / `notin` (the parser decides which).
    Word(&'s str),
    Comma,
    OpenParen,
    CloseParen,
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
    /// `!` directly before a key.
    Not,
    Greater,
    Less,
}

fn is_special(c: char) -> bool {
    matches!(c, ',' | '(' | ')' | '=' | '!' | '<' | '>') || c.is_whitespace()
}

/// Splits `input` into tokens paired with their byte offsets.
pub(crate) fn tokenize(input: &str) -> Vec<(Token<'_>, usize)> {
    let mut tokens = Vec::new();
    let mut chars = input.char_indices().peekable();
    while let Some(&(pos, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let single = match c {
            ',' => Some(Token::Comma),
            '(' => Some(Token::OpenParen),
            ')' => Some(Token::CloseParen),
            '<' => Some(Token::Less),
            '>' => Some(Token::Greater),
            _ => None,
        };
        if let Some(token) = single {
            chars.next();
            tokens.push((token, pos));
            continue;
        }
        match c {
            '=' => {
                chars.next();
                if chars.peek().is_some_and(|&(_, c)| c == '=') {
                    chars.next();
                }
                tokens.push((Token::Equals, pos));
            }
            '!' => {
                chars.next();
                if chars.peek().is_some_and(|&(_, c)| c == '=') {
                    chars.next();
                    tokens.push((Token::NotEquals, pos));
                } else {
                    tokens.push((Token::Not, pos));
                }
            }
            _ => {
                let mut end = input.len();
                while let Some(&(p, c)) = chars.peek() {
                    if is_special(c) {
                        end = p;
                        break;
                    }
                    chars.next();
                }
                tokens.push((Token::Word(&input[pos..end]), pos));
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_and_words_are_separated_without_spaces() {
        let kinds: Vec<_> = tokenize("a!=b,c==d,!e,f in (x,y)")
            .into_iter()
            .map(|(t, _)| t)
            .collect();
        assert_eq!(
            kinds,
            vec![
                Token::Word("a"),
                Token::NotEquals,
                Token::Word("b"),
                Token::Comma,
                Token::Word("c"),
                Token::Equals,
                Token::Word("d"),
                Token::Comma,
                Token::Not,
                Token::Word("e"),
                Token::Comma,
                Token::Word("f"),
                Token::Word("in"),
                Token::OpenParen,
                Token::Word("x"),
                Token::Comma,
                Token::Word("y"),
                Token::CloseParen,
            ]
        );
    }

    #[test]
    fn positions_are_byte_offsets() {
        let positions: Vec<_> = tokenize("  ab = c").iter().map(|(_, p)| *p).collect();
        assert_eq!(positions, vec![2, 5, 7]);
    }
}
