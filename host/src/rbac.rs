//! The RBAC a set of plugins needs, as the objects `kubectl apply -f -` takes: the namespace and
//! service account kubewasm runs as, a ClusterRole for cluster-wide access and a Role per
//! namespace for the rest, each bound to that service account.
//!
//! Every object is built as a k8s-openapi struct and serialised through serde (never by string
//! concatenation), gathered in one `v1` `List`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{GroupVersionKind, ObjectMeta};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

/// How a plugin uses a resource; each maps to the verbs it needs.
///
/// Subscriptions (events and cache reads) are [`Access::Read`]. Write access granted per plugin
/// adds a variant here with its verbs; nothing else in this module changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// The informer's list and watch, and a get for a single object.
    Read,
    /// Leader election's Lease: read it, create it the first time, renew and release it.
    Lease,
    /// Sharded leader election: the shards' Leases as [`Access::Lease`], and the member Leases
    /// each replica applies, lists and deletes on shutdown.
    ShardedLeases,
}

impl Access {
    /// The RBAC verbs this access needs.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Access::Read => &["get", "list", "watch"],
            Access::Lease => &["get", "create", "update"],
            Access::ShardedLeases => &["get", "create", "update", "patch", "list", "delete"],
        }
    }
}

/// What leader election needs: the Lease verbs in the Lease's namespace (more of them with
/// more than one shard).
pub fn leader_election_need(namespace: &str, shards: usize) -> Need {
    Need {
        group: "coordination.k8s.io".into(),
        version: "v1".into(),
        kind: "Lease".into(),
        namespace: Some(namespace.to_owned()),
        access: if shards > 1 {
            Access::ShardedLeases
        } else {
            Access::Lease
        },
    }
}

/// One resource a plugin uses, cluster-wide (`namespace: None`) or in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub access: Access,
}

/// Who the RBAC is for: the service account kubewasm runs as, and the name of the roles and
/// bindings.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Name of the ClusterRole, Roles and their bindings.
    pub name: String,
    /// Namespace of the service account.
    pub namespace: String,
    pub service_account: String,
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The objects `needs` call for, in the order `kubectl apply` must create them: the namespace
/// (unless it is `default` or a `kube-*` namespace, which exist already), the service account,
/// then each role followed by its binding. Plural names come from the kind
/// (`Deployment` -> `deployments`), as kubectl guesses them without discovery.
pub fn objects(identity: &Identity, needs: &[Need]) -> anyhow::Result<Vec<Value>> {
    objects_with_writes(identity, needs, &[])
}

/// [`objects`], with `writes` (the rules of the plugins' write grants, cluster-wide) added to
/// the ClusterRole.
pub fn objects_with_writes(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
) -> anyhow::Result<Vec<Value>> {
    // scope (None = cluster) -> api group -> plural -> verbs
    type Resources<'a> = BTreeMap<&'a str, BTreeMap<String, BTreeSet<&'static str>>>;
    let mut scopes: BTreeMap<Option<&str>, Resources> = BTreeMap::new();
    for need in needs {
        let gvk = GroupVersionKind::gvk(&need.group, &need.version, &need.kind);
        let plural = ApiResource::from_gvk(&gvk).plural;
        scopes
            .entry(need.namespace.as_deref())
            .or_default()
            .entry(need.group.as_str())
            .or_default()
            .entry(plural)
            .or_default()
            .extend(need.access.verbs());
    }

    let mut out = Vec::new();
    let ns = identity.namespace.as_str();
    if ns != "default" && !ns.starts_with("kube-") {
        out.push(serde_json::to_value(Namespace {
            metadata: named(ns, None),
            ..Default::default()
        })?);
    }
    out.push(serde_json::to_value(ServiceAccount {
        metadata: named(&identity.service_account, Some(ns)),
        ..Default::default()
    })?);
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: identity.service_account.clone(),
        namespace: Some(ns.to_owned()),
        ..Default::default()
    };
    if !writes.is_empty() {
        scopes.entry(None).or_default();
    }
    for (scope, groups) in &scopes {
        let mut rules = rules(groups);
        if scope.is_none() {
            rules.extend(writes.iter().cloned());
        }
        let rules = Some(rules);
        let metadata = named(&identity.name, *scope);
        let role_ref = |kind: &str| RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: kind.into(),
            name: identity.name.clone(),
        };
        match scope {
            None => {
                out.push(serde_json::to_value(ClusterRole {
                    metadata: metadata.clone(),
                    rules,
                    ..Default::default()
                })?);
                out.push(serde_json::to_value(ClusterRoleBinding {
                    metadata,
                    role_ref: role_ref("ClusterRole"),
                    subjects: Some(vec![subject.clone()]),
                })?);
            }
            Some(_) => {
                out.push(serde_json::to_value(Role {
                    metadata: metadata.clone(),
                    rules,
                })?);
                out.push(serde_json::to_value(RoleBinding {
                    metadata,
                    role_ref: role_ref("Role"),
                    subjects: Some(vec![subject.clone()]),
                })?);
            }
        }
    }
    Ok(out)
}

/// [`objects`] as one YAML document: a `v1` `List`, which `kubectl apply -f` takes whole.
pub fn manifests(identity: &Identity, needs: &[Need]) -> anyhow::Result<String> {
    manifests_with_writes(identity, needs, &[])
}

/// [`objects_with_writes`] as one YAML document.
pub fn manifests_with_writes(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
) -> anyhow::Result<String> {
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": objects_with_writes(identity, needs, writes)?,
    });
    Ok(serde_norway::to_string(&list)?)
}

/// One rule per API group and set of verbs, naming every resource that needs exactly those.
fn rules(groups: &BTreeMap<&str, BTreeMap<String, BTreeSet<&'static str>>>) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for (group, plurals) in groups {
        let mut by_verbs: BTreeMap<&BTreeSet<&str>, Vec<String>> = BTreeMap::new();
        for (plural, verbs) in plurals {
            by_verbs.entry(verbs).or_default().push(plural.clone());
        }
        for (verbs, resources) in by_verbs {
            rules.push(PolicyRule {
                api_groups: Some(vec![(*group).to_owned()]),
                resources: Some(resources),
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                ..Default::default()
            });
        }
    }
    rules
}

fn named(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..Default::default()
    }
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
            access: Access::Read,
        }
    }

    fn identity(namespace: &str) -> Identity {
        Identity {
            name: "kubewasm".into(),
            namespace: namespace.into(),
            service_account: "runner".into(),
        }
    }

    /// The YAML parsed back: every item, by kind and name.
    fn parse(yaml: &str) -> Vec<Value> {
        let list: Value = serde_norway::from_str(yaml).expect("valid YAML");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["apiVersion"], "v1");
        list["items"].as_array().expect("items").clone()
    }

    #[test]
    fn write_grants_add_their_rules_to_the_cluster_role() {
        let write = PolicyRule {
            api_groups: Some(vec!["apps".into()]),
            resources: Some(vec!["deployments".into()]),
            verbs: vec!["create".into(), "update".into()],
            ..Default::default()
        };
        let items = parse(
            &manifests_with_writes(
                &identity("default"),
                &[need("", "ConfigMap", Some("team-a"))],
                std::slice::from_ref(&write),
            )
            .unwrap(),
        );
        let cluster_role = items
            .iter()
            .find(|i| i["kind"] == "ClusterRole")
            .expect("a ClusterRole for the writes");
        assert_eq!(
            cluster_role["rules"],
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "update"]}])
        );
        let role = items.iter().find(|i| i["kind"] == "Role").expect("Role");
        assert_eq!(role["rules"][0]["resources"], json!(["configmaps"]));
    }

    #[test]
    fn roles_per_scope_bound_to_the_service_account() {
        let yaml = manifests(
            &identity("ops"),
            &[
                need("", "Pod", None),
                need("", "ConfigMap", None),
                need("apps", "Deployment", None),
                need("", "Secret", Some("team-a")),
                need("", "Pod", None),
            ],
        )
        .unwrap();
        let items = parse(&yaml);
        let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding"
            ]
        );
        assert_eq!(items[0]["metadata"]["name"], "ops");
        assert_eq!(
            items[1]["metadata"],
            json!({"name": "runner", "namespace": "ops"})
        );
        let cluster_role = &items[2];
        assert_eq!(cluster_role["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(
            cluster_role["rules"],
            json!([
                {"apiGroups": [""], "resources": ["configmaps", "pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
            ])
        );
        let subject = json!([{"kind": "ServiceAccount", "name": "runner", "namespace": "ops"}]);
        assert_eq!(items[3]["subjects"], subject);
        assert_eq!(
            items[3]["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kubewasm"})
        );
        assert_eq!(items[4]["metadata"]["namespace"], "team-a");
        assert_eq!(items[4]["rules"][0]["resources"], json!(["secrets"]));
        assert_eq!(items[5]["metadata"]["namespace"], "team-a");
        assert_eq!(items[5]["roleRef"]["kind"], "Role");
        assert_eq!(items[5]["subjects"], subject);
    }

    #[test]
    fn no_key_is_written_twice_in_an_object() {
        let yaml = manifests(&identity("ops"), &[need("", "Pod", None)]).unwrap();
        // An item starts with `- `: its first key follows, the others are indented by two.
        for item in yaml.split("\n- ").skip(1) {
            let keys: Vec<&str> = item
                .lines()
                .enumerate()
                .filter(|(at, l)| *at == 0 || (l.starts_with("  ") && !l.starts_with("   ")))
                .filter_map(|(_, l)| l.trim().split(':').next())
                .collect();
            assert!(
                keys.contains(&"kind") && keys.contains(&"apiVersion"),
                "{item}"
            );
            let unique: BTreeSet<&&str> = keys.iter().collect();
            assert_eq!(keys.len(), unique.len(), "repeated key in {item}");
        }
    }

    #[test]
    fn an_existing_namespace_is_not_created() {
        for ns in ["default", "kube-system"] {
            let items = parse(&manifests(&identity(ns), &[]).unwrap());
            let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
            assert_eq!(kinds, ["ServiceAccount"], "{ns}");
        }
    }

    #[test]
    fn each_access_brings_its_verbs() {
        assert_eq!(Access::Read.verbs(), ["get", "list", "watch"]);
        let items =
            parse(&manifests(&identity("default"), &[leader_election_need("default", 1)]).unwrap());
        assert_eq!(items[1]["kind"], "Role");
        assert_eq!(items[1]["metadata"]["namespace"], "default");
        assert_eq!(
            items[1]["rules"],
            json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]}])
        );
        let items =
            parse(&manifests(&identity("default"), &[leader_election_need("default", 4)]).unwrap());
        assert_eq!(
            items[1]["rules"][0]["verbs"],
            json!(["create", "delete", "get", "list", "patch", "update"])
        );
        let items = parse(
            &manifests(&identity("default"), &[need("example.com", "Backup", None)]).unwrap(),
        );
        assert_eq!(
            items[1]["rules"],
            json!([{"apiGroups": ["example.com"], "resources": ["backups"], "verbs": ["get", "list", "watch"]}])
        );
    }
}
