//! The API server's audit log, narrowed to reads of collections (LIST, WATCH) and writes: one
//! JSON line per request.

use std::path::Path;

use serde_json::Value;

/// Records every list and watch once when it arrives (`RequestReceived`: a watch may never
/// complete), every write once when it is answered (`ResponseComplete`, with its status code),
/// nothing else.
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [list, watch]
  omitStages: [ResponseComplete]
- level: Metadata
  verbs: [create, update, patch, delete]
  omitStages: [RequestReceived]
- level: None
";

/// One LIST or WATCH the API server received, or one write it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// `list`, `watch`, `create`, `update`, `patch` or `delete`.
    pub verb: String,
    /// The authenticated user, e.g. `admin` or `system:apiserver`.
    pub user: String,
    /// API group, "" for the core group.
    pub group: String,
    /// Lower-case plural, e.g. `configmaps`.
    pub resource: String,
    pub namespace: Option<String>,
    /// Path and query as the client sent them.
    pub request_uri: String,
    /// The client's User-Agent header; empty when it sent none.
    pub user_agent: String,
    /// The user the request was made as (`Impersonate-User`), when the server allowed it.
    pub impersonated_user: Option<String>,
    /// That user's groups (the server adds a service account's own).
    pub impersonated_groups: Vec<String>,
    /// The answer's status code (writes only: reads are recorded before they are answered).
    pub code: Option<u16>,
}

impl AuditEvent {
    /// Reads a `Metadata`-level audit event; `None` for lines that are not one.
    fn parse(line: &str) -> Option<AuditEvent> {
        let event: Value = serde_json::from_str(line).ok()?;
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let object = event.get("objectRef");
        let field = |name: &str| object.and_then(|o| o.get(name)).and_then(text);
        Some(AuditEvent {
            verb: text(event.get("verb")?)?,
            user: event
                .get("user")
                .and_then(|u| u.get("username"))
                .and_then(text)
                .unwrap_or_default(),
            group: field("apiGroup").unwrap_or_default(),
            resource: field("resource").unwrap_or_default(),
            namespace: field("namespace"),
            request_uri: event.get("requestURI").and_then(text).unwrap_or_default(),
            user_agent: event.get("userAgent").and_then(text).unwrap_or_default(),
            impersonated_user: event
                .get("impersonatedUser")
                .and_then(|u| u.get("username"))
                .and_then(text),
            impersonated_groups: event
                .get("impersonatedUser")
                .and_then(|u| u.get("groups"))
                .and_then(Value::as_array)
                .map(|groups| groups.iter().filter_map(text).collect())
                .unwrap_or_default(),
            code: event
                .get("responseStatus")
                .and_then(|s| s.get("code"))
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok()),
        })
    }
}

/// Every event in the log at `path` (written across API server restarts), oldest first. A line
/// still being written when the file is read is skipped.
pub fn read(path: &Path) -> std::io::Result<Vec<AuditEvent>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    Ok(text.lines().filter_map(AuditEvent::parse).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_line_names_the_user_resource_and_namespace() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"RequestReceived","requestURI":"/api/v1/namespaces/t1/configmaps?watch=1\u0026resourceVersion=209","verb":"watch","userAgent":"kubewasm/0.1.0","user":{"username":"admin","groups":["system:masters"]},"objectRef":{"resource":"configmaps","namespace":"t1","apiVersion":"v1"}}"#;
        let event = AuditEvent::parse(line).expect("parsed");
        assert_eq!(event.verb, "watch");
        assert_eq!(event.user, "admin");
        assert_eq!(event.group, "");
        assert_eq!(event.resource, "configmaps");
        assert_eq!(event.namespace.as_deref(), Some("t1"));
        assert!(event.request_uri.ends_with("resourceVersion=209"));
        assert_eq!(event.user_agent, "kubewasm/0.1.0");
        assert_eq!(event.impersonated_user, None);
        assert_eq!(event.code, None);
        assert_eq!(AuditEvent::parse("{\"verb\":"), None);
    }

    #[test]
    fn an_impersonated_write_names_both_users_and_its_status() {
        let line = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/t1/configmaps","verb":"create","user":{"username":"system:serviceaccount:ops:runner"},"impersonatedUser":{"username":"system:serviceaccount:plugins:plugin-mirror","groups":["system:serviceaccounts","system:serviceaccounts:plugins","system:authenticated"]},"userAgent":"kubewasm/0.1.0 plugin/mirror","objectRef":{"resource":"configmaps","namespace":"t1","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403}}"#;
        let event = AuditEvent::parse(line).expect("parsed");
        assert_eq!(event.verb, "create");
        assert_eq!(event.user, "system:serviceaccount:ops:runner");
        assert_eq!(
            event.impersonated_user.as_deref(),
            Some("system:serviceaccount:plugins:plugin-mirror")
        );
        assert!(
            event
                .impersonated_groups
                .contains(&"system:serviceaccounts:plugins".to_owned())
        );
        assert_eq!(event.code, Some(403));
    }
}
