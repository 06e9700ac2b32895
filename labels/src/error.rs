//! The error returned when a selector string cannot be parsed.

use std::fmt;

/// A selector that could not be parsed: what was wrong and at which byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    /// The selector text as given.
    pub input: String,
    /// Byte offset in `input` where the problem was found.
    pub position: usize,
    /// What was wrong, e.g. "expected a value after '='".
    pub message: String,
}

impl ParseError {
    pub(crate) fn new(input: &str, position: usize, message: impl Into<String>) -> ParseError {
        ParseError {
            input: input.to_owned(),
            position,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid selector {:?} at position {}: {}",
            self.input, self.position, self.message
        )
    }
}
