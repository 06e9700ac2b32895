//! What a plugin may write: resources and verbs, granted per plugin apart from reads.

use std::fmt;

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::model::declared::Gvk;
use crate::model::grants::{Grants, ResourcePattern};

/// A write the client makes for a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteVerb {
    Create,
    Update,
    UpdateStatus,
    Patch,
    PatchStatus,
    Delete,
}

impl WriteVerb {
    /// A lowercase label for logs and metrics (`update-status`).
    pub fn as_str(self) -> &'static str {
        match self {
            WriteVerb::Create => "create",
            WriteVerb::Update => "update",
            WriteVerb::UpdateStatus => "update-status",
            WriteVerb::Patch => "patch",
            WriteVerb::PatchStatus => "patch-status",
            WriteVerb::Delete => "delete",
        }
    }

    /// The verb as a grant names it: `create`, `update`, `patch`, `delete`, or `status` for
    /// both status writes.
    fn grant_name(self) -> &'static str {
        match self {
            WriteVerb::UpdateStatus | WriteVerb::PatchStatus => "status",
            other => other.as_str(),
        }
    }
}

impl fmt::Display for WriteVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verbs a grant may name.
const GRANT_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "status"];

/// One write grant: resources (as read grants name them: `Kind`, `group/Kind`, `group/*`, `*`;
/// Secrets only when named) and, optionally, the verbs allowed on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteGrant {
    pattern: ResourcePattern,
    resources: Grants,
    /// `None`: every verb.
    verbs: Option<Vec<String>>,
}

impl WriteGrant {
    /// A grant of `verbs` (`create`, `update`, `patch`, `delete`, `status`; `None` for all) on
    /// the resources `pattern` matches. Unknown verb names are an error naming them.
    pub fn new(pattern: ResourcePattern, verbs: Option<Vec<String>>) -> Result<Self, String> {
        if let Some(unknown) = verbs
            .iter()
            .flatten()
            .find(|v| !GRANT_VERBS.contains(&v.as_str()))
        {
            return Err(format!(
                "unknown write verb `{unknown}`: expected one of {}",
                GRANT_VERBS.join(", ")
            ));
        }
        Ok(WriteGrant {
            resources: Grants::only(vec![pattern.clone()]),
            pattern,
            verbs,
        })
    }

    fn allows(&self, resource: &Gvk, verb: WriteVerb) -> bool {
        self.resources.allows(resource)
            && self
                .verbs
                .as_ref()
                .is_none_or(|verbs| verbs.iter().any(|v| v == verb.grant_name()))
    }
}

/// Every write a plugin may make. None by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteGrants {
    grants: Vec<WriteGrant>,
}

impl WriteGrants {
    /// No writes at all (the default).
    pub fn none() -> Self {
        WriteGrants::default()
    }

    /// Exactly the listed grants.
    pub fn only(grants: Vec<WriteGrant>) -> Self {
        WriteGrants { grants }
    }

    /// Whether the plugin may make `verb` on `resource` (group and kind; any version).
    pub fn allows(&self, resource: &Gvk, verb: WriteVerb) -> bool {
        self.grants.iter().any(|g| g.allows(resource, verb))
    }

    /// Whether a grant names `resource`'s group and kind themselves, not through a wildcard
    /// (such kinds are as many as the config names).
    pub fn names(&self, resource: &Gvk) -> bool {
        self.grants
            .iter()
            .any(|g| g.pattern.group == resource.group && g.pattern.kind == resource.kind)
    }

    /// What the plugin may write, one entry per grant: `group/Kind: verbs` (`*` for every
    /// verb).
    pub fn describe(&self) -> Vec<String> {
        self.grants
            .iter()
            .map(|g| {
                let verbs = g.verbs.as_ref().map_or("*".to_owned(), |v| v.join(","));
                format!("{}: {verbs}", g.pattern.describe())
            })
            .collect()
    }

    /// The resources of every grant, whatever their verbs.
    pub fn patterns(&self) -> impl Iterator<Item = &ResourcePattern> {
        self.grants.iter().map(|g| &g.pattern)
    }

    /// Whether no write at all is granted.
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// The RBAC rules the host's service account needs for these writes: the grant's verbs on
    /// the resource's plural (from the kind, as kubectl does without discovery), and `update`
    /// and `patch` on its `/status` for `status` unless the resource is a built-in one without
    /// that subresource (ConfigMap, Event, ...). A wildcard becomes `*` (which, unlike the
    /// grant, covers Secrets: the host still refuses what the grant does not name).
    pub fn rbac_rules(&self) -> Vec<PolicyRule> {
        let mut rules = Vec::new();
        for grant in &self.grants {
            let group = grant.pattern.group.clone();
            let plural = if grant.pattern.kind == "*" {
                "*".to_owned()
            } else {
                crate::model::resources::guess_plural(
                    &grant.pattern.group,
                    "v1",
                    &grant.pattern.kind,
                )
            };
            let verbs: Vec<&str> = match &grant.verbs {
                None => GRANT_VERBS.to_vec(),
                Some(verbs) => GRANT_VERBS
                    .into_iter()
                    .filter(|v| verbs.iter().any(|g| g == v))
                    .collect(),
            };
            let main: Vec<String> = verbs
                .iter()
                .filter(|v| **v != "status")
                .map(|v| (*v).to_owned())
                .collect();
            let rule = |resource: String, verbs: Vec<String>| PolicyRule {
                api_groups: Some(vec![group.clone()]),
                resources: Some(vec![resource]),
                verbs,
                ..PolicyRule::default()
            };
            if !main.is_empty() {
                rules.push(rule(plural.clone(), main));
            }
            let status_exists = crate::model::resources::has_status_subresource(
                &grant.pattern.group,
                &grant.pattern.kind,
            );
            if verbs.contains(&"status") && status_exists {
                rules.push(rule(
                    format!("{plural}/status"),
                    vec!["update".into(), "patch".into()],
                ));
            }
        }
        rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(group: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    fn grant(group: &str, kind: &str, verbs: Option<&[&str]>) -> WriteGrant {
        let verbs = verbs.map(|v| v.iter().map(|s| s.to_string()).collect());
        WriteGrant::new(ResourcePattern::new(group, kind), verbs).unwrap()
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let grants = WriteGrants::default();
        assert!(grants.is_empty());
        assert!(!grants.allows(&gvk("", "ConfigMap"), WriteVerb::Create));
    }

    #[test]
    fn a_resource_grant_allows_every_verb_on_that_resource_only() {
        let grants = WriteGrants::only(vec![grant("apps", "Deployment", None)]);
        for verb in [WriteVerb::Create, WriteVerb::PatchStatus, WriteVerb::Delete] {
            assert!(grants.allows(&gvk("apps", "Deployment"), verb));
        }
        assert!(!grants.allows(&gvk("apps", "StatefulSet"), WriteVerb::Create));
        assert!(!grants.allows(&gvk("", "Deployment"), WriteVerb::Create));
    }

    #[test]
    fn verbs_limit_a_grant_and_status_covers_both_status_writes() {
        let grants = WriteGrants::only(vec![grant("", "ConfigMap", Some(&["create", "status"]))]);
        let cm = gvk("", "ConfigMap");
        assert!(grants.allows(&cm, WriteVerb::Create));
        assert!(grants.allows(&cm, WriteVerb::UpdateStatus));
        assert!(grants.allows(&cm, WriteVerb::PatchStatus));
        assert!(!grants.allows(&cm, WriteVerb::Update));
        assert!(!grants.allows(&cm, WriteVerb::Delete));
        assert!(
            WriteGrant::new(ResourcePattern::new("", "Pod"), Some(vec!["get".into()])).is_err()
        );
    }

    #[test]
    fn rbac_rules_name_the_plural_and_a_status_subresource_that_exists() {
        let grants = WriteGrants::only(vec![
            grant("apps", "Deployment", Some(&["create", "status"])),
            grant("", "Event", None),
            grant("example.com", "*", Some(&["delete"])),
        ]);
        let rules: Vec<(String, String, Vec<String>)> = grants
            .rbac_rules()
            .into_iter()
            .map(|r| {
                (
                    r.api_groups.unwrap().join(","),
                    r.resources.unwrap().join(","),
                    r.verbs,
                )
            })
            .collect();
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            rules,
            [
                ("apps".into(), "deployments".into(), s(&["create"])),
                (
                    "apps".into(),
                    "deployments/status".into(),
                    s(&["update", "patch"])
                ),
                (
                    "".into(),
                    "events".into(),
                    s(&["create", "update", "patch", "delete"])
                ),
                ("example.com".into(), "*".into(), s(&["delete"])),
            ]
        );
    }

    #[test]
    fn secrets_are_writable_only_when_named() {
        let wildcard = WriteGrants::only(vec![grant("*", "*", None), grant("", "*", None)]);
        assert!(!wildcard.allows(&gvk("", "Secret"), WriteVerb::Create));
        assert!(wildcard.allows(&gvk("", "ConfigMap"), WriteVerb::Create));
        let named = WriteGrants::only(vec![grant("", "Secret", None)]);
        assert!(named.allows(&gvk("", "Secret"), WriteVerb::Create));
    }
}
