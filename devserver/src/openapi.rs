//! A minimal OpenAPI v3 description: per group/version, the PATCH operations with their
//! `fieldValidation` parameter, which is what kubectl checks before `apply` and `create -f`
//! to choose server-side validation. No schemas are published.

use serde_json::{Map, Value, json};

use crate::registry::Registry;
use crate::resource::ResourceInfo;

/// `/openapi/v3`: the index of group/version documents.
pub(crate) fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (prefix, group, version) in group_versions(registry) {
        let key = if group.is_empty() {
            format!("{prefix}/{version}")
        } else {
            format!("{prefix}/{group}/{version}")
        };
        paths.insert(
            key.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{key}") }),
        );
    }
    json!({ "paths": paths })
}

fn group_versions(registry: &Registry) -> Vec<(&'static str, String, String)> {
    let mut all = vec![("api", String::new(), "v1".to_owned())];
    for (group, versions) in registry.groups() {
        for version in versions {
            all.push(("apis", group.clone(), version));
        }
    }
    all
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`, if that group/version exists.
pub(crate) fn document(registry: &Registry, path: &str) -> Option<Value> {
    let rest = path
        .trim_start_matches("/openapi/v3/")
        .trim_end_matches('/');
    let (group, version) = match rest.split('/').collect::<Vec<_>>().as_slice() {
        ["api", version] => (String::new(), (*version).to_owned()),
        ["apis", group, version] => ((*group).to_owned(), (*version).to_owned()),
        _ => return None,
    };
    let resources = registry.in_group_version(&group, &version);
    if resources.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for resource in &resources {
        paths.insert(
            object_path(resource),
            json!({ "patch": patch_operation(resource) }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes (kubewasm development server)", "version": "v1.35.0" },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}

fn object_path(resource: &ResourceInfo) -> String {
    let prefix = if resource.group.is_empty() {
        format!("/api/{}", resource.version)
    } else {
        format!("/apis/{}/{}", resource.group, resource.version)
    };
    if resource.namespaced {
        format!(
            "{prefix}/namespaces/{{namespace}}/{}/{{name}}",
            resource.plural
        )
    } else {
        format!("{prefix}/{}/{{name}}", resource.plural)
    }
}

fn patch_operation(resource: &ResourceInfo) -> Value {
    let query = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string" } });
    json!({
        "operationId": format!("patch{}", resource.kind),
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {
            "group": resource.group, "version": resource.version, "kind": resource.kind,
        },
        "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")],
        "responses": { "200": { "description": "OK" } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_declare_field_validation_for_each_kind() {
        let registry = Registry::with_builtins();
        let index = index(&registry);
        assert!(index["paths"]["apis/apps/v1"]["serverRelativeURL"].is_string());
        let doc = document(&registry, "/openapi/v3/api/v1").unwrap();
        let op = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
        let params: Vec<&str> = op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(params.contains(&"fieldValidation"));
        assert!(document(&registry, "/openapi/v3/apis/nope/v1").is_none());
    }
}
