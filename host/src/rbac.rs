//! The RBAC rules a set of plugins needs: get, list and watch on exactly what they subscribe to.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use kube::api::{GroupVersionKind, ObjectMeta};
use kube::discovery::ApiResource;

/// One resource a plugin reads, cluster-wide (`namespace: None`) or in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
}

const VERBS: [&str; 3] = ["get", "list", "watch"];

/// A ClusterRole for cluster-wide needs and one Role per namespace for the rest, as YAML
/// documents. Plural names come from the kind (`Deployment` -> `deployments`), as kubectl does
/// without discovery.
pub fn manifests(name: &str, needs: &[Need]) -> anyhow::Result<String> {
    // namespace (None = cluster) -> api group -> plurals
    let mut scopes: BTreeMap<Option<&str>, BTreeMap<&str, BTreeSet<String>>> = BTreeMap::new();
    for need in needs {
        let gvk = GroupVersionKind::gvk(&need.group, &need.version, &need.kind);
        let plural = ApiResource::from_gvk(&gvk).plural;
        scopes
            .entry(need.namespace.as_deref())
            .or_default()
            .entry(need.group.as_str())
            .or_default()
            .insert(plural);
    }
    let rules = |groups: &BTreeMap<&str, BTreeSet<String>>| -> Vec<PolicyRule> {
        groups
            .iter()
            .map(|(group, plurals)| PolicyRule {
                api_groups: Some(vec![(*group).to_string()]),
                resources: Some(plurals.iter().cloned().collect()),
                verbs: VERBS.iter().map(|v| (*v).to_string()).collect(),
                ..Default::default()
            })
            .collect()
    };
    let mut docs = Vec::new();
    for (namespace, groups) in &scopes {
        let metadata = ObjectMeta {
            name: Some(name.to_string()),
            namespace: namespace.map(str::to_string),
            ..Default::default()
        };
        let doc = match namespace {
            None => serde_norway::to_string(&ClusterRole {
                metadata,
                rules: Some(rules(groups)),
                ..Default::default()
            })?,
            Some(_) => serde_norway::to_string(&Role {
                metadata,
                rules: Some(rules(groups)),
            })?,
        };
        docs.push(with_type_meta(&doc, namespace.is_none()));
    }
    Ok(docs.join("---\n"))
}

/// k8s-openapi leaves apiVersion/kind out of the serialised struct; put them first.
fn with_type_meta(doc: &str, cluster: bool) -> String {
    let kind = if cluster { "ClusterRole" } else { "Role" };
    format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\n{doc}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(group: &str, kind: &str, namespace: Option<&str>) -> Need {
        Need {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
        }
    }

    #[test]
    fn groups_resources_per_api_group_and_scope() {
        let yaml = manifests(
            "kubewasm",
            &[
                need("", "Pod", None),
                need("", "ConfigMap", None),
                need("apps", "Deployment", None),
                need("", "Secret", Some("team-a")),
                need("", "Pod", None),
            ],
        )
        .unwrap();
        let docs: Vec<serde_json::Value> = yaml
            .split("---\n")
            .map(|d| serde_norway::from_str(d).unwrap())
            .collect();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "ClusterRole");
        assert_eq!(docs[0]["rules"][0]["apiGroups"][0], "");
        assert_eq!(
            docs[0]["rules"][0]["resources"],
            serde_json::json!(["configmaps", "pods"])
        );
        assert_eq!(
            docs[0]["rules"][1]["resources"],
            serde_json::json!(["deployments"])
        );
        assert_eq!(
            docs[0]["rules"][1]["verbs"],
            serde_json::json!(["get", "list", "watch"])
        );
        assert_eq!(docs[1]["kind"], "Role");
        assert_eq!(docs[1]["metadata"]["namespace"], "team-a");
        assert_eq!(
            docs[1]["rules"][0]["resources"],
            serde_json::json!(["secrets"])
        );
    }
}
