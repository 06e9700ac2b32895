//! Errors as Rust enums: why a write failed ([`ApiError`]) and why a reconcile failed
//! ([`Error`]).

use std::fmt;

use crate::bindings::kubewasm::controller0_2_0::types as wit;

/// One field the API server found invalid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCause {
    pub field: String,
    pub reason: String,
    pub message: String,
}

/// Why a write failed; see the contract's `api-error` for when each happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// A resourceVersion / uid precondition failed, or apply fields conflict: read again.
    Conflict(String),
    NotFound(String),
    AlreadyExists(String),
    Forbidden(String),
    Invalid {
        message: String,
        causes: Vec<InvalidCause>,
    },
    /// The host's config grants this plugin no such write.
    NotGranted(String),
    /// Slow down (the server's 429 or the plugin's own write limit).
    TooManyRequests(String),
    Timeout(String),
    Server {
        code: u16,
        reason: String,
        message: String,
    },
    /// The object could not be turned into JSON, or the answer back into the type.
    Json(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Conflict(m) => write!(f, "conflict: {m}"),
            ApiError::NotFound(m) => write!(f, "not found: {m}"),
            ApiError::AlreadyExists(m) => write!(f, "already exists: {m}"),
            ApiError::Forbidden(m) => write!(f, "forbidden: {m}"),
            ApiError::Invalid { message, .. } => write!(f, "invalid: {message}"),
            ApiError::NotGranted(m) => write!(f, "not granted: {m}"),
            ApiError::TooManyRequests(m) => write!(f, "too many requests: {m}"),
            ApiError::Timeout(m) => write!(f, "timeout: {m}"),
            ApiError::Server {
                code,
                reason,
                message,
            } => write!(f, "server error {code} {reason}: {message}"),
            ApiError::Json(m) => write!(f, "JSON: {m}"),
        }
    }
}

impl std::error::Error for ApiError {}

impl From<wit::ApiError> for ApiError {
    fn from(error: wit::ApiError) -> Self {
        match error {
            wit::ApiError::Conflict(m) => ApiError::Conflict(m),
            wit::ApiError::NotFound(m) => ApiError::NotFound(m),
            wit::ApiError::AlreadyExists(m) => ApiError::AlreadyExists(m),
            wit::ApiError::Forbidden(m) => ApiError::Forbidden(m),
            wit::ApiError::Invalid(details) => ApiError::Invalid {
                message: details.message,
                causes: details
                    .causes
                    .into_iter()
                    .map(|c| InvalidCause {
                        field: c.field,
                        reason: c.reason,
                        message: c.message,
                    })
                    .collect(),
            },
            wit::ApiError::NotGranted(m) => ApiError::NotGranted(m),
            wit::ApiError::TooManyRequests(m) => ApiError::TooManyRequests(m),
            wit::ApiError::Timeout(m) => ApiError::Timeout(m),
            wit::ApiError::ServerError(e) => ApiError::Server {
                code: e.code,
                reason: e.reason,
                message: e.message,
            },
        }
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(error: serde_json::Error) -> Self {
        ApiError::Json(error.to_string())
    }
}

/// Why `init`, a handler or `reconcile` failed: a message for the host's log. A failed
/// reconcile is retried with backoff.
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
