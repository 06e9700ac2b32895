//! `admission.k8s.io/v1` AdmissionReview: the request as the API server sends it (hostile
//! input: parsed into checked types, never trusted) and the response the host sends back,
//! with the JSONPatch of a mutation computed by the host.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::admission::declaration::Operation;

/// The only AdmissionReview version the host answers.
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// The longest review body the host reads: an object and its old version, each at most the
/// API server's 1.5 MiB, and the rest of the review.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Why a request body is not a review the host answers (answered 400, never shown to a guest).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReviewError {
    #[error("the body is not an AdmissionReview: {0}")]
    Malformed(String),
    #[error("apiVersion {0:?} is not served: only admission.k8s.io/v1")]
    Version(String),
    #[error("the review has no request")]
    NoRequest,
    #[error("request.{field} is invalid: {reason}")]
    Field { field: &'static str, reason: String },
}

/// A resource type by group, version and kind.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// A resource by group, version and plural name.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub resource: String,
}

/// authentication.k8s.io/v1 UserInfo.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// One AdmissionRequest, checked.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    pub operation: Operation,
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub object: Option<Box<RawValue>>,
    #[serde(default)]
    pub old_object: Option<Box<RawValue>>,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl Request {
    /// The object's JSON, if the request has one (not for a delete).
    pub fn object_json(&self) -> Option<&str> {
        self.object.as_deref().map(RawValue::get)
    }

    /// The stored object's JSON, if any (not for a create).
    pub fn old_object_json(&self) -> Option<&str> {
        self.old_object.as_deref().map(RawValue::get)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: String,
    kind: String,
    /// Parsed once the version is known to be one the host answers.
    request: Option<Box<RawValue>>,
}

/// The longest name, namespace or uid a request may carry.
const MAX_NAME: usize = 253;
/// The most groups or extra values in a request's user info.
const MAX_USER_LIST: usize = 256;

/// Parses and checks a review body.
pub fn parse(body: &[u8]) -> Result<Request, ReviewError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if review.api_version != API_VERSION {
        return Err(ReviewError::Version(cut(&review.api_version, 64).into()));
    }
    if review.kind != "AdmissionReview" {
        return Err(ReviewError::Malformed(format!(
            "kind {:?}, not AdmissionReview",
            cut(&review.kind, 64)
        )));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let mut request: Request = serde_json::from_str(request.get())
        .map_err(|e| ReviewError::Malformed(format!("request: {e}")))?;
    let field = |field, reason: String| ReviewError::Field { field, reason };
    check_text("uid", &request.uid, false)?;
    for (name, value) in [
        ("namespace", &mut request.namespace),
        ("name", &mut request.name),
        ("subResource", &mut request.sub_resource),
    ] {
        // The API server sends "" for "none".
        if value.as_deref() == Some("") {
            *value = None;
        }
        if let Some(v) = value {
            check_text(name, v, false)?;
        }
    }
    for (name, value) in [
        ("kind.group", &request.kind.group),
        ("kind.version", &request.kind.version),
        ("kind.kind", &request.kind.kind),
        ("resource.group", &request.resource.group),
        ("resource.version", &request.resource.version),
        ("resource.resource", &request.resource.resource),
    ] {
        check_text(name, value, name.ends_with(".group"))?;
    }
    if request.user_info.groups.len() > MAX_USER_LIST
        || request.user_info.extra.len() > MAX_USER_LIST
        || request
            .user_info
            .extra
            .values()
            .any(|v| v.len() > MAX_USER_LIST)
    {
        return Err(field(
            "userInfo",
            format!("more than {MAX_USER_LIST} groups or extra values"),
        ));
    }
    for (name, object) in [
        ("object", &request.object),
        ("oldObject", &request.old_object),
    ] {
        if let Some(o) = object
            && !o.get().trim_start().starts_with('{')
        {
            return Err(field(name, "not a JSON object".into()));
        }
    }
    if matches!(request.operation, Operation::Create | Operation::Update)
        && request.object.is_none()
    {
        return Err(field("object", "missing for a create or update".into()));
    }
    Ok(request)
}

fn check_text(field: &'static str, value: &str, may_be_empty: bool) -> Result<(), ReviewError> {
    let bad = |reason: String| Err(ReviewError::Field { field, reason });
    if value.is_empty() && !may_be_empty {
        return bad("empty".into());
    }
    if value.len() > MAX_NAME {
        return bad(format!("{} bytes, more than {MAX_NAME}", value.len()));
    }
    if value.chars().any(char::is_control) {
        return bad("holds control characters".into());
    }
    Ok(())
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The most warnings a response carries, and the longest of each.
pub const MAX_WARNINGS: usize = 16;
pub const MAX_WARNING_BYTES: usize = 256;
/// The longest denial message.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// What the host answers for one review.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// The HTTP code of a denial (403 unless the policy said otherwise).
    pub code: u16,
    pub message: String,
    pub warnings: Vec<String>,
    /// For an allowed mutation that changed something: the RFC 6902 patch.
    pub patch: Option<json_patch::Patch>,
}

impl Answer {
    /// An allowed answer with nothing to say.
    pub fn allow() -> Answer {
        Answer {
            allowed: true,
            code: 200,
            message: String::new(),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// A denial with `code` (0: 403) and `message`.
    pub fn deny(code: u16, message: &str) -> Answer {
        Answer {
            allowed: false,
            code: if (400..600).contains(&code) {
                code
            } else {
                403
            },
            message: cut(message, MAX_MESSAGE_BYTES).to_owned(),
            warnings: Vec::new(),
            patch: None,
        }
    }

    /// A guest's verdict, its strings bounded.
    pub fn from_verdict(allowed: bool, code: u16, message: &str, warnings: Vec<String>) -> Answer {
        let mut answer = if allowed {
            Answer::allow()
        } else {
            Answer::deny(code, message)
        };
        answer.warnings = warnings
            .iter()
            .take(MAX_WARNINGS)
            .map(|w| cut(w, MAX_WARNING_BYTES).to_owned())
            .collect();
        answer
    }

    /// The AdmissionReview response for the review `uid`.
    pub fn to_review(&self, uid: &str) -> serde_json::Value {
        let mut response = serde_json::json!({
            "uid": uid,
            "allowed": self.allowed,
        });
        if !self.allowed {
            response["status"] = serde_json::json!({
                "code": self.code,
                "message": self.message,
                "status": "Failure",
            });
        }
        if !self.warnings.is_empty() {
            response["warnings"] = serde_json::json!(self.warnings);
        }
        if let Some(patch) = &self.patch
            && self.allowed
        {
            let bytes = serde_json::to_vec(patch).unwrap_or_default();
            response["patchType"] = "JSONPatch".into();
            response["patch"] = base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into();
        }
        serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "AdmissionReview",
            "response": response,
        })
    }
}

/// How much larger than the request's object a mutated object may be: room for the labels,
/// annotations, defaults and sidecars a mutation adds, and a bound on the answer the host
/// computes and sends (a 11 MB mutation would otherwise be diffed and sent whole).
pub const MAX_MUTATION_GROWTH: usize = 256 << 10;

/// The fields a mutation may not change: they say which object the review is about (the API
/// server stores the patched object under the request's name and namespace), and the uid is
/// the server's.
const IDENTITY_FIELDS: [(&str, &str); 5] = [
    ("", "apiVersion"),
    ("", "kind"),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
];

/// The patch from `original` to `mutated` (`None` when nothing changed); an error when
/// `mutated` is not a JSON object, is more than [`MAX_MUTATION_GROWTH`] larger than
/// `original`, or changes the object's apiVersion, kind, name, namespace or uid.
pub fn patch_between(original: &str, mutated: &str) -> Result<Option<json_patch::Patch>, String> {
    let limit = original.len().saturating_add(MAX_MUTATION_GROWTH);
    if mutated.len() > limit {
        return Err(format!(
            "the mutated object is {} bytes, more than the request's object ({} bytes) plus {} KiB",
            mutated.len(),
            original.len(),
            MAX_MUTATION_GROWTH >> 10
        ));
    }
    let before: serde_json::Value =
        serde_json::from_str(original).map_err(|e| format!("the request's object: {e}"))?;
    let after: serde_json::Value = serde_json::from_str(mutated)
        .map_err(|e| format!("the mutated object is not JSON: {e}"))?;
    if !after.is_object() {
        return Err("the mutated object is not a JSON object".into());
    }
    for (parent, field) in IDENTITY_FIELDS {
        let get = |v: &serde_json::Value| {
            let v = if parent.is_empty() {
                Some(v)
            } else {
                v.get(parent)
            };
            v.and_then(|v| v.get(field)).cloned()
        };
        if get(&before) != get(&after) {
            let path = if parent.is_empty() {
                field.to_owned()
            } else {
                format!("{parent}.{field}")
            };
            return Err(format!("the mutated object changes {path}"));
        }
    }
    let patch = json_patch::diff(&before, &after);
    Ok((!patch.0.is_empty()).then_some(patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(request: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": API_VERSION,
            "kind": "AdmissionReview",
            "request": request,
        }))
        .unwrap()
    }

    fn create() -> serde_json::Value {
        serde_json::json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "",
            "namespace": "default",
            "name": "p",
            "operation": "CREATE",
            "userInfo": {"username": "admin", "groups": ["system:masters"]},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
            "oldObject": null,
            "dryRun": false,
        })
    }

    #[test]
    fn a_create_review_parses() {
        let r = parse(&review(create())).unwrap();
        assert_eq!(r.operation, Operation::Create);
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.sub_resource, None, "\"\" is no subresource");
        assert!(r.old_object_json().is_none());
        assert!(r.object_json().unwrap().contains("\"Pod\""));
        assert_eq!(r.user_info.groups, ["system:masters"]);
    }

    #[test]
    fn hostile_bodies_are_refused_with_the_field_named() {
        assert!(matches!(
            parse(b"{not json").unwrap_err(),
            ReviewError::Malformed(_)
        ));
        let mut v1beta1 = serde_json::from_slice::<serde_json::Value>(&review(create())).unwrap();
        v1beta1["apiVersion"] = "admission.k8s.io/v1beta1".into();
        assert!(matches!(
            parse(&serde_json::to_vec(&v1beta1).unwrap()).unwrap_err(),
            ReviewError::Version(_)
        ));
        let with = |field: &str, value: serde_json::Value| {
            let mut r = create();
            r[field] = value;
            parse(&review(r)).unwrap_err()
        };
        assert!(matches!(
            with("uid", "".into()),
            ReviewError::Field { field: "uid", .. }
        ));
        assert!(matches!(
            with("name", "a\u{0}b".into()),
            ReviewError::Field { field: "name", .. }
        ));
        assert!(matches!(
            with("namespace", "n".repeat(300).into()),
            ReviewError::Field {
                field: "namespace",
                ..
            }
        ));
        assert!(matches!(
            with("object", serde_json::json!([1, 2])),
            ReviewError::Field {
                field: "object",
                ..
            }
        ));
        assert!(matches!(
            with("object", serde_json::Value::Null),
            ReviewError::Field {
                field: "object",
                ..
            }
        ));
        assert!(matches!(
            with("operation", "EXPLODE".into()),
            ReviewError::Malformed(_)
        ));
        assert_eq!(
            parse(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#).unwrap_err(),
            ReviewError::NoRequest
        );
    }

    #[test]
    fn a_mutation_becomes_a_json_patch_the_original_takes_to_the_mutated() {
        let original = r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"a"}]}}"#;
        let mutated = r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"a","resources":{"requests":{"cpu":"100m"}}}]}}"#;
        let patch = patch_between(original, mutated).unwrap().unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(original).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(
            doc,
            serde_json::from_str::<serde_json::Value>(mutated).unwrap()
        );
        assert_eq!(patch_between(original, original).unwrap(), None);
        assert!(patch_between(original, "[1]").is_err());
        assert!(patch_between(original, r#"{"apiVersion":"v1","kind":"Secret"}"#).is_err());
        assert!(patch_between(original, "{").is_err());
    }

    #[test]
    fn a_mutation_may_not_rename_the_object_nor_grow_it_past_the_margin() {
        let original = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","uid":"u"}}"#;
        let with = |metadata: &str| {
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{metadata}}}"#)
        };
        for (metadata, field) in [
            (r#"{"name":"b","namespace":"n","uid":"u"}"#, "metadata.name"),
            (
                r#"{"name":"a","namespace":"m","uid":"u"}"#,
                "metadata.namespace",
            ),
            (r#"{"name":"a","uid":"u"}"#, "metadata.namespace"),
            (r#"{"name":"a","namespace":"n","uid":"v"}"#, "metadata.uid"),
        ] {
            let e = patch_between(original, &with(metadata)).unwrap_err();
            assert_eq!(e, format!("the mutated object changes {field}"));
        }
        let labelled = with(r#"{"name":"a","namespace":"n","uid":"u","labels":{"x":"y"}}"#);
        assert!(patch_between(original, &labelled).unwrap().is_some());
        let huge = with(&format!(
            r#"{{"name":"a","namespace":"n","uid":"u","labels":{{"x":"{}"}}}}"#,
            "y".repeat(MAX_MUTATION_GROWTH)
        ));
        let e = patch_between(original, &huge).unwrap_err();
        assert!(e.contains("plus 256 KiB"), "{e}");
    }

    #[test]
    fn the_response_carries_the_uid_the_status_and_the_patch() {
        let denied = Answer::deny(0, "host taken").to_review("u1");
        assert_eq!(denied["response"]["uid"], "u1");
        assert_eq!(denied["response"]["allowed"], false);
        assert_eq!(denied["response"]["status"]["code"], 403);
        assert_eq!(denied["response"]["status"]["message"], "host taken");
        let patch = patch_between(r#"{"a":1}"#, r#"{"a":2}"#).unwrap();
        let allowed = Answer {
            patch,
            ..Answer::from_verdict(true, 0, "", vec!["w".repeat(1000); 40])
        }
        .to_review("u2");
        assert_eq!(allowed["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(allowed["response"]["patch"].as_str().unwrap())
            .unwrap();
        let ops: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(ops[0]["op"], "replace");
        let warnings = allowed["response"]["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), MAX_WARNINGS);
        assert_eq!(warnings[0].as_str().unwrap().len(), MAX_WARNING_BYTES);
    }
}
