//! Whether a policy's webhooks stay inside its plugin's grants, checked when it declares them
//! (at load, and by `kubewasm webhooks` and `check`): the API server sends a webhook every
//! object its rules match, in clear text, so a rule is a read of what it matches, and a
//! mutation a write.
//!
//! - A validating webhook may match only resources the plugin may read (its `grants`).
//! - A mutating webhook may match only resources it may read and patch (its `writes` with the
//!   verb `patch`; `status` for a `/status` subresource): the host answers a mutation with a
//!   JSONPatch, which the API server applies to the object as a patch would.
//! - Secrets only when named, as everywhere: a `*` never grants them, so a rule that can match
//!   core Secrets (`*` resources in the core group or in `*` groups, or `secrets`) needs a
//!   grant naming `Secret` (and, to mutate, a write grant naming it).
//! - A `*` (groups or resources) is allowed only when the grants cover everything it can
//!   match: every kind of the group (`apps/*`), or of every group (`*`).
//!
//! Rules name resources by plural (`configmaps`, `pods/status`), grants by kind: the built-in
//! kinds are known without a cluster (from k8s-openapi's types); any other resource is
//! resolved by the caller's discovery (the host, when it loads a plugin), or by the kinds
//! the grants name in its group (the plural kubectl guesses for each), or covered by a grant
//! of its whole group; otherwise it is refused, saying so. A subresource is checked as its
//! resource's kind.

use std::collections::BTreeMap;

use k8s_openapi::Resource as _;

use crate::admission::declaration::{Declaration, Rule, WebhookKind};
use crate::client::{WriteGrants, WriteVerb};
use crate::model::declared::Gvk;
use crate::model::grants::{Grants, ResourcePattern};

/// Plurals resolved to kinds by discovery, by `(group, plural)`.
pub type Discovered = BTreeMap<(String, String), String>;

/// The kind of the built-in resource `plural` of `group`, without a cluster.
pub fn builtin_kind(group: &str, plural: &str) -> Option<&'static str> {
    BUILTIN
        .iter()
        .find(|(g, p, _)| *g == group && *p == plural)
        .map(|(_, _, k)| *k)
}

macro_rules! builtin {
    ($($t:path,)*) => {
        /// `(group, plural, kind)` of every built-in resource k8s-openapi knows (the
        /// subresource types, Scale, Binding, Eviction, TokenRequest, left out).
        const BUILTIN: &[(&str, &str, &str)] = &[
            $((<$t>::GROUP, <$t>::URL_PATH_SEGMENT, <$t>::KIND),)*
        ];
    };
}

builtin!(
    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
    k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicy,
    k8s_openapi::api::admissionregistration::v1beta1::MutatingAdmissionPolicyBinding,
    k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion,
    k8s_openapi::api::apps::v1::ControllerRevision,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::apps::v1::StatefulSet,
    k8s_openapi::api::authentication::v1::SelfSubjectReview,
    k8s_openapi::api::authentication::v1::TokenReview,
    k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
    k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
    k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
    k8s_openapi::api::authorization::v1::SubjectAccessReview,
    k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    k8s_openapi::api::batch::v1::CronJob,
    k8s_openapi::api::batch::v1::Job,
    k8s_openapi::api::certificates::v1::CertificateSigningRequest,
    k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle,
    k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle,
    k8s_openapi::api::certificates::v1beta1::PodCertificateRequest,
    k8s_openapi::api::coordination::v1::Lease,
    k8s_openapi::api::coordination::v1alpha2::LeaseCandidate,
    k8s_openapi::api::coordination::v1beta1::LeaseCandidate,
    k8s_openapi::api::core::v1::ComponentStatus,
    k8s_openapi::api::core::v1::ConfigMap,
    k8s_openapi::api::core::v1::Endpoints,
    k8s_openapi::api::core::v1::Event,
    k8s_openapi::api::core::v1::LimitRange,
    k8s_openapi::api::core::v1::Namespace,
    k8s_openapi::api::core::v1::Node,
    k8s_openapi::api::core::v1::PersistentVolume,
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::PodTemplate,
    k8s_openapi::api::core::v1::ReplicationController,
    k8s_openapi::api::core::v1::ResourceQuota,
    k8s_openapi::api::core::v1::Secret,
    k8s_openapi::api::core::v1::Service,
    k8s_openapi::api::core::v1::ServiceAccount,
    k8s_openapi::api::discovery::v1::EndpointSlice,
    k8s_openapi::api::events::v1::Event,
    k8s_openapi::api::flowcontrol::v1::FlowSchema,
    k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    k8s_openapi::api::networking::v1::Ingress,
    k8s_openapi::api::networking::v1::IngressClass,
    k8s_openapi::api::networking::v1::IPAddress,
    k8s_openapi::api::networking::v1::NetworkPolicy,
    k8s_openapi::api::networking::v1::ServiceCIDR,
    k8s_openapi::api::networking::v1beta1::IPAddress,
    k8s_openapi::api::networking::v1beta1::ServiceCIDR,
    k8s_openapi::api::node::v1::RuntimeClass,
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    k8s_openapi::api::rbac::v1::ClusterRole,
    k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    k8s_openapi::api::rbac::v1::Role,
    k8s_openapi::api::rbac::v1::RoleBinding,
    k8s_openapi::api::resource::v1::DeviceClass,
    k8s_openapi::api::resource::v1::ResourceClaim,
    k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    k8s_openapi::api::resource::v1::ResourceSlice,
    k8s_openapi::api::resource::v1alpha3::DeviceTaintRule,
    k8s_openapi::api::resource::v1beta1::DeviceClass,
    k8s_openapi::api::resource::v1beta1::ResourceClaim,
    k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate,
    k8s_openapi::api::resource::v1beta1::ResourceSlice,
    k8s_openapi::api::resource::v1beta2::DeviceClass,
    k8s_openapi::api::resource::v1beta2::ResourceClaim,
    k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate,
    k8s_openapi::api::resource::v1beta2::ResourceSlice,
    k8s_openapi::api::scheduling::v1::PriorityClass,
    k8s_openapi::api::scheduling::v1alpha1::Workload,
    k8s_openapi::api::storage::v1::CSIDriver,
    k8s_openapi::api::storage::v1::CSINode,
    k8s_openapi::api::storage::v1::CSIStorageCapacity,
    k8s_openapi::api::storage::v1::StorageClass,
    k8s_openapi::api::storage::v1::VolumeAttachment,
    k8s_openapi::api::storage::v1::VolumeAttributesClass,
    k8s_openapi::api::storage::v1beta1::VolumeAttributesClass,
    k8s_openapi::api::storagemigration::v1beta1::StorageVersionMigration,
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
);

/// The concrete resources (`(group, plural)`, subresources cut) of `declaration`'s rules
/// that are not built in: what a caller with a cluster resolves by discovery.
pub fn unresolved(declaration: &Declaration) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in [WebhookKind::Validating, WebhookKind::Mutating] {
        for rule in declaration.webhook(kind).iter().flat_map(|h| &h.rules) {
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let (plural, _) = split(resource);
                    if group != "*"
                        && plural != "*"
                        && builtin_kind(group, plural).is_none()
                        && !out.iter().any(|(g, p)| g == group && p == plural)
                    {
                        out.push((group.clone(), plural.to_owned()));
                    }
                }
            }
        }
    }
    out
}

/// Checks every rule of `declaration` against the plugin's read `grants` and `writes`; the
/// error names the webhook, the rule, the resource and the grant it needs as the author
/// writes it in `[plugins.KEY]` (`key`: the plugin's config key, its file's stem).
pub fn check(
    declaration: &Declaration,
    grants: &Grants,
    writes: &WriteGrants,
    discovered: &Discovered,
    key: &str,
) -> Result<(), String> {
    for kind in [WebhookKind::Validating, WebhookKind::Mutating] {
        let Some(hook) = declaration.webhook(kind) else {
            continue;
        };
        for (i, rule) in hook.rules.iter().enumerate() {
            check_rule(kind, rule, grants, writes, discovered).map_err(|need| {
                format!(
                    "the {} webhook's rule {i} {}; {}",
                    kind.as_str(),
                    need.what,
                    need.remedy(key)
                )
            })?;
        }
    }
    Ok(())
}

/// What a rule matches that its grants do not cover.
struct Need {
    /// "matches `secrets` (v1 Secret)".
    what: String,
    /// The read grant missing (as written in `grants`), if any.
    read: Option<String>,
    /// The write grant missing (as written in `writes`), if any.
    write: Option<String>,
    /// Why the resource could not be resolved, instead of a grant.
    unresolved: bool,
}

impl Need {
    fn remedy(&self, key: &str) -> String {
        if self.unresolved {
            return format!(
                "its kind is unknown without the cluster's discovery: load it in a host \
                 connected to the cluster, or grant its whole group in [plugins.{key}]"
            );
        }
        let mut adds = Vec::new();
        if let Some(read) = &self.read {
            adds.push(format!("grants = [..., {read:?}]"));
        }
        if let Some(write) = &self.write {
            adds.push(format!("writes = [..., {write:?}]"));
        }
        format!(
            "it needs {} in [plugins.{key}] of the host's config",
            adds.join(" and ")
        )
    }
}

/// `pods/status` as (`pods`, `Some("status")`).
fn split(resource: &str) -> (&str, Option<&str>) {
    match resource.split_once('/') {
        Some((r, sub)) => (r, Some(sub)),
        None => (resource, None),
    }
}

/// A grant as the config names it: `ConfigMap`, `apps/Deployment`, `core/*`, `apps/*`, `*`.
fn grant_text(group: &str, kind: &str) -> String {
    match (group, kind) {
        ("*", _) => "*".into(),
        ("", "*") => "core/*".into(),
        ("", kind) => kind.into(),
        (group, kind) => format!("{group}/{kind}"),
    }
}

fn gvk(group: &str, kind: &str) -> Gvk {
    Gvk {
        group: group.into(),
        version: String::new(),
        kind: kind.into(),
    }
}

const SECRET: (&str, &str) = ("", "Secret");

fn check_rule(
    kind: WebhookKind,
    rule: &Rule,
    grants: &Grants,
    writes: &WriteGrants,
    discovered: &Discovered,
) -> Result<(), Need> {
    let mutating = kind == WebhookKind::Mutating;
    for group in &rule.api_groups {
        for resource in &rule.resources {
            let (plural, sub) = split(resource);
            // The write verbs a mutation of this (sub)resource is, and how a grant names them.
            let verbs: &[(WriteVerb, &str)] = match sub {
                None => &[(WriteVerb::Patch, "patch")],
                Some("status") => &[(WriteVerb::PatchStatus, "status")],
                Some("*") => &[
                    (WriteVerb::Patch, "patch"),
                    (WriteVerb::PatchStatus, "status"),
                ],
                Some(_) => &[(WriteVerb::Patch, "patch")],
            };
            let verb_text = verbs.iter().map(|(_, v)| *v).collect::<Vec<_>>().join(",");
            // Every (group, kind) the grants must cover: `*` for any kind of the group.
            let mut covered: Vec<(String, String)> = Vec::new();
            let what;
            if group == "*" || plural == "*" {
                covered.push((group.clone(), "*".into()));
                if (group == "*" || group.is_empty()) && matches!(plural, "*" | "secrets") {
                    covered.push((SECRET.0.into(), SECRET.1.into()));
                }
                what = format!(
                    "matches `{resource}` in {}, which {}",
                    if group == "*" {
                        "every API group".to_owned()
                    } else {
                        format!("the API group {group:?}")
                    },
                    if covered.len() > 1 {
                        "includes Secrets"
                    } else {
                        "only a grant of every kind there covers"
                    }
                );
            } else {
                let resolved = builtin_kind(group, plural)
                    .map(str::to_owned)
                    .or_else(|| discovered.get(&(group.clone(), plural.to_owned())).cloned())
                    .or_else(|| guess(group, plural, grants, writes));
                match resolved {
                    Some(k) => {
                        what = format!("matches `{resource}` ({})", grant_text(group, &k));
                        covered.push((group.clone(), k));
                    }
                    None => {
                        // Covered whatever its kind by a grant of the whole (non-core) group.
                        let whole = gvk(group, "*");
                        let read_ok = grants.allows(&whole);
                        let write_ok = verbs.iter().all(|(v, _)| writes.allows(&whole, *v));
                        if !group.is_empty() && read_ok && (!mutating || write_ok) {
                            continue;
                        }
                        return Err(Need {
                            what: format!(
                                "matches `{resource}` of the API group {group:?}, which names no \
                                 kind the host knows"
                            ),
                            read: None,
                            write: None,
                            unresolved: true,
                        });
                    }
                }
            }
            for (g, k) in &covered {
                let target = gvk(g, k);
                let read = (!grants.allows(&target)).then(|| grant_text(g, k));
                let write = (mutating && !verbs.iter().all(|(v, _)| writes.allows(&target, *v)))
                    .then(|| format!("{}:{verb_text}", grant_text(g, k)));
                if read.is_some() || write.is_some() {
                    return Err(Need {
                        what: what.clone(),
                        read,
                        write,
                        unresolved: false,
                    });
                }
            }
        }
    }
    Ok(())
}

/// The kind of `plural` in `group` among the kinds the grants name there, by the plural
/// kubectl would guess for each (a custom resource without a cluster to ask).
fn guess(group: &str, plural: &str, grants: &Grants, writes: &WriteGrants) -> Option<String> {
    grants
        .patterns()
        .iter()
        .chain(writes.patterns())
        .filter(|p: &&ResourcePattern| p.group == group && p.kind != "*")
        .find(|p| crate::model::resources::guess_plural(group, "v1", &p.kind) == plural)
        .map(|p| p.kind.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::declaration::*;
    use crate::client::WriteGrant;

    fn declaration(kind: WebhookKind, groups: &[&str], resources: &[&str]) -> Declaration {
        let hook = Webhook {
            rules: vec![Rule {
                operations: vec![Operation::Create],
                api_groups: groups.iter().map(|s| s.to_string()).collect(),
                api_versions: vec!["*".into()],
                resources: resources.iter().map(|s| s.to_string()).collect(),
                scope: Scope::Any,
            }],
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: 10,
            namespace_selector: None,
            object_selector: None,
        };
        match kind {
            WebhookKind::Validating => Declaration {
                validating: Some(hook),
                mutating: None,
            },
            WebhookKind::Mutating => Declaration {
                validating: None,
                mutating: Some(hook),
            },
        }
    }

    fn reads(patterns: &[(&str, &str)]) -> Grants {
        Grants::only(
            patterns
                .iter()
                .map(|(g, k)| ResourcePattern::new(*g, *k))
                .collect(),
        )
    }

    fn writes(patterns: &[(&str, &str, &[&str])]) -> WriteGrants {
        WriteGrants::only(
            patterns
                .iter()
                .map(|(g, k, v)| {
                    WriteGrant::new(
                        ResourcePattern::new(*g, *k),
                        Some(v.iter().map(|s| s.to_string()).collect()),
                    )
                    .unwrap()
                })
                .collect(),
        )
    }

    fn run(d: &Declaration, g: &Grants, w: &WriteGrants) -> Result<(), String> {
        check(d, g, w, &Discovered::new(), "probe")
    }

    #[test]
    fn the_built_in_table_knows_the_common_kinds() {
        assert_eq!(builtin_kind("", "configmaps"), Some("ConfigMap"));
        assert_eq!(builtin_kind("", "secrets"), Some("Secret"));
        assert_eq!(builtin_kind("apps", "deployments"), Some("Deployment"));
        assert_eq!(
            builtin_kind("networking.k8s.io", "ingresses"),
            Some("Ingress")
        );
        assert_eq!(
            builtin_kind("apiextensions.k8s.io", "customresourcedefinitions"),
            Some("CustomResourceDefinition")
        );
        assert_eq!(builtin_kind("", "deployments"), None);
    }

    #[test]
    fn secrets_need_a_grant_naming_them() {
        let d = declaration(WebhookKind::Validating, &[""], &["secrets", "configmaps"]);
        let e = run(&d, &Grants::all_but_secrets(), &WriteGrants::none()).unwrap_err();
        assert_eq!(
            e,
            "the validating webhook's rule 0 matches `secrets` (Secret); it needs \
             grants = [..., \"Secret\"] in [plugins.probe] of the host's config"
        );
        let granted = reads(&[("*", "*"), ("", "Secret")]);
        run(&d, &granted, &WriteGrants::none()).unwrap();
    }

    #[test]
    fn a_mutation_needs_patch_on_what_it_matches() {
        let d = declaration(WebhookKind::Mutating, &[""], &["configmaps"]);
        let e = run(&d, &Grants::all_but_secrets(), &WriteGrants::none()).unwrap_err();
        assert!(
            e.contains("the mutating webhook's rule 0 matches `configmaps` (ConfigMap)"),
            "{e}"
        );
        assert!(e.contains("writes = [..., \"ConfigMap:patch\"]"), "{e}");
        assert!(!e.contains("grants ="), "the read is granted: {e}");
        let create_only = writes(&[("", "ConfigMap", &["create"])]);
        assert!(run(&d, &Grants::all_but_secrets(), &create_only).is_err());
        let patch = writes(&[("", "ConfigMap", &["patch"])]);
        run(&d, &Grants::all_but_secrets(), &patch).unwrap();
        // Reading is needed too: a mutation is sent the object.
        let e = run(&d, &reads(&[("", "Pod")]), &patch).unwrap_err();
        assert!(e.contains("grants = [..., \"ConfigMap\"]"), "{e}");
        // A status subresource takes the `status` verb.
        let d = declaration(WebhookKind::Mutating, &[""], &["pods/status"]);
        let e = run(
            &d,
            &Grants::all_but_secrets(),
            &writes(&[("", "Pod", &["patch"])]),
        )
        .unwrap_err();
        assert!(e.contains("\"Pod:status\""), "{e}");
        run(
            &d,
            &Grants::all_but_secrets(),
            &writes(&[("", "Pod", &["status"])]),
        )
        .unwrap();
    }

    #[test]
    fn wildcards_need_grants_covering_all_they_match() {
        let any = declaration(WebhookKind::Validating, &["*"], &["*"]);
        let e = run(&any, &Grants::all_but_secrets(), &WriteGrants::none()).unwrap_err();
        assert!(e.contains("every API group, which includes Secrets"), "{e}");
        assert!(e.contains("grants = [..., \"Secret\"]"), "{e}");
        run(
            &any,
            &reads(&[("*", "*"), ("", "Secret")]),
            &WriteGrants::none(),
        )
        .unwrap();
        let core = declaration(WebhookKind::Validating, &[""], &["*"]);
        assert!(run(&core, &Grants::all_but_secrets(), &WriteGrants::none()).is_err());
        let apps = declaration(WebhookKind::Validating, &["apps"], &["*"]);
        run(&apps, &reads(&[("apps", "*")]), &WriteGrants::none()).unwrap();
        let e = run(
            &apps,
            &reads(&[("apps", "Deployment")]),
            &WriteGrants::none(),
        )
        .unwrap_err();
        assert!(e.contains("grants = [..., \"apps/*\"]"), "{e}");
        // `*` groups with a named resource: every group's kind must be readable.
        let cms = declaration(WebhookKind::Validating, &["*"], &["configmaps"]);
        assert!(run(&cms, &reads(&[("", "ConfigMap")]), &WriteGrants::none()).is_err());
        run(&cms, &Grants::all_but_secrets(), &WriteGrants::none()).unwrap();
    }

    #[test]
    fn a_custom_resource_is_resolved_by_discovery_the_grants_or_its_whole_group() {
        let d = declaration(WebhookKind::Validating, &["example.com"], &["backups"]);
        assert_eq!(
            unresolved(&d),
            [("example.com".to_owned(), "backups".to_owned())]
        );
        let e = run(&d, &reads(&[("", "ConfigMap")]), &WriteGrants::none()).unwrap_err();
        assert!(e.contains("names no kind the host knows"), "{e}");
        run(
            &d,
            &reads(&[("example.com", "Backup")]),
            &WriteGrants::none(),
        )
        .unwrap();
        run(&d, &reads(&[("example.com", "*")]), &WriteGrants::none()).unwrap();
        let found: Discovered = [(("example.com".into(), "backups".into()), "Snap".into())].into();
        let e = check(
            &d,
            &reads(&[("example.com", "Backup")]),
            &WriteGrants::none(),
            &found,
            "k",
        )
        .unwrap_err();
        assert!(e.contains("\"example.com/Snap\""), "{e}");
    }
}
