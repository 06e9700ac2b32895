//! A stored object: its compact JSON, serialised once, and the metadata selectors need.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use crate::Status;

/// One version of one object, immutable once stored and shared through `Arc`.
#[derive(Debug)]
pub(crate) struct StoredObject {
    /// The store key: `namespace/name`, or `name` for cluster-scoped objects.
    pub key: String,
    pub name: String,
    pub namespace: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// Values of the resource's selectable fields the object has (path, value as text).
    pub fields: Vec<(String, String)>,
    /// The resourceVersion written into `json`.
    pub resource_version: u64,
    /// Compact JSON of the whole object, with `metadata.resourceVersion` set.
    pub json: Bytes,
}

impl StoredObject {
    /// Serialises `object` (whose metadata the caller has completed) for storage, extracting
    /// the `selectable_fields` field selectors may ask for.
    pub fn new(
        object: &Value,
        resource_version: u64,
        selectable_fields: &[String],
    ) -> Result<StoredObject, Status> {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let fields = selectable_fields
            .iter()
            .filter_map(|path| {
                let pointer = format!("/{}", path.replace('.', "/"));
                let text = match object.pointer(&pointer)? {
                    Value::String(s) => s.clone(),
                    Value::Null | Value::Object(_) | Value::Array(_) => return None,
                    other => other.to_string(),
                };
                Some((path.clone(), text))
            })
            .collect();
        let json = serde_json::to_vec(object)
            .map_err(|e| Status::internal(format!("serialising object: {e}")))?;
        Ok(StoredObject {
            key: store_key(namespace.as_deref(), &name),
            name,
            namespace,
            labels,
            fields,
            resource_version,
            json: Bytes::from(json),
        })
    }

    /// The object parsed back into JSON, for updates and patches.
    pub fn to_value(&self) -> Result<Value, Status> {
        serde_json::from_slice(&self.json)
            .map_err(|e| Status::internal(format!("stored object is not JSON: {e}")))
    }

    /// The value of a field selector's field: `metadata.name`, `metadata.namespace` or one of
    /// the resource's selectable fields (`None` if the object lacks it).
    pub fn field(&self, field: &str) -> Option<&str> {
        match field {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(self.namespace.as_deref().unwrap_or("")),
            _ => self
                .fields
                .iter()
                .find(|(path, _)| path == field)
                .map(|(_, value)| value.as_str()),
        }
    }
}

/// The key objects are stored and listed under (listing order is key order, as in etcd).
pub(crate) fn store_key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// A random version-4 UUID, as the API server puts in `metadata.uid`.
pub(crate) fn new_uid() -> String {
    let bytes: [u8; 16] = rand::random();
    let mut hex = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        let b = match i {
            6 => (b & 0x0f) | 0x40,
            8 => (b & 0x3f) | 0x80,
            _ => *b,
        };
        if matches!(i, 4 | 6 | 8 | 10) {
            hex.push('-');
        }
        hex.push_str(&format!("{b:02x}"));
    }
    hex
}

/// `t` as the API server writes a `metav1.Time`: RFC 3339 in UTC, whole seconds
/// (`2026-01-02T03:04:05Z`).
pub(crate) fn api_time(t: jiff::Timestamp) -> String {
    format!("{t:.0}")
}

/// The current time as [`api_time`] writes it.
pub(crate) fn api_time_now() -> String {
    api_time(jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uids_are_version_4() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert_ne!(uid, new_uid());
    }

    #[test]
    fn api_times_are_utc_whole_seconds() {
        let at = |secs, nanos| api_time(jiff::Timestamp::new(secs, nanos).unwrap());
        assert_eq!(at(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00Z");
        // The fraction is cut, not rounded: a time is never written as later than it was.
        assert_eq!(at(1_798_761_599, 999_999_999), "2026-12-31T23:59:59Z");
        let now = api_time_now();
        assert_eq!(
            (now.len(), &now[10..11], &now[19..]),
            (20, "T", "Z"),
            "{now}"
        );
    }

    #[test]
    fn stored_object_extracts_selector_metadata() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "web"}},
                         "spec": {"nodeName": "n1", "hostNetwork": true}});
        let fields = [
            "spec.nodeName".to_owned(),
            "spec.hostNetwork".to_owned(),
            "status.phase".to_owned(),
        ];
        let stored = StoredObject::new(&obj, 7, &fields).unwrap();
        assert_eq!(stored.field("spec.nodeName"), Some("n1"));
        assert_eq!(stored.field("spec.hostNetwork"), Some("true"));
        assert_eq!(stored.field("status.phase"), None);
        assert_eq!(stored.key, "ns/a");
        assert_eq!(stored.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(stored.field("metadata.namespace"), Some("ns"));
        assert_eq!(stored.to_value().unwrap(), obj);
    }
}
