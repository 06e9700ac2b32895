//! How server-side apply treats each list of an object: replaced whole (atomic), merged as a set,
//! or merged item by item under key fields, as the API server reads it from the kind's schema.
//! Built-in kinds are known by field name (the kinds this server serves declare their lists
//! that way); a custom resource's lists follow its CRD's `x-kubernetes-list-type` and
//! `x-kubernetes-list-map-keys`, and are atomic where its schema says nothing, as on a real
//! API server.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;
use crate::strategic;

/// The semantics of one list.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListType {
    /// Owned and replaced as one value.
    Atomic,
    /// A set of scalars: each value owned on its own.
    Set,
    /// Items identified by these key fields, each owned and merged on its own.
    Map(Vec<KeyField>),
}

/// A key field of a map list, with the value the API server defaults it to when left out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyField {
    name: String,
    default: Option<Value>,
}

impl KeyField {
    fn new(name: &str, default: Option<Value>) -> Self {
        KeyField {
            name: name.to_owned(),
            default,
        }
    }
}

/// Where a value sits in its kind's schema.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Schema<'s> {
    /// A built-in kind, or an object's `metadata`: lists known by field name.
    BuiltIn,
    /// A node of a CRD's `openAPIV3Schema`; `None` where the schema does not reach.
    Crd(Option<&'s Value>),
}

impl<'s> Schema<'s> {
    /// The schema at the root of `resource`'s objects.
    pub(crate) fn of(resource: &'s ResourceInfo) -> Self {
        match &resource.schema {
            Some(schema) => Schema::Crd(Some(schema)),
            None => Schema::BuiltIn,
        }
    }

    /// The schema of the field `name` of an object here.
    pub(crate) fn field(self, name: &str) -> Self {
        match self {
            Schema::BuiltIn => Schema::BuiltIn,
            Schema::Crd(node) => Schema::Crd(node.and_then(|n| {
                n.get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| n.get("additionalProperties").filter(|a| a.is_object()))
            })),
        }
    }

    /// The schema of the field `name` at the top of an object: `metadata` is the API server's
    /// own, whatever a CRD says.
    pub(crate) fn top(self, name: &str) -> Self {
        if name == "metadata" {
            Schema::BuiltIn
        } else {
            self.field(name)
        }
    }

    /// The schema of the items of a list here.
    pub(crate) fn item(self) -> Self {
        match self {
            Schema::BuiltIn => Schema::BuiltIn,
            Schema::Crd(node) => Schema::Crd(node.and_then(|n| n.get("items"))),
        }
    }

    /// The semantics of the list `items`, the value of the field `field` here.
    pub(crate) fn list_type(self, field: &str, items: &[Value]) -> ListType {
        match self {
            Schema::BuiltIn => built_in(field, items),
            Schema::Crd(node) => {
                let Some(node) = node else {
                    return ListType::Atomic;
                };
                match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("set") => ListType::Set,
                    Some("map") => {
                        let properties = node.pointer("/items/properties");
                        let keys = node
                            .get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(|key| {
                                let default = properties
                                    .and_then(|p| p.get(key))
                                    .and_then(|p| p.get("default"))
                                    .cloned();
                                KeyField::new(key, default)
                            })
                            .collect::<Vec<_>>();
                        if keys.is_empty() {
                            ListType::Atomic
                        } else {
                            ListType::Map(keys)
                        }
                    }
                    _ => ListType::Atomic,
                }
            }
        }
    }
}

/// The built-in kinds' lists. Ports are keyed by port and protocol (defaulted to TCP), as the
/// API server's apply does, although a strategic merge patch keys them by port alone.
fn built_in(field: &str, items: &[Value]) -> ListType {
    let tcp = || Some(json!("TCP"));
    match field {
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => ListType::Map(vec![
            KeyField::new("containerPort", None),
            KeyField::new("protocol", tcp()),
        ]),
        "ports" => ListType::Map(vec![
            KeyField::new("port", None),
            KeyField::new("protocol", tcp()),
        ]),
        _ => match strategic::merge_key(field, items) {
            Some(key) => ListType::Map(vec![KeyField::new(key, None)]),
            None if strategic::merges_primitives(field) && items.iter().all(is_scalar) => {
                ListType::Set
            }
            None => ListType::Atomic,
        },
    }
}

pub(crate) fn is_scalar(value: &Value) -> bool {
    !matches!(value, Value::Object(_) | Value::Array(_))
}

/// The identity of a map list's item (its key fields, defaults filled in), or `None` if a key
/// field is missing and has no default.
pub(crate) fn key_of(item: &Value, keys: &[KeyField]) -> Option<Map<String, Value>> {
    keys.iter()
        .map(|key| {
            let value = item.get(&key.name).or(key.default.as_ref())?;
            Some((key.name.clone(), value.clone()))
        })
        .collect()
}

/// Whether `item` is the map list item identified by `key`.
pub(crate) fn has_key(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// Writes the defaults of map lists' key fields into `object`, as the API server's defaulting
/// does on every write (a container port without a protocol is stored with `TCP`), so items are
/// identified the same way whether or not a writer spelled the default out.
pub(crate) fn default_keys(object: &mut Value, schema: Schema<'_>) {
    if let Some(map) = object.as_object_mut() {
        for (name, value) in map.iter_mut() {
            walk(value, name, schema.top(name));
        }
    }
}

fn walk(value: &mut Value, field: &str, schema: Schema<'_>) {
    match value {
        Value::Object(map) => {
            for (name, child) in map.iter_mut() {
                walk(child, name, schema.field(name));
            }
        }
        Value::Array(items) => {
            if let ListType::Map(keys) = schema.list_type(field, items) {
                for item in items.iter_mut() {
                    let Some(fields) = item.as_object_mut() else {
                        continue;
                    };
                    for key in &keys {
                        if let Some(default) = &key.default {
                            fields
                                .entry(key.name.clone())
                                .or_insert_with(|| default.clone());
                        }
                    }
                }
            }
            for item in items.iter_mut() {
                walk(item, field, schema.item());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_keyed_by_port_and_defaulted_protocol() {
        let mut pod = json!({"spec": {"containers": [
            {"name": "dns", "ports": [{"containerPort": 53}, {"containerPort": 53, "protocol": "UDP"}]},
        ]}});
        default_keys(&mut pod, Schema::BuiltIn);
        let ports = pod.pointer("/spec/containers/0/ports").unwrap();
        assert_eq!(
            ports,
            &json!([{"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}])
        );
        let ListType::Map(keys) = Schema::BuiltIn.list_type("ports", ports.as_array().unwrap())
        else {
            panic!("ports are a map list");
        };
        assert_eq!(
            key_of(&json!({"containerPort": 53}), &keys).map(Value::Object),
            Some(json!({"containerPort": 53, "protocol": "TCP"}))
        );
    }

    #[test]
    fn a_crd_schema_declares_map_set_and_atomic_lists() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "routes": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["host", "port"],
                       "items": {"type": "object", "properties": {
                           "host": {"type": "string"}, "port": {"type": "integer", "default": 80}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "containers": {"type": "array", "items": {"type": "object"}},
        }}}});
        let spec = Schema::Crd(Some(&schema)).top("spec");
        assert_eq!(
            spec.field("routes").list_type("routes", &[]),
            ListType::Map(vec![
                KeyField::new("host", None),
                KeyField::new("port", Some(json!(80)))
            ])
        );
        assert_eq!(spec.field("tags").list_type("tags", &[]), ListType::Set);
        // Named like a built-in list, but a CRD's list is atomic unless its schema says more.
        assert_eq!(
            spec.field("containers")
                .list_type("containers", &[json!({"name": "a"})]),
            ListType::Atomic
        );
        let mut object = json!({"metadata": {"finalizers": ["a"]},
                                "spec": {"routes": [{"host": "a"}], "tags": ["x"]}});
        default_keys(&mut object, Schema::Crd(Some(&schema)));
        assert_eq!(object["spec"]["routes"], json!([{"host": "a", "port": 80}]));
        assert_eq!(
            Schema::Crd(Some(&schema))
                .top("metadata")
                .field("finalizers")
                .list_type("finalizers", &[json!("a")]),
            ListType::Set
        );
    }
}
