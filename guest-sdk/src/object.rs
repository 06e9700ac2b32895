//! [`DynamicObject`]: any Kubernetes object, typed metadata and untyped body, for custom
//! resources and for code that handles several kinds alike.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// An object of any resource: `apiVersion`, `kind` and `metadata` typed, everything else (spec,
/// status, data, ...) kept as JSON in `data`.
///
/// Objects in list answers may lack `apiVersion` and `kind`; the [`Resource`](crate::Resource)
/// an event or a [`Cache`](crate::Cache) belongs to says what they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    /// `apiVersion`, when the JSON has it.
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    /// `kind`, when the JSON has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The object's metadata, typed.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field, as a JSON object.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl DynamicObject {
    /// `metadata.name`, or `""`.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or("")
    }

    /// `metadata.namespace`, `None` for cluster-scoped objects.
    pub fn namespace(&self) -> Option<&str> {
        self.metadata.namespace.as_deref()
    }

    /// `namespace/name`, or `name` for cluster-scoped objects: the cache key.
    pub fn key(&self) -> String {
        match self.namespace() {
            Some(namespace) => format!("{namespace}/{}", self.name()),
            None => self.name().to_owned(),
        }
    }

    /// The value at a dotted path below the top level, e.g. `spec.replicas` or `data.color`.
    pub fn get(&self, path: &str) -> Option<&serde_json::Value> {
        let mut parts = path.split('.');
        let mut value = self.data.get(parts.next()?)?;
        for part in parts {
            value = value.get(part)?;
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_object_keeps_metadata_typed_and_the_rest_as_json() {
        let object: DynamicObject = serde_json::from_str(
            r#"{"apiVersion":"example.com/v1","kind":"Widget",
                "metadata":{"name":"w","namespace":"ns","labels":{"a":"b"}},
                "spec":{"size":{"value":3}}}"#,
        )
        .unwrap();
        assert_eq!(object.key(), "ns/w");
        assert_eq!(object.kind.as_deref(), Some("Widget"));
        assert_eq!(object.get("spec.size.value"), Some(&serde_json::json!(3)));
        assert_eq!(object.get("spec.missing"), None);
        let labels = object.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.get("a").map(String::as_str), Some("b"));
    }

    #[test]
    fn cluster_scoped_objects_are_keyed_by_name() {
        let object: DynamicObject = serde_json::from_str(r#"{"metadata":{"name":"n"}}"#).unwrap();
        assert_eq!(object.key(), "n");
        assert!(object.api_version.is_none());
    }
}
