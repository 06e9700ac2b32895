//! The resource table: built-in kinds and resources registered from CustomResourceDefinitions.

use std::sync::Arc;

use serde_json::Value;

use crate::Status;

/// One servable resource at one group/version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceInfo {
    /// API group, "" for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    /// Lower-case plural used in paths, e.g. `configmaps`.
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    /// Whether `/status` is a subresource (then the main endpoint ignores status changes).
    pub has_status: bool,
    /// Fields besides `metadata.name` and `metadata.namespace` that field selectors may use,
    /// as dotted paths (`spec.nodeName`).
    pub selectable_fields: Vec<String>,
    /// Discovery categories, e.g. `all` for `kubectl get all`.
    pub categories: Vec<String>,
    /// Where the replica counts are, if `/scale` is a subresource.
    pub scale: Option<ScalePaths>,
    /// A CRD's `additionalPrinterColumns`, shown by `kubectl get`.
    pub printer_columns: Vec<PrinterColumn>,
    /// A CRD version's `openAPIV3Schema`, for the list semantics server-side apply reads from
    /// it (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`); `None` for built-in kinds.
    pub schema: Option<Arc<Value>>,
    /// The rule `metadata.name` follows.
    pub name_rule: NameRule,
}

/// One `additionalPrinterColumns` entry of a CRD version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrinterColumn {
    pub name: String,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean` or `date`.
    pub kind: String,
    /// JSON pointer made from the column's simple `jsonPath` (`.spec.size` → `/spec/size`).
    pub pointer: String,
}

/// Where a scalable resource keeps its replica counts and selector (JSON pointers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    /// A `LabelSelector` object or a selector string.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of Deployments, ReplicaSets and StatefulSets.
    pub fn workload() -> ScalePaths {
        ScalePaths {
            spec_replicas: "/spec/replicas".to_owned(),
            status_replicas: "/status/replicas".to_owned(),
            label_selector: Some("/spec/selector".to_owned()),
        }
    }

    /// The paths a CRD's `subresources.scale` declares (`.spec.replicas` style).
    pub fn from_crd(scale: &Value) -> Option<ScalePaths> {
        let pointer = |key: &str| {
            scale
                .get(key)
                .and_then(Value::as_str)
                .map(|path| path.trim_start_matches('.').replace('.', "/"))
                .map(|path| format!("/{path}"))
        };
        Some(ScalePaths {
            spec_replicas: pointer("specReplicasPath")?,
            status_replicas: pointer("statusReplicasPath")?,
            label_selector: pointer("labelSelectorPath"),
        })
    }
}

/// Which rule a kind's `metadata.name` follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// A DNS-1123 subdomain: most kinds, custom resources included.
    Subdomain,
    /// A DNS-1123 label: namespaces and services.
    Label,
    /// Only a path segment: RBAC roles and bindings, core `v1` Events.
    PathSegment,
}

impl ResourceInfo {
    /// `v1` or `group/version`, as in an object's `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Identifies the stored objects, independent of the version they are served at.
    pub fn storage_key(&self) -> String {
        format!("{}/{}", self.group, self.plural)
    }

    /// `ConfigMap` or `Lease.coordination.k8s.io`, as the API server names kinds in messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `configmaps` or `deployments.apps`, as the API server names resources in messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    has_status: bool,
}

const fn builtin(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    has_status: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        short_names,
        namespaced,
        has_status,
    }
}

const BUILTINS: &[Builtin] = &[
    builtin("", "v1", "Namespace", "namespaces", &["ns"], false, true),
    builtin("", "v1", "Pod", "pods", &["po"], true, true),
    builtin("", "v1", "ConfigMap", "configmaps", &["cm"], true, false),
    builtin("", "v1", "Secret", "secrets", &[], true, false),
    builtin("", "v1", "Service", "services", &["svc"], true, true),
    builtin(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        &["sa"],
        true,
        false,
    ),
    builtin("", "v1", "Node", "nodes", &["no"], false, true),
    builtin("", "v1", "Event", "events", &["ev"], true, false),
    builtin("", "v1", "Endpoints", "endpoints", &["ep"], true, false),
    builtin("events.k8s.io", "v1", "Event", "events", &[], true, false),
    builtin(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        &["deploy"],
        true,
        true,
    ),
    builtin(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        &["rs"],
        true,
        true,
    ),
    builtin(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        &["sts"],
        true,
        true,
    ),
    builtin("apps", "v1", "DaemonSet", "daemonsets", &["ds"], true, true),
    builtin("batch", "v1", "Job", "jobs", &[], true, true),
    builtin(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        &[],
        true,
        false,
    ),
    // RBAC objects are stored and served, not enforced: the server has no authentication.
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        &[],
        false,
        false,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        &[],
        false,
        false,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        &[],
        true,
        false,
    ),
    builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        &[],
        true,
        false,
    ),
    builtin(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        &["ing"],
        true,
        true,
    ),
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        &[],
        false,
        false,
    ),
    builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        &[],
        false,
        false,
    ),
    builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        &["crd", "crds"],
        false,
        true,
    ),
];

/// The extra selectable fields of built-in kinds, as the API server registers them.
fn builtin_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "Pod") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "Secret") => &["type"],
        ("", "Namespace") => &["status.phase"],
        ("", "Node") => &["spec.unschedulable"],
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ("apps", "ReplicaSet") => &["status.replicas"],
        ("batch", "Job") => &["status.successful"],
        _ => &[],
    }
}

/// The built-in resources every server starts with.
pub(crate) fn builtins() -> Vec<ResourceInfo> {
    BUILTINS
        .iter()
        .map(|b| ResourceInfo {
            group: b.group.to_owned(),
            version: b.version.to_owned(),
            kind: b.kind.to_owned(),
            plural: b.plural.to_owned(),
            singular: b.kind.to_lowercase(),
            short_names: b.short_names.iter().map(|s| (*s).to_owned()).collect(),
            namespaced: b.namespaced,
            has_status: b.has_status,
            selectable_fields: builtin_fields(b.group, b.kind)
                .iter()
                .map(|f| (*f).to_owned())
                .collect(),
            categories: if matches!(
                b.plural,
                "pods"
                    | "services"
                    | "deployments"
                    | "replicasets"
                    | "statefulsets"
                    | "daemonsets"
                    | "jobs"
            ) {
                vec!["all".to_owned()]
            } else {
                Vec::new()
            },
            scale: matches!(b.plural, "deployments" | "replicasets" | "statefulsets")
                .then(ScalePaths::workload),
            printer_columns: Vec::new(),
            schema: None,
            name_rule: match (b.group, b.kind) {
                ("", "Namespace" | "Service") => NameRule::Label,
                ("rbac.authorization.k8s.io", _) | ("", "Event") => NameRule::PathSegment,
                _ => NameRule::Subdomain,
            },
        })
        .collect()
}

/// The annotation a CRD in a protected group (`k8s.io`, `kubernetes.io` and their subdomains)
/// must carry: a URL of the API review that approved it, or a reason starting `unapproved`.
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Refuses a CRD in a protected group without a valid approval annotation (422), as the API
/// server does (kubernetes/enhancements#1111).
fn check_api_approval(crd: &Value, group: &str) -> Result<(), Status> {
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|p| group == *p || group.ends_with(&format!(".{p}")));
    if !protected {
        return Ok(());
    }
    let field = format!("metadata.annotations[{API_APPROVED}]");
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = "CustomResourceDefinition.apiextensions.k8s.io";
    let see = "see https://github.com/kubernetes/enhancements/pull/1111";
    let refuse = |reason: &str, detail: String| {
        Err(Status::invalid_field(kind, name, &field, reason, &detail))
    };
    match crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(API_APPROVED))
        .and_then(Value::as_str)
    {
        None => refuse(
            "FieldValueRequired",
            format!(
                "Required value: protected groups must have approval annotation \"{API_APPROVED}\", {see}"
            ),
        ),
        Some(value)
            if value.starts_with("unapproved")
                || value.starts_with("https://")
                || value.starts_with("http://") =>
        {
            Ok(())
        }
        Some(value) => refuse(
            "FieldValueInvalid",
            format!(
                "Invalid value: {value:?}: protected groups must have approval annotation \"{API_APPROVED}\" with either a URL or a reason starting with \"unapproved\", {see}"
            ),
        ),
    }
}

/// The resources a CustomResourceDefinition declares: one per served version. Fails with 422 if
/// the definition lacks what the API server requires.
pub(crate) fn from_crd(crd: &Value) -> Result<Vec<ResourceInfo>, Status> {
    let spec = crd
        .get("spec")
        .ok_or_else(|| Status::invalid("CustomResourceDefinition: spec is required"))?;
    let text = |v: Option<&Value>, what: &str| -> Result<String, Status> {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| Status::invalid(format!("CustomResourceDefinition: {what} is required")))
    };
    let group = text(spec.get("group"), "spec.group")?;
    check_api_approval(crd, &group)?;
    let names = spec.get("names");
    let plural = text(names.and_then(|n| n.get("plural")), "spec.names.plural")?;
    let kind = text(names.and_then(|n| n.get("kind")), "spec.names.kind")?;
    let singular = names
        .and_then(|n| n.get("singular"))
        .and_then(Value::as_str)
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let strings = |field: &str| -> Vec<String> {
        names
            .and_then(|n| n.get(field))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strings("shortNames");
    let categories = strings("categories");
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => {
            return Err(Status::invalid(
                "CustomResourceDefinition: spec.scope must be Namespaced or Cluster",
            ));
        }
    };
    let expected_name = format!("{plural}.{group}");
    let name = crd.pointer("/metadata/name").and_then(Value::as_str);
    if name != Some(expected_name.as_str()) {
        return Err(Status::invalid(format!(
            "CustomResourceDefinition: metadata.name must be {expected_name:?}"
        )));
    }
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Status::invalid("CustomResourceDefinition: spec.versions is required"))?;
    let mut resources = Vec::new();
    for version in versions {
        if version.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version_name = text(version.get("name"), "spec.versions[].name")?;
        let has_status = version.pointer("/subresources/status").is_some();
        let scale = version
            .pointer("/subresources/scale")
            .and_then(ScalePaths::from_crd);
        let printer_columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|columns| {
                columns
                    .iter()
                    .filter_map(|c| {
                        let path = c.get("jsonPath")?.as_str()?;
                        Some(PrinterColumn {
                            name: c.get("name")?.as_str()?.to_owned(),
                            kind: c
                                .get("type")
                                .and_then(Value::as_str)
                                .unwrap_or("string")
                                .to_owned(),
                            pointer: format!("/{}", path.trim_start_matches('.').replace('.', "/")),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let selectable_fields = version
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                    .map(|path| path.trim_start_matches('.').to_owned())
                    .collect()
            })
            .unwrap_or_default();
        resources.push(ResourceInfo {
            group: group.clone(),
            version: version_name,
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: short_names.clone(),
            namespaced,
            has_status,
            selectable_fields,
            categories: categories.clone(),
            scale,
            printer_columns,
            schema: version
                .pointer("/schema/openAPIV3Schema")
                .map(|schema| Arc::new(schema.clone())),
            name_rule: NameRule::Subdomain,
        });
    }
    Ok(resources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_declares_one_resource_per_served_version() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "subresources": {"status": {}},
                     "selectableFields": [{"jsonPath": ".spec.color"}]},
                    {"name": "v1beta1", "served": false},
                ],
            },
        });
        let resources = from_crd(&crd).unwrap();
        assert_eq!(resources.len(), 1);
        let r = &resources[0];
        assert_eq!(r.api_version(), "example.com/v1");
        assert_eq!(r.singular, "widget");
        assert!(r.namespaced && r.has_status);
        assert_eq!(r.short_names, vec!["wd"]);
        assert_eq!(r.selectable_fields, vec!["spec.color"]);
    }

    #[test]
    fn crd_with_mismatched_name_is_invalid() {
        let crd = json!({
            "metadata": {"name": "wrong"},
            "spec": {"group": "example.com", "scope": "Cluster",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true}]},
        });
        assert_eq!(from_crd(&crd).unwrap_err().code, 422);
    }
}
