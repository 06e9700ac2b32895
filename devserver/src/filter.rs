//! Which objects a list or watch selects: namespace, label selector and field selector.

use kubewasm_labels::{FieldSelector, Selector};

use crate::Status;
use crate::object::StoredObject;

/// The fields a field selector may name for every resource.
const COMMON_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Selection shared by list and watch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub namespace: Option<String>,
    pub labels: Selector,
    pub fields: FieldSelector,
}

impl Filter {
    /// Parses `labelSelector` and `fieldSelector`; 400 on bad syntax or a field that is neither
    /// common nor in the resource's `selectable_fields`.
    pub fn parse(
        namespace: Option<String>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
        selectable_fields: &[String],
    ) -> Result<Filter, Status> {
        let labels = match label_selector {
            Some(s) => Selector::parse(s).map_err(|e| Status::bad_request(e.to_string()))?,
            None => Selector::everything(),
        };
        let fields = match field_selector {
            Some(s) => FieldSelector::parse(s).map_err(|e| Status::bad_request(e.to_string()))?,
            None => FieldSelector::everything(),
        };
        let supported =
            |f: &&str| COMMON_FIELDS.contains(f) || selectable_fields.iter().any(|s| s == f);
        if let Some(field) = fields.fields().find(|f| !supported(f)) {
            return Err(Status::bad_request(format!(
                "field label not supported: {field}"
            )));
        }
        Ok(Filter {
            namespace,
            labels,
            fields,
        })
    }

    /// Whether the object is in the namespace and matches both selectors.
    pub fn matches(&self, object: &StoredObject) -> bool {
        if let Some(ns) = &self.namespace
            && object.namespace.as_deref() != Some(ns.as_str())
        {
            return false;
        }
        self.labels.matches_map(&object.labels) && self.fields.matches(|f| object.field(f))
    }

    /// True when every object of the namespace is selected (no selector narrows it).
    pub fn selects_all(&self) -> bool {
        self.labels.is_everything() && self.fields.is_everything()
    }

    /// The store-key prefix all selected objects share.
    pub fn key_prefix(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/"),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(ns: &str, name: &str, app: &str) -> StoredObject {
        let value = json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}}});
        StoredObject::new(&value, 1, &[]).unwrap()
    }

    #[test]
    fn namespace_and_selectors_all_apply() {
        let filter = Filter::parse(
            Some("a".into()),
            Some("app in (web)"),
            Some("metadata.name!=skip"),
            &[],
        )
        .unwrap();
        assert!(filter.matches(&object("a", "x", "web")));
        assert!(!filter.matches(&object("b", "x", "web")));
        assert!(!filter.matches(&object("a", "x", "db")));
        assert!(!filter.matches(&object("a", "skip", "web")));
    }

    #[test]
    fn unsupported_fields_are_bad_requests() {
        let err = Filter::parse(None, None, Some("spec.nodeName=x"), &[]).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("spec.nodeName"));
        let pods = ["spec.nodeName".to_owned()];
        assert!(Filter::parse(None, None, Some("spec.nodeName=x"), &pods).is_ok());
    }
}
