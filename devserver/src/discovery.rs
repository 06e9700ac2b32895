//! Discovery documents: /version, /api, /apis and the per group/version resource lists.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::resource::ResourceInfo;

/// `/version`: the Kubernetes version this server imitates.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "35",
        "gitVersion": "v1.35.0-kubewasm-dev",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": "kubewasm-devserver",
    })
}

/// `/api`: the core group's versions.
pub(crate) fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`: every non-core group.
pub(crate) fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .iter()
        .map(|(g, v)| group_json(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`: one group, if it exists.
pub(crate) fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = registry.groups();
    let (group, versions) = groups.iter().find(|(g, _)| g == name)?;
    let mut doc = group_json(group, versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources served there, with their
/// subresources, or `None` if nothing is served there.
pub(crate) fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources = registry.in_group_version(group, version);
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    let mut entries = Vec::new();
    for r in &resources {
        entries.push(resource_entry(r));
        if r.has_status {
            entries.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if r.scale.is_some() {
            entries.push(json!({
                "name": format!("{}/scale", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }))
}

fn resource_entry(r: &ResourceInfo) -> Value {
    json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": r.short_names,
        "categories": r.categories,
        "storageVersionHash": "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_resources_list_status_subresources() {
        let registry = Registry::with_builtins();
        let list = resource_list(&registry, "", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"configmaps"));
        assert!(names.contains(&"pods/status"));
        assert!(!names.contains(&"configmaps/status"));
    }

    #[test]
    fn groups_include_apps_but_not_core() {
        let doc = groups(&Registry::with_builtins());
        let names: Vec<&str> = doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        assert!(names.contains(&"apps"));
        assert!(!names.contains(&""));
        assert!(resource_list(&Registry::with_builtins(), "nope", "v1").is_none());
    }
}
