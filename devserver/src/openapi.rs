//! A minimal OpenAPI description: per group/version, the PATCH operations with their
//! `fieldValidation` parameter, which is what kubectl checks before `apply` and `create -f`
//! to choose server-side validation. No schemas are published.
//!
//! OpenAPI v3 is served per group/version. The v2 document (`/openapi/v2`) is what kubectl falls
//! back to for a kind no v3 document names, such as the items of a `kind: List`; it is served
//! as JSON, or, when the client asks for protobuf (kubectl does), as a protobuf `Document` that
//! holds only the version and title: no kind is declared there, so kubectl validates on its side.

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
        "info": { "title": TITLE, "version": VERSION },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}

/// The media types a client asks `/openapi/v2` in protobuf with: kubectl sends the first (an `@`
/// that is not valid in a media type), newer clients the second.
pub(crate) const V2_PROTOBUF_ACCEPTED: [&str; 2] = [
    "com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The content type of the protobuf answer, as the API server sends it (Go's media type parser
/// refuses the `@` form).
pub(crate) const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const TITLE: &str = "Kubernetes (kubewasm development server)";
const VERSION: &str = "v1.35.0";

/// `/openapi/v2` as JSON: every resource's PATCH operation, in Swagger 2.0 form.
pub(crate) fn v2_json(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for resource in registry.all() {
        let mut operation = patch_operation(&resource);
        if let Some(parameters) = operation["parameters"].as_array_mut() {
            for parameter in parameters {
                parameter["type"] = json!("string");
                if let Some(fields) = parameter.as_object_mut() {
                    fields.remove("schema");
                }
            }
        }
        paths.insert(object_path(&resource), json!({ "patch": operation }));
    }
    json!({
        "swagger": "2.0",
        "info": { "title": TITLE, "version": VERSION },
        "paths": paths,
        "definitions": {},
    })
}

/// `/openapi/v2` as protobuf (gnostic's `openapi_v2.Document`): `swagger` (field 1) and `info`
/// (field 2: `title` 1, `version` 2), nothing else.
pub(crate) fn v2_protobuf() -> Vec<u8> {
    fn string_field(out: &mut Vec<u8>, number: u8, value: &[u8]) {
        out.push(number << 3 | 2);
        push_varint(out, value.len());
        out.extend_from_slice(value);
    }
    fn push_varint(out: &mut Vec<u8>, mut n: usize) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    let mut info = Vec::new();
    string_field(&mut info, 1, TITLE.as_bytes());
    string_field(&mut info, 2, VERSION.as_bytes());
    let mut document = Vec::new();
    string_field(&mut document, 1, b"2.0");
    string_field(&mut document, 2, &info);
    document
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

    #[test]
    fn v2_names_every_resource_and_its_protobuf_form_holds_the_version() {
        let registry = Registry::with_builtins();
        let doc = v2_json(&registry);
        assert_eq!(doc["swagger"], "2.0");
        let op = &doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ClusterRole");
        assert_eq!(op["parameters"][2]["name"], "fieldValidation");
        assert_eq!(op["parameters"][2]["type"], "string");

        let proto = v2_protobuf();
        // field 1 (string) "2.0", then field 2 (message) holding the title and version.
        assert_eq!(&proto[..5], &[0x0a, 3, b'2', b'.', b'0']);
        assert_eq!(proto[5], 0x12);
        let info_len = usize::from(proto[6]);
        assert_eq!(proto.len(), 7 + info_len);
        let info = &proto[7..];
        assert_eq!(info[0], 0x0a);
        let title_len = usize::from(info[1]);
        assert_eq!(&info[2..2 + title_len], TITLE.as_bytes());
        assert_eq!(&info[2 + title_len + 2..], VERSION.as_bytes());
    }
}
