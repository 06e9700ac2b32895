//! One admission review as a policy reads it ([`Review`]: the request with its objects parsed)
//! and the answers it gives ([`Verdict`], [`Mutation`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    AdmissionRequest, Error, GroupVersionKind, GroupVersionResource, Mutation, Operation, Patch,
    UserInfo, Verdict,
};

/// One AdmissionReview request, its objects parsed. The texts come from the API server through
/// the host and are checked here: an object that is not a JSON object fails the review (the
/// webhook's failure policy answers it) before the policy sees it.
#[derive(Debug, Clone)]
pub struct Review {
    /// The review's UID (the host copies it into the response).
    pub uid: String,
    pub operation: Operation,
    /// The type of `object`.
    pub kind: GroupVersionKind,
    pub resource: GroupVersionResource,
    /// e.g. `status`, `scale`; `None` for the main resource.
    pub sub_resource: Option<String>,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// `None` when the name is not known yet (a create with `generateName`).
    pub name: Option<String>,
    /// The object as it will be stored, a JSON object; `None` for a delete.
    pub object: Option<Value>,
    /// The object as it is stored, a JSON object; `None` for a create.
    pub old_object: Option<Value>,
    pub user: UserInfo,
    /// The request will not be persisted: a policy with side effects must not make them.
    pub dry_run: bool,
}

impl Review {
    /// The review of `request`; an error when an object is not a JSON object.
    pub fn from_request(request: AdmissionRequest) -> Result<Review, Error> {
        Ok(Review {
            object: parse(request.object.as_deref(), "object")?,
            old_object: parse(request.old_object.as_deref(), "old object")?,
            uid: request.uid,
            operation: request.operation,
            kind: request.kind,
            resource: request.resource,
            sub_resource: request.sub_resource,
            namespace: request.namespace,
            name: request.name,
            user: request.user_info,
            dry_run: request.dry_run,
        })
    }

    /// The object as a `K` (`None` for a delete); an error naming the type when it is not one.
    pub fn object_as<K: DeserializeOwned>(&self) -> Result<Option<K>, Error> {
        typed(self.object.as_ref(), "object")
    }

    /// The stored object as a `K` (`None` for a create).
    pub fn old_object_as<K: DeserializeOwned>(&self) -> Result<Option<K>, Error> {
        typed(self.old_object.as_ref(), "old object")
    }

    /// The answer of a mutating policy that applies `patch` to the object: allowed, with the
    /// patched object when it differs, unchanged when it does not. An error when the review has
    /// no object (a delete) or the patch does not fit it.
    pub fn patched(&self, patch: &Patch) -> Result<Mutation, Error> {
        let object = self
            .object
            .as_ref()
            .ok_or_else(|| Error("the review has no object to patch (a delete has none)".into()))?;
        let mut changed = object.clone();
        patch.apply(&mut changed)?;
        Ok(if &changed == object {
            Mutation::unchanged()
        } else {
            Mutation::replaced(&changed)
        })
    }
}

fn parse(text: Option<&str>, what: &str) -> Result<Option<Value>, Error> {
    let Some(text) = text else {
        return Ok(None);
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| Error(format!("the {what} is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(Error(format!("the {what} is not a JSON object")));
    }
    Ok(Some(value))
}

fn typed<K: DeserializeOwned>(value: Option<&Value>, what: &str) -> Result<Option<K>, Error> {
    value
        .map(|v| {
            K::deserialize(v).map_err(|e| {
                Error(format!(
                    "the {what} is not a {}: {e}",
                    std::any::type_name::<K>()
                ))
            })
        })
        .transpose()
}

impl Verdict {
    /// Allowed.
    pub fn allow() -> Verdict {
        Verdict {
            allowed: true,
            code: 0,
            message: String::new(),
            warnings: Vec::new(),
        }
    }

    /// Denied with `message` (kubectl shows it), reported as 403 unless
    /// [`with_code`](Self::with_code) says otherwise.
    pub fn deny(message: impl Into<String>) -> Verdict {
        Verdict {
            allowed: false,
            code: 0,
            message: message.into(),
            warnings: Vec::new(),
        }
    }

    /// The HTTP status a denial is reported with (e.g. 422 for an invalid object).
    pub fn with_code(mut self, code: u16) -> Verdict {
        self.code = code;
        self
    }

    /// And a warning for the user (kubectl prints it), allowed or not. The host keeps 16, each
    /// cut to 256 bytes.
    pub fn with_warning(mut self, warning: impl Into<String>) -> Verdict {
        self.warnings.push(warning.into());
        self
    }
}

impl Mutation {
    /// Allowed, the object stored as it is.
    pub fn unchanged() -> Mutation {
        Mutation {
            verdict: Verdict::allow(),
            object: None,
        }
    }

    /// Allowed, stored as `object` (the whole object; the host computes the JSONPatch).
    pub fn replaced(object: &Value) -> Mutation {
        Mutation {
            verdict: Verdict::allow(),
            object: Some(object.to_string()),
        }
    }

    /// And a warning for the user (kubectl prints it).
    pub fn with_warning(mut self, warning: impl Into<String>) -> Mutation {
        self.verdict = self.verdict.with_warning(warning);
        self
    }
}

impl From<Verdict> for Mutation {
    /// A mutating webhook's answer that changes nothing: its verdict alone (a denial, say).
    fn from(verdict: Verdict) -> Mutation {
        Mutation {
            verdict,
            object: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    pub(crate) fn request(object: Option<&str>) -> AdmissionRequest {
        AdmissionRequest {
            uid: "u-1".into(),
            operation: Operation::Create,
            kind: GroupVersionKind {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            resource: GroupVersionResource {
                group: String::new(),
                version: "v1".into(),
                resource: "configmaps".into(),
            },
            sub_resource: None,
            namespace: Some("default".into()),
            name: Some("app".into()),
            object: object.map(str::to_owned),
            old_object: None,
            user_info: UserInfo {
                username: "alice".into(),
                uid: String::new(),
                groups: Vec::new(),
                extra: Vec::new(),
            },
            dry_run: false,
        }
    }

    const APP: &str =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app"},"data":{"a":"1"}}"#;

    #[test]
    fn a_review_parses_its_objects_and_reads_them_typed() {
        let review = Review::from_request(request(Some(APP))).unwrap();
        assert_eq!(review.name.as_deref(), Some("app"));
        assert_eq!(review.object.as_ref().unwrap()["data"]["a"], "1");
        let config_map: ConfigMap = review.object_as().unwrap().unwrap();
        assert_eq!(config_map.data.unwrap()["a"], "1");
        assert!(review.old_object_as::<ConfigMap>().unwrap().is_none());
    }

    #[test]
    fn an_object_that_is_not_a_json_object_fails_the_review() {
        for (text, why) in [
            ("{", "is not JSON"),
            ("[1]", "not a JSON object"),
            ("\"x\"", "not a JSON object"),
        ] {
            let err = Review::from_request(request(Some(text))).unwrap_err();
            assert!(err.0.contains(why), "{text}: {err}");
        }
        let review = Review::from_request(request(Some(r#"{"data": 7}"#))).unwrap();
        let err = review.object_as::<ConfigMap>().unwrap_err();
        assert!(err.0.contains("ConfigMap"), "{err}");
    }

    #[test]
    fn a_patch_that_changes_the_object_answers_it_and_one_that_does_not_answers_none() {
        let review = Review::from_request(request(Some(APP))).unwrap();
        let marked = review
            .patched(&Patch::new().set(&["metadata", "annotations", "by"], "me"))
            .unwrap();
        assert!(marked.verdict.allowed);
        let object: Value = serde_json::from_str(marked.object.as_deref().unwrap()).unwrap();
        assert_eq!(object["metadata"]["annotations"]["by"], "me");
        assert_eq!(object["data"], json!({"a": "1"}));
        let same = review
            .patched(&Patch::new().set(&["data", "a"], "1"))
            .unwrap();
        assert!(same.verdict.allowed && same.object.is_none());
        let broken = review.patched(&Patch::new().set(&["data", "a", "deeper"], 1));
        assert!(broken.unwrap_err().0.contains("data/a/deeper"));
        let delete = Review::from_request(request(None)).unwrap();
        assert!(delete.patched(&Patch::new()).is_err());
    }

    #[test]
    fn verdicts_say_what_they_were_built_with() {
        let denied = Verdict::deny("no").with_code(422).with_warning("careful");
        assert!(!denied.allowed);
        assert_eq!((denied.code, denied.message.as_str()), (422, "no"));
        assert_eq!(denied.warnings, ["careful"]);
        let allowed = Verdict::allow();
        assert!(allowed.allowed && allowed.code == 0 && allowed.message.is_empty());
        let mutation: Mutation = Verdict::deny("no").into();
        assert!(!mutation.verdict.allowed && mutation.object.is_none());
        let warned = Mutation::unchanged().with_warning("w");
        assert_eq!(warned.verdict.warnings, ["w"]);
    }
}
