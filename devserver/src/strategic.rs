//! Strategic merge patch, for the lists kubectl patches by key (containers by name, ports by
//! number, ...): a merge patch that merges such lists item by item instead of replacing them,
//! and honours the `$patch`, `$setElementOrder/`, `$deleteFromPrimitiveList/` and `$retainKeys`
//! directives. Merge keys come from field names, not from per-kind schemas.

use serde_json::{Map, Value};

/// The merge key of a list field, if the API server merges that list by key.
pub(crate) fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    let has = |key: &str| items.iter().any(|item| item.get(key).is_some());
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" if has("containerPort") => Some("containerPort"),
        "ports" => Some("port"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        "hostAliases" => Some("ip"),
        "topologySpreadConstraints" => Some("topologyKey"),
        _ => None,
    }
}

/// Lists of strings that merge as sets rather than being replaced.
pub(crate) fn merges_primitives(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Applies a strategic merge `patch` to `target`.
pub(crate) fn apply(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replacement = patch.clone();
            replacement.remove("$patch");
            *target = Value::Object(replacement);
            return;
        }
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(object) = target.as_object_mut() else {
        return;
    };
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(remove)) =
                (object.get_mut(field), value)
            {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                object.remove(key);
            }
            Value::Array(items) => {
                let order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array);
                let current = object.remove(key);
                let merged = merge_list(key, current, items, order);
                object.insert(key.clone(), merged);
            }
            Value::Object(_) => {
                let slot = object.entry(key.clone()).or_insert(Value::Null);
                apply(slot, value);
                if slot.is_null() {
                    object.remove(key);
                }
            }
            scalar => {
                object.insert(key.clone(), scalar.clone());
            }
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        object.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k.as_str())));
    }
}

fn merge_list(
    field: &str,
    current: Option<Value>,
    items: &[Value],
    order: Option<&Vec<Value>>,
) -> Value {
    let mut current = match current {
        Some(Value::Array(current)) => current,
        _ => Vec::new(),
    };
    if merges_primitives(field) {
        for item in items {
            if !current.contains(item) {
                current.push(item.clone());
            }
        }
        return Value::Array(current);
    }
    let Some(key) = merge_key(field, items) else {
        return Value::Array(items.iter().map(strip_directives).collect());
    };
    for item in items {
        let id = item.get(key);
        let position = id.and_then(|id| current.iter().position(|c| c.get(key) == Some(id)));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                current.remove(i);
            }
            (Some(i), false) => apply(&mut current[i], item),
            (None, true) => {}
            (None, false) => current.push(strip_directives(item)),
        }
    }
    if let Some(order) = order {
        let rank = |item: &Value| {
            order
                .iter()
                .position(|o| o.get(key).is_some() && o.get(key) == item.get(key))
                .unwrap_or(usize::MAX)
        };
        current.sort_by_key(rank);
    }
    Value::Array(current)
}

/// A copy of `value` without directive keys, for items added whole.
fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containers_merge_by_name_keeping_unpatched_fields() {
        let mut deployment = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1", "ports": [{"containerPort": 80}]},
            {"name": "sidecar", "image": "envoy"},
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{"name": "app", "image": "nginx:2"}],
        }}}});
        apply(&mut deployment, &patch);
        let containers = &deployment["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers[0],
            json!({"name": "app", "image": "nginx:2", "ports": [{"containerPort": 80}]})
        );
        assert_eq!(containers[1]["name"], "sidecar");
    }

    #[test]
    fn patch_delete_removes_list_items_and_maps() {
        let mut pod =
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "affinity": {"x": 1}}});
        let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}],
                                    "affinity": {"$patch": "delete"}}});
        apply(&mut pod, &patch);
        assert_eq!(pod, json!({"spec": {"containers": [{"name": "b"}]}}));
    }

    #[test]
    fn new_items_are_appended_and_unkeyed_lists_replaced() {
        let mut pod = json!({"spec": {"containers": [{"name": "a"}], "args": ["x", "y"]}});
        let patch = json!({"spec": {"containers": [{"name": "c", "image": "i"}], "args": ["z"]}});
        apply(&mut pod, &patch);
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "a"}, {"name": "c", "image": "i"}])
        );
        assert_eq!(pod["spec"]["args"], json!(["z"]));
    }

    #[test]
    fn primitive_lists_merge_and_delete() {
        let mut object = json!({"metadata": {"finalizers": ["a", "b"]}});
        apply(&mut object, &json!({"metadata": {"finalizers": ["c"]}}));
        assert_eq!(object["metadata"]["finalizers"], json!(["a", "b", "c"]));
        apply(
            &mut object,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        );
        assert_eq!(object["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn retain_keys_and_replace_directives() {
        let mut object =
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}});
        apply(
            &mut object,
            &json!({"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}),
        );
        assert_eq!(object, json!({"strategy": {"type": "Recreate"}}));
        apply(
            &mut object,
            &json!({"strategy": {"$patch": "replace", "other": 1}}),
        );
        assert_eq!(object, json!({"strategy": {"other": 1}}));
    }

    #[test]
    fn null_removes_fields() {
        let mut object = json!({"data": {"a": "1", "b": "2"}});
        apply(&mut object, &json!({"data": {"a": null}}));
        assert_eq!(object, json!({"data": {"b": "2"}}));
    }
}
