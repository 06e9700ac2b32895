//! Why a write failed: the API server's metav1.Status, or the host's own refusal, as typed
//! errors (the 0.2 `client` import converts them into the contract's `api-error`).

use kube::core::Status;

use crate::client::refusals::Refusal;

/// One field the API server found invalid (metav1.StatusCause).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidCause {
    /// The field at fault, e.g. `spec.replicas`; may be empty.
    pub field: String,
    /// A machine-readable reason, e.g. `FieldValueInvalid`; may be empty.
    pub reason: String,
    pub message: String,
}

/// A failed write. Every refusal, by the host or the API server, is one of these: a guest gets
/// it as a value and never traps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// 409 Conflict: a precondition (resourceVersion, uid) failed or apply fields conflict.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 404: the object or its resource type does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 AlreadyExists: a create named an existing object.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 403: the API server refused the host's credentials.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 422, or a request the host could not even build (no name, bad JSON, ...).
    #[error("invalid: {message}")]
    Invalid {
        message: String,
        causes: Vec<InvalidCause>,
    },
    /// The plugin has no write grant for this resource and verb; nothing was sent.
    #[error("not granted: {0}")]
    NotGranted(String),
    /// 429, or the plugin's own write rate limit is exhausted.
    #[error("too many requests: {0}")]
    TooManyRequests(String),
    /// No answer within the per-call limit (or 504): the write may or may not have happened.
    #[error("timeout: {0}")]
    Timeout(String),
    /// Any other answer; `code` 0 when none arrived (connection refused, reset, ...).
    #[error("server error {code} {reason}: {message}")]
    Server {
        code: u16,
        reason: String,
        message: String,
    },
    /// The host refused the write without sending it, for `refusal`: the typed reason travels
    /// with the error to the metrics and the reconcile's result (a guest of contract 0.2 sees
    /// it as `not-granted`, `too-many-requests` or `invalid`).
    #[error("{}: {message}", refusal.as_str())]
    Refused { refusal: Refusal, message: String },
}

impl WriteError {
    /// The host's refusal, `refusal`, explained by `message`.
    pub(crate) fn refused(refusal: Refusal, message: impl Into<String>) -> Self {
        WriteError::Refused {
            refusal,
            message: message.into(),
        }
    }

    /// Why the host refused the write, when it did.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            WriteError::Refused { refusal, .. } => Some(*refusal),
            _ => None,
        }
    }

    /// A request the host refuses to send because it is malformed.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        WriteError::Invalid {
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// The label for the `code` of the write metrics: the HTTP code when the server answered,
    /// otherwise what stopped the call.
    pub fn code_label(&self) -> String {
        match self {
            WriteError::Conflict(_) | WriteError::AlreadyExists(_) => "409".into(),
            WriteError::NotFound(_) => "404".into(),
            WriteError::Forbidden(_) => "403".into(),
            WriteError::Invalid { causes, .. } if causes.is_empty() => "invalid".into(),
            WriteError::Invalid { .. } => "422".into(),
            WriteError::NotGranted(_) => "not-granted".into(),
            WriteError::TooManyRequests(_) => "429".into(),
            WriteError::Timeout(_) => "timeout".into(),
            WriteError::Server { code: 0, .. } => "unreachable".into(),
            WriteError::Server { code, .. } => code.to_string(),
            WriteError::Refused { refusal, .. } => refusal.as_str().into(),
        }
    }

    /// The error for an API server's answer.
    pub(crate) fn from_status(status: &Status) -> Self {
        let message = status.message.clone();
        match (status.code, status.reason.as_str()) {
            (409, "AlreadyExists") => WriteError::AlreadyExists(message),
            (409, _) => WriteError::Conflict(message),
            (404, _) => WriteError::NotFound(message),
            (403, _) => WriteError::Forbidden(message),
            (422, _) => WriteError::Invalid {
                message,
                causes: status
                    .details
                    .iter()
                    .flat_map(|d| &d.causes)
                    .map(|c| InvalidCause {
                        field: c.field.clone(),
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                    })
                    .collect(),
            },
            (429, _) => WriteError::TooManyRequests(message),
            (504, _) | (_, "Timeout") => WriteError::Timeout(message),
            (code, reason) => WriteError::Server {
                code,
                reason: reason.to_owned(),
                message,
            },
        }
    }
}

impl From<kube::Error> for WriteError {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => WriteError::from_status(&status),
            other => WriteError::Server {
                code: 0,
                reason: String::new(),
                message: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: serde_json::Value) -> Status {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn statuses_map_to_their_typed_errors() {
        let cases = [
            (409, "AlreadyExists", "already exists"),
            (409, "Conflict", "conflict"),
            (404, "NotFound", "not found"),
            (403, "Forbidden", "forbidden"),
            (429, "TooManyRequests", "too many requests"),
            (504, "Timeout", "timeout"),
            (500, "Timeout", "timeout"),
            (500, "InternalError", "server error 500"),
            (410, "Expired", "server error 410"),
        ];
        for (code, reason, shown) in cases {
            let error = WriteError::from_status(&status(json!({
                "kind": "Status", "status": "Failure", "code": code, "reason": reason,
                "message": "m",
            })));
            assert!(
                error.to_string().starts_with(shown),
                "{code} {reason}: {error}"
            );
        }
    }

    #[test]
    fn invalid_keeps_the_servers_causes() {
        let error = WriteError::from_status(&status(json!({
            "kind": "Status", "status": "Failure", "code": 422, "reason": "Invalid",
            "message": "Deployment.apps \"web\" is invalid",
            "details": {"name": "web", "kind": "Deployment", "causes": [
                {"reason": "FieldValueInvalid", "message": "must be >= 0",
                 "field": "spec.replicas"},
                {"reason": "FieldValueRequired", "message": "Required value",
                 "field": "spec.selector"},
            ]},
        })));
        let WriteError::Invalid { causes, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(causes.len(), 2);
        assert_eq!(causes[0].field, "spec.replicas");
        assert_eq!(causes[1].reason, "FieldValueRequired");
        assert_eq!(causes[0].message, "must be >= 0");
    }

    #[test]
    fn a_refusal_keeps_its_reason_and_its_label() {
        let cases = [
            (Refusal::NotGranted, "not-granted"),
            (Refusal::NotLeader, "not-leader"),
            (Refusal::RateLimited, "rate-limited"),
            (Refusal::Invalid, "invalid"),
        ];
        for (refusal, label) in cases {
            let error = WriteError::refused(refusal, "why");
            assert_eq!(error.refusal(), Some(refusal));
            assert_eq!(error.code_label(), label);
            assert_eq!(error.to_string(), format!("{label}: why"));
        }
        assert_eq!(WriteError::Timeout("t".into()).refusal(), None);
    }
}
