//! The `/scale` subresource: an `autoscaling/v1` Scale view of a resource's replica count.

use serde_json::{Value, json};

use crate::Status;
use crate::resource::{ResourceInfo, ScalePaths};

fn paths(resource: &ResourceInfo) -> Result<&ScalePaths, Status> {
    resource.scale.as_ref().ok_or_else(Status::unknown_resource)
}

/// The Scale object for `object`.
pub(crate) fn view(resource: &ResourceInfo, object: &Value) -> Result<Value, Status> {
    let paths = paths(resource)?;
    let meta = object.get("metadata").cloned().unwrap_or(Value::Null);
    let mut scale_meta = serde_json::Map::new();
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(field) {
            scale_meta.insert(field.to_owned(), v.clone());
        }
    }
    let replicas = |pointer: &str| object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({ "replicas": replicas(&paths.status_replicas) });
    if let Some(selector) = paths
        .label_selector
        .as_deref()
        .and_then(|p| object.pointer(p))
        .map(selector_string)
        .filter(|s| !s.is_empty())
    {
        status["selector"] = Value::String(selector);
    }
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": { "replicas": replicas(&paths.spec_replicas) },
        "status": status,
    }))
}

/// `object` with the replica count the requested Scale asks for.
pub(crate) fn apply(
    resource: &ResourceInfo,
    object: &Value,
    scale: &Value,
) -> Result<Value, Status> {
    let paths = paths(resource)?;
    if let Some(kind) = scale.get("kind").and_then(Value::as_str)
        && kind != "Scale"
    {
        return Err(Status::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Scale)"
        )));
    }
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if replicas < 0 {
        return Err(Status::invalid(
            "Scale: spec.replicas must be greater than or equal to 0",
        ));
    }
    let mut result = object.clone();
    set_pointer(&mut result, &paths.spec_replicas, Value::from(replicas))?;
    Ok(result)
}

/// Sets the value at a JSON pointer, creating intermediate objects.
fn set_pointer(target: &mut Value, pointer: &str, value: Value) -> Result<(), Status> {
    let mut current = target;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        if !current.is_object() {
            *current = json!({});
        }
        let map = current
            .as_object_mut()
            .ok_or_else(|| Status::internal("scale path is not an object"))?;
        if parts.peek().is_none() {
            map.insert(part.to_owned(), value);
            return Ok(());
        }
        current = map.entry(part.to_owned()).or_insert_with(|| json!({}));
    }
    Ok(())
}

/// A `LabelSelector` (or an already serialised selector) in selector syntax.
fn selector_string(selector: &Value) -> String {
    if let Some(text) = selector.as_str() {
        return text.to_owned();
    }
    let mut terms = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            terms.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    for expr in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = expr.get("key").and_then(Value::as_str).unwrap_or_default();
        let values: Vec<&str> = expr
            .get("values")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match expr.get("operator").and_then(Value::as_str) {
            Some("In") => terms.push(format!("{key} in ({})", values.join(","))),
            Some("NotIn") => terms.push(format!("{key} notin ({})", values.join(","))),
            Some("Exists") => terms.push(key.to_owned()),
            Some("DoesNotExist") => terms.push(format!("!{key}")),
            _ => {}
        }
    }
    terms.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployments() -> ResourceInfo {
        crate::resource::builtins()
            .into_iter()
            .find(|r| r.plural == "deployments")
            .unwrap()
    }

    #[test]
    fn view_reports_replicas_and_selector() {
        let deployment = json!({
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
            "status": {"replicas": 1},
        });
        let scale = view(&deployments(), &deployment).unwrap();
        assert_eq!(scale["spec"]["replicas"], 2);
        assert_eq!(scale["status"]["replicas"], 1);
        assert_eq!(scale["status"]["selector"], "app=web,tier in (a,b)");
        assert_eq!(scale["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn apply_sets_spec_replicas_only() {
        let deployment = json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "x": 1}});
        let scaled = apply(
            &deployments(),
            &deployment,
            &json!({"spec": {"replicas": 5}}),
        )
        .unwrap();
        assert_eq!(scaled["spec"], json!({"replicas": 5, "x": 1}));
        let negative = apply(
            &deployments(),
            &deployment,
            &json!({"spec": {"replicas": -1}}),
        );
        assert_eq!(negative.unwrap_err().code, 422);
    }

    #[test]
    fn crd_paths_become_pointers() {
        let paths = ScalePaths::from_crd(&json!({
            "specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size",
            "labelSelectorPath": ".status.selector"}))
        .unwrap();
        assert_eq!(paths.spec_replicas, "/spec/size");
        assert_eq!(paths.label_selector.as_deref(), Some("/status/selector"));
    }
}
