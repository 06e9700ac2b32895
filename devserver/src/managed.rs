//! Field ownership for server-side apply: the fields each applier owns (`metadata.managedFields`,
//! operation `Apply`), conflicts between appliers, and the removal of fields an applier stops
//! applying when no one else owns them.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::lists::{ListType, Schema, has_key, is_scalar, key_of};
use crate::object::api_time_now;
use crate::status::{Status, StatusCause};

/// A field's path: `f:name` (a map key), `k:{"name":"x"}` (a keyed list item) or `v:1` (an
/// item of a set-like list), as in `fieldsV1`.
type Path = Vec<String>;

/// One `managedFields` entry.
struct Entry {
    manager: String,
    operation: String,
    raw: Value,
    fields: BTreeSet<Path>,
}

/// Applies `applied` for `manager` to `current` (an object of the kind `schema` describes, its
/// list keys defaulted): the merged object, with `managedFields` updated; 409 Conflict (with one
/// `FieldManagerConflict` cause per field) when another applier owns a field `applied` sets to
/// another value, unless `force`.
pub(crate) fn apply(
    current: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
    schema: Schema<'_>,
) -> Result<Value, Status> {
    let mut applied = applied.clone();
    crate::lists::default_keys(&mut applied, schema);
    let applied = &applied;
    let mut entries = entries(current);
    let wanted = field_set(applied, schema);
    let mut conflicts = Vec::new();
    for entry in entries.iter_mut().filter(|e| !is_own(e, manager)) {
        let clashing: Vec<Path> = entry
            .fields
            .intersection(&wanted)
            .filter(|path| value_at(current, path) != value_at(applied, path))
            .cloned()
            .collect();
        for path in clashing {
            if force {
                entry.fields.remove(&path);
            } else {
                conflicts.push((entry.manager.clone(), path));
            }
        }
    }
    if !conflicts.is_empty() {
        return Err(conflict(&conflicts));
    }
    let previously: BTreeSet<Path> = entries
        .iter()
        .filter(|e| is_own(e, manager))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let others: BTreeSet<Path> = entries
        .iter()
        .filter(|e| !is_own(e, manager))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut merged = current.clone();
    merge_object(&mut merged, applied, schema);
    for path in previously.difference(&wanted) {
        if !others.contains(path) {
            remove_path(&mut merged, path);
        }
    }
    entries.retain(|e| !is_own(e, manager));
    let api_version = applied.get("apiVersion").cloned().unwrap_or(Value::Null);
    let entry = json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": api_time_now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(&wanted),
    });
    write_entries(&mut merged, entries, Some(entry));
    Ok(merged)
}

/// The `managedFields` of a newly applied object: everything it sets belongs to `manager`.
pub(crate) fn first_apply(mut object: Value, manager: &str, schema: Schema<'_>) -> Value {
    crate::lists::default_keys(&mut object, schema);
    let fields = to_fields_v1(&field_set(&object, schema));
    let api_version = object.get("apiVersion").cloned().unwrap_or(Value::Null);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert(
            "managedFields".into(),
            json!([{"manager": manager, "operation": "Apply", "apiVersion": api_version,
                    "time": api_time_now(), "fieldsType": "FieldsV1", "fieldsV1": fields}]),
        );
    }
    object
}

/// Records a non-apply write by `manager` (operation `Update`) on an object that already has
/// `managedFields`: the fields it changed become its own and no one else's. Objects never applied
/// get no `managedFields` (a real API server gives every object an `Update` entry).
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    schema: Schema<'_>,
) {
    let own = |o: &Value| {
        o.pointer("/metadata/managedFields")
            .is_some_and(|m| m.as_array().is_some_and(|a| !a.is_empty()))
    };
    let base = if own(new) {
        new.clone()
    } else if let Some(old) = old.filter(|o| own(o)) {
        old.clone()
    } else {
        return;
    };
    let changed: BTreeSet<Path> = field_set(new, schema)
        .into_iter()
        .filter(|path| old.and_then(|o| value_at(o, path)) != value_at(new, path))
        .collect();
    if changed.is_empty() {
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut)
            && let Some(fields) = base.pointer("/metadata/managedFields")
        {
            meta.insert("managedFields".into(), fields.clone());
        }
        return;
    }
    let mut entries = entries(&base);
    for entry in &mut entries {
        entry.fields.retain(|p| !changed.contains(p));
    }
    let mut mine: BTreeSet<Path> = entries
        .iter()
        .filter(|e| e.manager == manager && e.operation == "Update")
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    mine.extend(changed);
    entries.retain(|e| !(e.manager == manager && e.operation == "Update"));
    let api_version = new.get("apiVersion").cloned().unwrap_or(Value::Null);
    let entry = json!({
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": api_time_now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(&mine),
    });
    write_entries(new, entries, Some(entry));
}

/// Stores `entries` (those with no fields left dropped) and `extra` as `managedFields`.
fn write_entries(object: &mut Value, entries: Vec<Entry>, extra: Option<Value>) {
    let mut list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut raw = e.raw;
            raw["fieldsV1"] = to_fields_v1(&e.fields);
            raw
        })
        .collect();
    list.extend(extra);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

fn is_own(entry: &Entry, manager: &str) -> bool {
    entry.manager == manager && entry.operation == "Apply"
}

fn entries(object: &Value) -> Vec<Entry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|raw| {
                    let mut fields = BTreeSet::new();
                    if let Some(v1) = raw.get("fieldsV1") {
                        from_fields_v1(v1, &mut Vec::new(), &mut fields);
                    }
                    let text =
                        |k: &str| raw.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                    Entry {
                        manager: text("manager"),
                        operation: text("operation"),
                        raw: raw.clone(),
                        fields,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The leaf fields an applied configuration sets (identity and server-owned metadata left out).
fn field_set(object: &Value, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    if let Some(map) = object.as_object() {
        for (key, value) in map {
            match key.as_str() {
                "apiVersion" | "kind" => {}
                "metadata" => {
                    for (k, v) in value.as_object().into_iter().flatten() {
                        if matches!(
                            k.as_str(),
                            "labels" | "annotations" | "finalizers" | "ownerReferences"
                        ) {
                            collect(
                                v,
                                k,
                                Schema::BuiltIn,
                                &mut vec!["f:metadata".into(), format!("f:{k}")],
                                &mut out,
                            );
                        }
                    }
                }
                _ => collect(
                    value,
                    key,
                    schema.top(key),
                    &mut vec![format!("f:{key}")],
                    &mut out,
                ),
            }
        }
    }
    out
}

fn collect(
    value: &Value,
    field: &str,
    schema: Schema<'_>,
    path: &mut Path,
    out: &mut BTreeSet<Path>,
) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                path.push(format!("f:{k}"));
                collect(v, k, schema.field(k), path, out);
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => match schema.list_type(field, items) {
            ListType::Map(keys) => {
                for item in items {
                    let Some(id) = key_of(item, &keys) else {
                        out.insert(path.clone());
                        return;
                    };
                    path.push(format!("k:{}", Value::Object(id)));
                    collect(item, field, schema.item(), path, out);
                    path.pop();
                }
            }
            ListType::Set if items.iter().all(is_scalar) => {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// Merges an applied configuration into `target` field by field, lists as `schema` says:
/// map lists item by item under their keys, sets by value, atomic lists replaced whole.
fn merge_object(target: &mut Value, applied: &Value, schema: Schema<'_>) {
    let (Some(target), Some(applied)) = (target.as_object_mut(), applied.as_object()) else {
        return;
    };
    for (name, value) in applied {
        merge_field(target, name, value, schema.top(name));
    }
}

fn merge_field(target: &mut Map<String, Value>, name: &str, value: &Value, schema: Schema<'_>) {
    match value {
        Value::Null => {
            target.remove(name);
        }
        Value::Object(fields) => {
            let slot = target
                .entry(name.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Some(slot) = slot.as_object_mut() {
                for (k, v) in fields {
                    merge_field(slot, k, v, schema.field(k));
                }
            }
        }
        Value::Array(items) => {
            let merged = match (schema.list_type(name, items), target.remove(name)) {
                (ListType::Map(keys), Some(Value::Array(mut current))) => {
                    for item in items {
                        let position = key_of(item, &keys)
                            .and_then(|id| current.iter().position(|c| has_key(c, &id)));
                        match (position, item.as_object()) {
                            (Some(i), Some(fields)) => {
                                if let Some(slot) = current[i].as_object_mut() {
                                    for (k, v) in fields {
                                        merge_field(slot, k, v, schema.item().field(k));
                                    }
                                }
                            }
                            _ => current.push(item.clone()),
                        }
                    }
                    current
                }
                (ListType::Set, Some(Value::Array(mut current))) => {
                    for item in items {
                        if !current.contains(item) {
                            current.push(item.clone());
                        }
                    }
                    current
                }
                _ => items.clone(),
            };
            target.insert(name.to_owned(), Value::Array(merged));
        }
        scalar => {
            target.insert(name.to_owned(), scalar.clone());
        }
    }
}

/// The item of `items` a `k:` or `v:` segment names.
fn find_item(items: &[Value], segment: &str) -> Option<usize> {
    if let Some(key) = segment.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(key).ok()?;
        items.iter().position(|item| has_key(item, &key))
    } else {
        let wanted: Value = serde_json::from_str(segment.strip_prefix("v:")?).ok()?;
        items.iter().position(|item| *item == wanted)
    }
}

fn step<'v>(value: &'v Value, segment: &str) -> Option<&'v Value> {
    match segment.strip_prefix("f:") {
        Some(field) => value.get(field),
        None => {
            let items = value.as_array()?;
            items.get(find_item(items, segment)?)
        }
    }
}

fn value_at<'v>(value: &'v Value, path: &Path) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, segment| step(v, segment))
}

/// Removes the field at `path`; removing the key field of a keyed list item removes the item.
fn remove_path(value: &mut Value, path: &Path) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let (target, parent_path) = match parents.last() {
        Some(item) if item.starts_with("k:") && key_field(item, last) => {
            (item, &parents[..parents.len() - 1])
        }
        _ => (last, parents),
    };
    let mut node = value;
    for segment in parent_path {
        let next = match segment.strip_prefix("f:") {
            Some(field) => node.get_mut(field),
            None => match node.as_array_mut() {
                Some(items) => match find_item(items, segment) {
                    Some(i) => items.get_mut(i),
                    None => None,
                },
                None => None,
            },
        };
        match next {
            Some(next) => node = next,
            None => return,
        }
    }
    match target.strip_prefix("f:") {
        Some(field) => {
            if let Some(map) = node.as_object_mut() {
                map.remove(field);
            }
        }
        None => {
            if let Some(items) = node.as_array_mut()
                && let Some(i) = find_item(items, target)
            {
                items.remove(i);
            }
        }
    }
}

fn key_field(item: &str, segment: &str) -> bool {
    let (Some(key), Some(field)) = (item.strip_prefix("k:"), segment.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|k| k.contains_key(field))
}

fn to_fields_v1(fields: &BTreeSet<Path>) -> Value {
    let mut root = Value::Object(Map::new());
    for path in fields {
        let mut node = &mut root;
        for segment in path {
            node = node
                .as_object_mut()
                .map(|m| m.entry(segment.clone()).or_insert_with(|| json!({})))
                .expect("fieldsV1 nodes are maps");
        }
    }
    root
}

fn from_fields_v1(node: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(map) = node.as_object() else {
        return;
    };
    if map.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (segment, child) in map {
        if segment == "." {
            continue;
        }
        path.push(segment.clone());
        from_fields_v1(child, path, out);
        path.pop();
    }
}

/// `.spec.containers[name="web"].image`, as the API server names a field in a conflict.
fn render(path: &Path) -> String {
    let mut out = String::new();
    for segment in path {
        if let Some(field) = segment.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(key) = segment.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(key).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = segment.strip_prefix("v:") {
            out.push_str(&format!("[={value}]"));
        }
    }
    out
}

fn conflict(conflicts: &[(String, Path)]) -> Status {
    let causes: Vec<StatusCause> = conflicts
        .iter()
        .map(|(manager, path)| StatusCause {
            reason: "FieldManagerConflict".to_owned(),
            message: format!("conflict with \"{manager}\""),
            field: render(path),
        })
        .collect();
    let lines: Vec<String> = causes
        .iter()
        .map(|c| format!("- {}: {}", c.message, c.field))
        .collect();
    let noun = if causes.len() == 1 {
        "conflict"
    } else {
        "conflicts"
    };
    let mut status = Status::new(
        409,
        "Conflict",
        format!(
            "Apply failed with {} {noun}: {}",
            causes.len(),
            lines.join("\n")
        ),
    );
    status.causes = causes;
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips_and_names_keyed_items() {
        let object =
            json!({"spec": {"containers": [{"name": "a", "image": "x"}]}, "data": {"k": "v"}});
        let fields = field_set(&object, Schema::BuiltIn);
        let mut back = BTreeSet::new();
        from_fields_v1(&to_fields_v1(&fields), &mut Vec::new(), &mut back);
        assert_eq!(fields, back);
        let rendered: Vec<String> = fields.iter().map(render).collect();
        assert!(rendered.contains(&".spec.containers[name=\"a\"].image".to_owned()));
    }
}
