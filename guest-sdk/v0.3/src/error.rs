//! Why `init`, `declare` or a review failed ([`Error`]): a message for the host, which answers
//! the review as the webhook's failure policy says.

use std::fmt;

/// Why a call failed: a message for the host's log. A failed review is answered by the
/// webhook's failure policy (`fail`: denied, naming the plugin; `ignore`: allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Error(error.to_string())
    }
}
