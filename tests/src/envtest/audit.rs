//! The API server's audit log, narrowed to LISTs and WATCHes: one JSON line per request.

use std::path::Path;

use serde_json::Value;

/// Records every list and watch once (at `RequestReceived`), nothing else.
pub const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  verbs: [list, watch]
- level: None
";

/// One LIST or WATCH the API server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEvent {
    /// `list` or `watch`.
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
        assert_eq!(AuditEvent::parse("{\"verb\":"), None);
    }
}
