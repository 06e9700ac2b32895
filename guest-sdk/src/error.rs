//! Errors a guest sees: host refusals of cache queries, JSON that does not fit a type, and the
//! guest's own failures.

use std::fmt;

use crate::Resource;
use crate::bindings::kubewasm::controller::types::CacheError as WitCacheError;

/// Why the host refused a cache query (the WIT `cache-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The host's config does not grant this plugin access to the resource.
    NotGranted(String),
    /// The plugin did not subscribe to the resource in `init`.
    NotSubscribed(String),
    /// No index of that name on that resource.
    UnknownIndex(String),
    /// The request itself is malformed, e.g. a label selector that does not parse.
    Invalid(String),
}

impl From<WitCacheError> for CacheError {
    fn from(error: WitCacheError) -> Self {
        match error {
            WitCacheError::NotGranted(message) => CacheError::NotGranted(message),
            WitCacheError::NotSubscribed(message) => CacheError::NotSubscribed(message),
            WitCacheError::UnknownIndex(message) => CacheError::UnknownIndex(message),
            WitCacheError::Invalid(message) => CacheError::Invalid(message),
        }
    }
}

impl fmt::Display for CacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheError::NotGranted(message) => write!(f, "not granted: {message}"),
            CacheError::NotSubscribed(message) => write!(f, "not subscribed: {message}"),
            CacheError::UnknownIndex(message) => write!(f, "unknown index: {message}"),
            CacheError::Invalid(message) => write!(f, "invalid request: {message}"),
        }
    }
}

impl std::error::Error for CacheError {}

/// Everything that can go wrong in a guest. A handler returning `Err` makes the host log and
/// count the message; the next event is delivered as usual.
#[derive(Debug)]
pub enum Error {
    /// The host refused a cache query.
    Cache(CacheError),
    /// An object of `resource` did not deserialize into the requested Rust type.
    Decode {
        /// The resource the object belongs to.
        resource: Resource,
        /// serde's message: which field, which line and column, what was expected.
        source: serde_json::Error,
    },
    /// The guest runs outside a kubewasm host (a native build): there is no cache to query.
    NoHost,
    /// A failure reported by the guest's own code.
    Message(String),
}

impl Error {
    /// A guest failure with a message, e.g. `Error::msg(format!("bad config: {config}"))`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error::Message(message.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Cache(error) => write!(f, "cache query failed: {error}"),
            Error::Decode { resource, source } => write!(f, "cannot decode a {resource}: {source}"),
            Error::NoHost => f.write_str("not running inside a kubewasm host"),
            Error::Message(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cache(error) => Some(error),
            Error::Decode { source, .. } => Some(source),
            Error::NoHost | Error::Message(_) => None,
        }
    }
}

impl From<CacheError> for Error {
    fn from(error: CacheError) -> Self {
        Error::Cache(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_errors_keep_the_hosts_reason_in_their_message() {
        let error = Error::from(CacheError::from(WitCacheError::NotGranted(
            "v1/Secret".into(),
        )));
        assert_eq!(
            error.to_string(),
            "cache query failed: not granted: v1/Secret"
        );
        assert!(matches!(error, Error::Cache(CacheError::NotGranted(ref r)) if r == "v1/Secret"));
    }

    #[test]
    fn decode_errors_name_the_resource() {
        let source = serde_json::from_str::<u8>("\"x\"").unwrap_err();
        let error = Error::Decode {
            resource: Resource::new("apps", "v1", "Deployment"),
            source,
        };
        assert!(
            error
                .to_string()
                .starts_with("cannot decode a apps/v1 Deployment: ")
        );
    }
}
