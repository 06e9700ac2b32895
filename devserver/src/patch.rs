//! PATCH bodies: JSON merge patch, JSON patch, strategic merge (handled as merge) and apply.

use serde_json::Value;

use crate::Status;

/// The patch formats, named by the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`: a merge patch that merges known keyed lists
    /// (containers, ports, env, ...) item by item; see the `strategic` module.
    StrategicMerge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/apply-patch+yaml` (server-side apply): creates the object if absent,
    /// otherwise merged like a merge patch. Field ownership is not tracked.
    Apply,
}

impl PatchType {
    /// The patch type for a Content-Type header value (parameters ignored).
    pub fn from_content_type(content_type: &str) -> Result<PatchType, Status> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::StrategicMerge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(Status::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types \
                 include: application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml, application/strategic-merge-patch+json \
                 (got {other:?})"
            ))),
        }
    }
}

/// A parsed patch, ready to apply.
pub(crate) enum Patch {
    Merge(Value),
    Strategic(Value),
    Json(json_patch::Patch),
}

/// Parses a patch body; 400 with the parser's message if it is malformed.
pub(crate) fn parse(patch_type: PatchType, body: &[u8]) -> Result<Patch, Status> {
    let bad = |e: &dyn std::fmt::Display| Status::bad_request(format!("invalid patch: {e}"));
    match patch_type {
        PatchType::Merge => Ok(Patch::Merge(
            serde_json::from_slice(body).map_err(|e| bad(&e))?,
        )),
        PatchType::StrategicMerge => Ok(Patch::Strategic(
            serde_json::from_slice(body).map_err(|e| bad(&e))?,
        )),
        PatchType::Json => Ok(Patch::Json(
            serde_json::from_slice(body).map_err(|e| bad(&e))?,
        )),
        PatchType::Apply => {
            let value: Value = serde_norway::from_slice(body).map_err(|e| bad(&e))?;
            Ok(Patch::Merge(value))
        }
    }
}

impl Patch {
    /// The patched copy of `object`; 422 if a JSON patch operation cannot apply.
    pub fn apply_to(&self, mut object: Value) -> Result<Value, Status> {
        match self {
            Patch::Merge(patch) => {
                if !patch.is_object() {
                    return Err(Status::bad_request("a merge patch must be a JSON object"));
                }
                json_patch::merge(&mut object, patch);
            }
            Patch::Strategic(patch) => {
                if !patch.is_object() {
                    return Err(Status::bad_request(
                        "a strategic merge patch must be a JSON object",
                    ));
                }
                crate::strategic::apply(&mut object, patch);
            }
            Patch::Json(patch) => {
                json_patch::patch(&mut object, patch)
                    .map_err(|e| Status::invalid(format!("the JSON patch failed: {e}")))?;
            }
        }
        Ok(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes_fields() {
        let patch = parse(PatchType::Merge, br#"{"data":{"a":null,"b":"2"}}"#).unwrap();
        let result = patch.apply_to(json!({"data": {"a": "1"}})).unwrap();
        assert_eq!(result, json!({"data": {"b": "2"}}));
    }

    #[test]
    fn strategic_directives_are_not_stored() {
        let body =
            br#"{"$setElementOrder/containers":[{"name":"a"}],"spec":{"$retainKeys":["x"],"x":1}}"#;
        let patch = parse(PatchType::StrategicMerge, body).unwrap();
        let result = patch.apply_to(json!({})).unwrap();
        assert_eq!(result, json!({"spec": {"x": 1}}));
    }

    #[test]
    fn json_patch_failures_are_invalid() {
        let patch = parse(PatchType::Json, br#"[{"op":"test","path":"/a","value":1}]"#).unwrap();
        assert_eq!(patch.apply_to(json!({"a": 2})).unwrap_err().code, 422);
        let patch = parse(PatchType::Json, br#"[{"op":"add","path":"/b","value":1}]"#).unwrap();
        assert_eq!(patch.apply_to(json!({})).unwrap(), json!({"b": 1}));
    }

    #[test]
    fn unknown_content_types_are_rejected() {
        assert_eq!(
            PatchType::from_content_type("text/plain").unwrap_err().code,
            415
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        assert_eq!(parse(PatchType::Merge, b"{").err().unwrap().code, 400);
        assert_eq!(
            parse(PatchType::Json, br#"{"op":1}"#).err().unwrap().code,
            400
        );
    }
}
