//! The RBAC a set of plugins needs, as the objects `kubectl apply -f -` takes: the namespace and
//! service account kubewasm runs as, a ClusterRole for cluster-wide access and a Role per
//! namespace for the rest, each bound to that service account; with `[impersonation]`, each
//! writing plugin's own service account and role, and the host's right to impersonate exactly
//! those accounts.
//!
//! Every object is built as a k8s-openapi struct and serialised through serde (never by string
//! concatenation), gathered in one `v1` `List`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;
use kubewasm_runtime::model::resources::guess_plural;
use serde_json::{Value, json};

use kubewasm_runtime::{Namespace, PluginAccount};

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
pub fn leader_election_need(namespace: Namespace, shards: usize) -> Need {
    Need {
        group: "coordination.k8s.io".into(),
        version: "v1".into(),
        kind: "Lease".into(),
        namespace: Some(namespace),
        access: if shards > 1 {
            Access::ShardedLeases
        } else {
            Access::Lease
        },
    }
}

/// One resource a plugin uses, cluster-wide (`namespace: None`) or in one namespace (checked:
/// a Role is never made for a namespace the API server would refuse).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: Option<Namespace>,
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
/// the ClusterRole. Each resource is named by one rule only, with every verb any need or
/// write grant asks for on it.
pub fn objects_with_writes(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
) -> anyhow::Result<Vec<Value>> {
    objects_with_accounts(identity, needs, writes, &[])
}

/// One plugin whose requests impersonate its own service account, and the rules of its write
/// grants, which that account is given (and the host's account is not).
#[derive(Debug, Clone)]
pub struct PluginRbac {
    pub account: PluginAccount,
    pub rules: Vec<PolicyRule>,
}

/// [`objects_with_writes`], and for each of `plugins`: its service account, a ClusterRole
/// `NAME-plugin-PLUGIN` with exactly its write grants' rules and the binding to the account;
/// then, in each namespace of those accounts, a Role `NAME-impersonate` allowing the host's
/// account to `impersonate` exactly those accounts (by name), and its binding.
pub fn objects_with_accounts(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
    plugins: &[PluginRbac],
) -> anyhow::Result<Vec<Value>> {
    let mut out = host_objects(identity, needs, writes)?;
    let host_namespace = identity.namespace.as_str();
    let mut by_namespace: BTreeMap<&str, BTreeMap<&str, Resources>> = BTreeMap::new();
    for plugin in plugins {
        let namespace = plugin.account.namespace().as_str();
        let name = plugin.account.name();
        if namespace == host_namespace && name == identity.service_account {
            anyhow::bail!(
                "the host's service account {namespace}/{name} would also be a plugin's: \
                 choose another --service-account or [impersonation] namespace"
            );
        }
        let resources = by_namespace
            .entry(namespace)
            .or_default()
            .entry(name)
            .or_default();
        add_rules(resources, &plugin.rules);
    }
    for (namespace, accounts) in &by_namespace {
        if *namespace != host_namespace && !exists_already(namespace) {
            out.push(serde_json::to_value(
                k8s_openapi::api::core::v1::Namespace {
                    metadata: named(namespace, None),
                    ..Default::default()
                },
            )?);
        }
        for (account, resources) in accounts {
            out.push(serde_json::to_value(ServiceAccount {
                metadata: named(account, Some(namespace)),
                ..Default::default()
            })?);
            let role = format!("{}-{account}", identity.name);
            out.push(serde_json::to_value(ClusterRole {
                metadata: named(&role, None),
                rules: Some(rules(resources)),
                ..Default::default()
            })?);
            out.push(serde_json::to_value(ClusterRoleBinding {
                metadata: named(&role, None),
                role_ref: RoleRef {
                    api_group: RBAC_GROUP.into(),
                    kind: "ClusterRole".into(),
                    name: role.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: (*account).to_owned(),
                    namespace: Some((*namespace).to_owned()),
                    ..Default::default()
                }]),
            })?);
        }
        let role = format!("{}-impersonate", identity.name);
        out.push(serde_json::to_value(Role {
            metadata: named(&role, Some(namespace)),
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["serviceaccounts".into()]),
                resource_names: Some(accounts.keys().map(|a| (*a).to_owned()).collect()),
                verbs: vec!["impersonate".into()],
                ..Default::default()
            }]),
        })?);
        out.push(serde_json::to_value(RoleBinding {
            metadata: named(&role, Some(namespace)),
            role_ref: RoleRef {
                api_group: RBAC_GROUP.into(),
                kind: "Role".into(),
                name: role.clone(),
            },
            subjects: Some(vec![host_subject(identity)]),
        })?);
    }
    Ok(out)
}

/// The host's own objects: its namespace and account, and its roles for `needs` and `writes`.
fn host_objects(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
) -> anyhow::Result<Vec<Value>> {
    let mut scopes: BTreeMap<Option<&str>, Resources> = BTreeMap::new();
    for need in needs {
        let plural = guess_plural(&need.group, &need.version, &need.kind);
        scopes
            .entry(need.namespace.as_ref().map(Namespace::as_str))
            .or_default()
            .entry(need.group.clone())
            .or_default()
            .entry(plural)
            .or_default()
            .extend(need.access.verbs().iter().map(|v| (*v).to_owned()));
    }
    if !writes.is_empty() {
        add_rules(scopes.entry(None).or_default(), writes);
    }

    let mut out = Vec::new();
    let ns = identity.namespace.as_str();
    if !exists_already(ns) {
        out.push(serde_json::to_value(
            k8s_openapi::api::core::v1::Namespace {
                metadata: named(ns, None),
                ..Default::default()
            },
        )?);
    }
    out.push(serde_json::to_value(ServiceAccount {
        metadata: named(&identity.service_account, Some(ns)),
        ..Default::default()
    })?);
    let subject = host_subject(identity);
    for (scope, groups) in &scopes {
        let rules = Some(rules(groups));
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

/// Whether `namespace` is one every cluster has (`default`, `kube-*`), so it is not created.
fn exists_already(namespace: &str) -> bool {
    namespace == "default" || namespace.starts_with("kube-")
}

/// The host's service account as a binding's subject.
fn host_subject(identity: &Identity) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: identity.service_account.clone(),
        namespace: Some(identity.namespace.clone()),
        ..Default::default()
    }
}

/// Adds the verbs of `rules` to `resources`, by group and resource.
fn add_rules(resources: &mut Resources, rules: &[PolicyRule]) {
    for rule in rules {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                resources
                    .entry(group.clone())
                    .or_default()
                    .entry(resource.clone())
                    .or_default()
                    .extend(rule.verbs.iter().cloned());
            }
        }
    }
}

/// The verbs of one scope: by API group, by resource (`deployments`, `deployments/status`).
type Resources = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

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
    manifests_with_accounts(identity, needs, writes, &[])
}

/// [`objects_with_accounts`] as one YAML document.
pub fn manifests_with_accounts(
    identity: &Identity,
    needs: &[Need],
    writes: &[PolicyRule],
    plugins: &[PluginRbac],
) -> anyhow::Result<String> {
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": objects_with_accounts(identity, needs, writes, plugins)?,
    });
    Ok(crate::manifest_yaml::to_string(&list))
}

/// One rule per API group and set of verbs, naming every resource that needs exactly those: a
/// resource is in one rule only.
fn rules(groups: &Resources) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    for (group, plurals) in groups {
        let mut by_verbs: BTreeMap<&BTreeSet<String>, Vec<String>> = BTreeMap::new();
        for (plural, verbs) in plurals {
            by_verbs.entry(verbs).or_default().push(plural.clone());
        }
        for (verbs, resources) in by_verbs {
            rules.push(PolicyRule {
                api_groups: Some(vec![group.clone()]),
                resources: Some(resources),
                verbs: verbs.iter().cloned().collect(),
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
            namespace: namespace.map(|ns| Namespace::new(ns).unwrap()),
            access: Access::Read,
        }
    }

    fn ns(namespace: &str) -> Namespace {
        Namespace::new(namespace).unwrap()
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

    /// Two plugins granted the same writes, one also reading ConfigMaps: each resource is in
    /// one rule, with every verb, and no rule names a subresource that does not exist.
    #[test]
    fn one_rule_per_resource_and_only_subresources_that_exist() {
        use kubewasm_runtime::{ResourcePattern, WriteGrant, WriteGrants};
        let grant = |group: &str, kind: &str| {
            WriteGrant::new(ResourcePattern::new(group, kind), None).unwrap()
        };
        let plugin = WriteGrants::only(vec![
            grant("", "ConfigMap"),
            grant("", "Event"),
            grant("apps", "Deployment"),
        ]);
        let mut writes = plugin.rbac_rules();
        writes.extend(plugin.rbac_rules());
        let items = parse(
            &manifests_with_writes(
                &identity("default"),
                &[
                    need("", "ConfigMap", None),
                    need("apps", "Deployment", None),
                ],
                &writes,
            )
            .unwrap(),
        );
        let cluster_role = items.iter().find(|i| i["kind"] == "ClusterRole").unwrap();
        let rules = cluster_role["rules"].as_array().unwrap();
        let named: Vec<String> = rules
            .iter()
            .flat_map(|r| {
                let group = r["apiGroups"][0].as_str().unwrap().to_owned();
                r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(move |p| format!("{group}/{}", p.as_str().unwrap()))
            })
            .collect();
        let unique: BTreeSet<&String> = named.iter().collect();
        assert_eq!(named.len(), unique.len(), "{named:?}");
        assert_eq!(
            unique.into_iter().cloned().collect::<Vec<_>>(),
            [
                "/configmaps",
                "/events",
                "apps/deployments",
                "apps/deployments/status"
            ],
        );
        let configmaps = rules
            .iter()
            .find(|r| {
                r["resources"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("configmaps"))
            })
            .unwrap();
        assert_eq!(
            configmaps["verbs"],
            json!([
                "create", "delete", "get", "list", "patch", "update", "watch"
            ])
        );
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

    /// Each impersonated plugin gets its account and exactly its own write rules; the host
    /// gets none of those rules, only `impersonate` on exactly those accounts by name.
    #[test]
    fn impersonated_plugins_get_their_own_accounts_and_the_host_may_only_impersonate_them() {
        use kubewasm_runtime::{ResourcePattern, WriteGrant, WriteGrants};
        let plugin = |name: &str, group: &str, kind: &str, verbs: Option<Vec<String>>| {
            let grant = WriteGrant::new(ResourcePattern::new(group, kind), verbs).unwrap();
            PluginRbac {
                account: PluginAccount::for_plugin(&ns("plugins"), name).unwrap(),
                rules: WriteGrants::only(vec![grant]).rbac_rules(),
            }
        };
        let plugins = [
            plugin("mirror", "", "ConfigMap", None),
            plugin("scaler", "apps", "Deployment", Some(vec!["patch".into()])),
        ];
        let items = parse(
            &manifests_with_accounts(
                &identity("ops"),
                &[need("", "ConfigMap", None)],
                &[],
                &plugins,
            )
            .unwrap(),
        );
        let described: Vec<String> = items
            .iter()
            .map(|i| {
                let meta = &i["metadata"];
                match meta["namespace"].as_str() {
                    Some(ns) => format!("{} {ns}/{}", i["kind"].as_str().unwrap(), meta["name"]),
                    None => format!("{} {}", i["kind"].as_str().unwrap(), meta["name"]),
                }
            })
            .map(|d| d.replace('"', ""))
            .collect();
        assert_eq!(
            described,
            [
                "Namespace ops",
                "ServiceAccount ops/runner",
                "ClusterRole kubewasm",
                "ClusterRoleBinding kubewasm",
                "Namespace plugins",
                "ServiceAccount plugins/plugin-mirror",
                "ClusterRole kubewasm-plugin-mirror",
                "ClusterRoleBinding kubewasm-plugin-mirror",
                "ServiceAccount plugins/plugin-scaler",
                "ClusterRole kubewasm-plugin-scaler",
                "ClusterRoleBinding kubewasm-plugin-scaler",
                "Role plugins/kubewasm-impersonate",
                "RoleBinding plugins/kubewasm-impersonate",
            ]
        );
        // The host reads, and writes nothing itself.
        assert_eq!(
            items[2]["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
        );
        assert_eq!(
            items[6]["rules"],
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete", "patch", "update"]}])
        );
        assert_eq!(
            items[7]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "plugin-mirror", "namespace": "plugins"}])
        );
        assert_eq!(
            items[9]["rules"],
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]}])
        );
        assert_eq!(
            items[11]["rules"],
            json!([{
                "apiGroups": [""],
                "resources": ["serviceaccounts"],
                "resourceNames": ["plugin-mirror", "plugin-scaler"],
                "verbs": ["impersonate"],
            }])
        );
        assert_eq!(
            items[12]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "runner", "namespace": "ops"}])
        );
        assert_eq!(items[12]["roleRef"]["name"], "kubewasm-impersonate");

        // The host's own account is never a plugin's.
        let host = Identity {
            namespace: "plugins".into(),
            service_account: "plugin-mirror".into(),
            ..identity("plugins")
        };
        let err = objects_with_accounts(&host, &[], &[], &plugins[..1]).unwrap_err();
        assert!(err.to_string().contains("plugins/plugin-mirror"), "{err}");
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
        let items = parse(
            &manifests(
                &identity("default"),
                &[leader_election_need(ns("default"), 1)],
            )
            .unwrap(),
        );
        assert_eq!(items[1]["kind"], "Role");
        assert_eq!(items[1]["metadata"]["namespace"], "default");
        assert_eq!(
            items[1]["rules"],
            json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update"]}])
        );
        let items = parse(
            &manifests(
                &identity("default"),
                &[leader_election_need(ns("default"), 4)],
            )
            .unwrap(),
        );
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
