//! API errors as `metav1.Status`: the code, reason and message every Kubernetes client decodes.

use std::fmt;

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;

/// A failed request, answered as a `metav1.Status` object with HTTP status `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// HTTP status code (400, 404, 409, 410, 422, 429, 500, ...).
    pub code: u16,
    /// The machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, `Expired`, ...).
    pub reason: String,
    /// A human-readable description.
    pub message: String,
    /// The fields at fault of a 422 Invalid (`details.causes`); empty otherwise.
    pub causes: Vec<StatusCause>,
}

/// One field at fault (metav1.StatusCause).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: String,
    pub message: String,
    /// The field's path, e.g. `metadata.name`.
    pub field: String,
}

impl Status {
    /// A status with an explicit code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Status {
        Status {
            code,
            reason: reason.to_owned(),
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// 400: the request itself is malformed.
    pub fn bad_request(message: impl Into<String>) -> Status {
        Status::new(400, "BadRequest", message)
    }

    /// 404 for a named object, worded as the API server does.
    pub fn not_found(resource: &str, name: &str) -> Status {
        Status::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
    }

    /// 404 for a path that names no known resource.
    pub fn unknown_resource() -> Status {
        Status::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405: the resource does not support this verb.
    pub fn method_not_allowed(message: impl Into<String>) -> Status {
        Status::new(405, "MethodNotAllowed", message)
    }

    /// 409: an object with this name exists already.
    pub fn already_exists(resource: &str, name: &str) -> Status {
        Status::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
    }

    /// 409: the update was based on a stale resourceVersion.
    pub fn conflict(resource: &str, name: &str) -> Status {
        Status::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
        )
    }

    /// 410: the requested resourceVersion has been compacted away.
    pub fn expired(message: impl Into<String>) -> Status {
        Status::new(410, "Expired", message)
    }

    /// 422: the object is well-formed JSON but not a valid object.
    pub fn invalid(message: impl Into<String>) -> Status {
        Status::new(422, "Invalid", message)
    }

    /// 422 about one field of the object `kind` `name`, worded as the API server does, with
    /// the field as the cause (`reason` is e.g. `FieldValueInvalid`).
    pub fn invalid_field(
        kind: &str,
        name: &str,
        field: &str,
        reason: &str,
        detail: &str,
    ) -> Status {
        let cause = StatusCause {
            reason: reason.to_owned(),
            message: detail.to_owned(),
            field: field.to_owned(),
        };
        Status::invalid_causes(kind, name, vec![cause])
    }

    /// 422 about the fields `causes` name of the object `kind` (qualified by its group, as
    /// `Lease.coordination.k8s.io`) `name`, worded as the API server words a list of field
    /// errors.
    pub(crate) fn invalid_causes(kind: &str, name: &str, causes: Vec<StatusCause>) -> Status {
        let errors: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let errors = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let name = serde_json::Value::String(name.to_owned());
        let mut status = Status::invalid(format!("{kind} {name} is invalid: {errors}"));
        status.causes = causes;
        status
    }

    /// 413: the request body is over the API server's limit.
    pub fn entity_too_large(limit: usize) -> Status {
        Status::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415: a patch or body type this server does not understand.
    pub fn unsupported_media_type(message: impl Into<String>) -> Status {
        Status::new(415, "UnsupportedMediaType", message)
    }

    /// 500: something failed inside the server.
    pub fn internal(message: impl Into<String>) -> Status {
        Status::new(500, "InternalError", message)
    }

    /// The status for an injected fault with this HTTP code.
    pub fn injected(code: u16) -> Status {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Status::new(code, reason, format!("injected fault: HTTP {code}"))
    }

    /// The `metav1.Status` object.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        // An error the API server has no reason for (a storage failure) carries none.
        if !self.reason.is_empty() {
            value["reason"] = json!(self.reason);
        }
        if !self.causes.is_empty() {
            let causes: Vec<_> = self
                .causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            value["details"] = json!({"causes": causes});
        }
        value
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for Status {}

impl IntoResponse for Status {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = Bytes::from(self.to_json().to_string());
        let mut response = (code, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if self.code == 429 {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_field_is_named_in_the_message_and_as_the_cause() {
        let status = Status::invalid_field("Pod", "x", "spec.nodeName", "FieldValueInvalid", "no");
        assert_eq!(status.message, "Pod \"x\" is invalid: spec.nodeName: no");
        let json = status.to_json();
        assert_eq!(json["code"], 422);
        assert_eq!(json["details"]["causes"][0]["field"], "spec.nodeName");
        assert_eq!(json["details"]["causes"][0]["reason"], "FieldValueInvalid");
        assert!(
            Status::not_found("pods", "x")
                .to_json()
                .get("details")
                .is_none()
        );
    }
}
