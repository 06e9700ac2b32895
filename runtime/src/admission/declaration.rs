//! What a policy declared (`admission.declare`): its webhooks, checked, in the shape of the
//! API server's `admissionregistration.k8s.io/v1` webhook fields, so that `/plugins`,
//! `kubewasm webhooks` and the dev server's admission chain read one model.

use serde::Serialize;

/// The two kinds of webhook a plugin can serve: one path each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookKind {
    Validating,
    Mutating,
}

impl WebhookKind {
    /// The path segment the host serves the kind under (`/validate/NAME`, `/mutate/NAME`).
    pub fn path_segment(self) -> &'static str {
        match self {
            WebhookKind::Validating => "validate",
            WebhookKind::Mutating => "mutate",
        }
    }

    /// A label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookKind::Validating => "validating",
            WebhookKind::Mutating => "mutating",
        }
    }
}

/// AdmissionRequest.operation, and the operations of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

/// RuleWithOperations.scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Scope {
    Cluster,
    Namespaced,
    #[serde(rename = "*")]
    Any,
}

/// RuleWithOperations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    pub operations: Vec<Operation>,
    pub api_groups: Vec<String>,
    pub api_versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: Scope,
}

/// What the API server does when the webhook cannot answer, and what the host answers when
/// the guest fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

/// Webhook.sideEffects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SideEffects {
    None,
    NoneOnDryRun,
}

/// LabelSelectorRequirement.operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// LabelSelectorRequirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// metav1.LabelSelector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_labels: std::collections::BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every pair and every requirement.
    pub fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator {
                    SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
                    SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }
}

/// One declared webhook, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub rules: Vec<Rule>,
    pub failure_policy: FailurePolicy,
    pub side_effects: SideEffects,
    pub timeout_seconds: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
}

/// What a plugin serves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Declaration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validating: Option<Webhook>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mutating: Option<Webhook>,
}

impl Declaration {
    /// The webhook of `kind`, if declared.
    pub fn webhook(&self, kind: WebhookKind) -> Option<&Webhook> {
        match kind {
            WebhookKind::Validating => self.validating.as_ref(),
            WebhookKind::Mutating => self.mutating.as_ref(),
        }
    }

    /// Checks what a guest declared: at least one webhook; each with 1 to [`MAX_RULES`] rules,
    /// each rule naming at least one operation, group, version and resource of sane text; a
    /// timeout of 1 to 30 seconds (0 is read as the API server's default, 10); selector keys
    /// and values of sane text; all of it at most [`MAX_DECLARATION_BYTES`] as JSON. The
    /// message says what is wrong.
    pub fn validate(mut self) -> Result<Self, String> {
        if self.validating.is_none() && self.mutating.is_none() {
            return Err("it declares neither a validating nor a mutating webhook".into());
        }
        let size = self.size();
        if size > MAX_DECLARATION_BYTES {
            return Err(format!(
                "it is {size} bytes as JSON, more than {} KiB: its webhook configuration \
                 would be too large for the API server to store",
                MAX_DECLARATION_BYTES >> 10
            ));
        }
        for (kind, hook) in [
            (WebhookKind::Validating, self.validating.as_mut()),
            (WebhookKind::Mutating, self.mutating.as_mut()),
        ] {
            if let Some(hook) = hook {
                check_webhook(hook).map_err(|e| format!("the {} webhook: {e}", kind.as_str()))?;
            }
        }
        Ok(self)
    }
}

impl Declaration {
    /// Its size as JSON, the bulk of the webhook configurations it becomes.
    pub fn size(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }
}

/// The most one plugin's declaration may weigh as JSON (rules, lists and selectors, both
/// webhooks together). Each plugin's declaration becomes configurations of its own, which
/// the API server stores in etcd (at most 1.5 MiB an object) after reading a request of at
/// most 3 MiB: 64 KiB keeps them far below both, with the client config and CA bundle
/// (a few KiB) added, and is hundreds of times what a real policy declares (a few hundred
/// bytes).
pub const MAX_DECLARATION_BYTES: usize = 64 << 10;

/// The most rules one webhook may declare.
pub const MAX_RULES: usize = 64;
/// The most entries in one list of a rule or a selector.
const MAX_LIST: usize = 64;
/// The longest string in a rule or a selector (a label value is at most 63, a key 317).
const MAX_TEXT: usize = 317;

fn check_webhook(hook: &mut Webhook) -> Result<(), String> {
    if hook.rules.is_empty() {
        return Err("it has no rules: it would never be called".into());
    }
    if hook.rules.len() > MAX_RULES {
        return Err(format!("{} rules, more than {MAX_RULES}", hook.rules.len()));
    }
    if hook.timeout_seconds == 0 {
        hook.timeout_seconds = 10;
    }
    if !(1..=30).contains(&hook.timeout_seconds) {
        return Err(format!(
            "timeout-seconds {} is outside 1 to 30",
            hook.timeout_seconds
        ));
    }
    for (i, rule) in hook.rules.iter().enumerate() {
        let bad = |what: &str| format!("rule {i}: {what}");
        if rule.operations.is_empty() {
            return Err(bad("no operations"));
        }
        for (name, list) in [
            ("api-groups", &rule.api_groups),
            ("api-versions", &rule.api_versions),
            ("resources", &rule.resources),
        ] {
            if list.is_empty() {
                return Err(bad(&format!("{name} is empty")));
            }
            check_texts(list).map_err(|e| bad(&format!("{name}: {e}")))?;
        }
        for r in &rule.resources {
            if r.is_empty() {
                return Err(bad("an empty resource name"));
            }
        }
    }
    for (name, selector) in [
        ("namespace-selector", &hook.namespace_selector),
        ("object-selector", &hook.object_selector),
    ] {
        if let Some(s) = selector {
            check_selector(s).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    Ok(())
}

fn check_texts<'a>(list: impl IntoIterator<Item = &'a String>) -> Result<(), String> {
    let mut n = 0;
    for s in list {
        n += 1;
        if n > MAX_LIST {
            return Err(format!("more than {MAX_LIST} entries"));
        }
        if s.len() > MAX_TEXT {
            return Err(format!(
                "an entry of {} bytes, more than {MAX_TEXT}",
                s.len()
            ));
        }
        if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(format!("{s:?} holds spaces or control characters"));
        }
    }
    Ok(())
}

fn check_selector(s: &LabelSelector) -> Result<(), String> {
    check_texts(s.match_labels.keys())?;
    check_texts(s.match_labels.values())?;
    if s.match_expressions.len() > MAX_LIST {
        return Err(format!("more than {MAX_LIST} expressions"));
    }
    for r in &s.match_expressions {
        if r.key.is_empty() {
            return Err("an expression with an empty key".into());
        }
        check_texts([&r.key])?;
        check_texts(&r.values)?;
        let needs_values = matches!(r.operator, SelectorOperator::In | SelectorOperator::NotIn);
        if needs_values == r.values.is_empty() {
            return Err(format!(
                "key {:?}: In and NotIn need values, Exists and DoesNotExist take none",
                r.key
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            operations: vec![Operation::Create],
            api_groups: vec!["networking.k8s.io".into()],
            api_versions: vec!["v1".into()],
            resources: vec!["ingresses".into()],
            scope: Scope::Namespaced,
        }
    }

    fn hook() -> Webhook {
        Webhook {
            rules: vec![rule()],
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: 0,
            namespace_selector: None,
            object_selector: None,
        }
    }

    #[test]
    fn a_zero_timeout_is_the_api_servers_default() {
        let d = Declaration {
            validating: Some(hook()),
            mutating: None,
        }
        .validate()
        .unwrap();
        assert_eq!(d.validating.unwrap().timeout_seconds, 10);
    }

    #[test]
    fn bad_declarations_are_refused_with_what_is_wrong() {
        let refuse = |h: Webhook, says: &str| {
            let e = Declaration {
                validating: None,
                mutating: Some(h),
            }
            .validate()
            .unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("mutating"), "{e}");
        };
        refuse(
            Webhook {
                timeout_seconds: 31,
                ..hook()
            },
            "outside 1 to 30",
        );
        refuse(
            Webhook {
                rules: vec![],
                ..hook()
            },
            "no rules",
        );
        refuse(
            Webhook {
                rules: vec![Rule {
                    resources: vec!["in gresses".into()],
                    ..rule()
                }],
                ..hook()
            },
            "spaces",
        );
        refuse(
            Webhook {
                object_selector: Some(LabelSelector {
                    match_expressions: vec![SelectorRequirement {
                        key: "a".into(),
                        operator: SelectorOperator::Exists,
                        values: vec!["x".into()],
                    }],
                    ..Default::default()
                }),
                ..hook()
            },
            "take none",
        );
        assert!(Declaration::default().validate().is_err());
    }

    #[test]
    fn a_declaration_past_the_size_limit_is_refused_with_its_size() {
        let wide = Rule {
            resources: (0..64).map(|i| format!("{i:0>300}")).collect(),
            ..rule()
        };
        let e = Declaration {
            validating: Some(Webhook {
                rules: vec![wide; 4],
                ..hook()
            }),
            mutating: None,
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("more than 64 KiB"), "{e}");
        assert!(e.contains(" bytes as JSON"), "{e}");
    }

    #[test]
    fn selectors_match_as_the_api_server_does() {
        let labels: std::collections::BTreeMap<String, String> =
            [("env".to_string(), "prod".to_string())].into();
        let s = |op, values: &[&str]| LabelSelector {
            match_expressions: vec![SelectorRequirement {
                key: "env".into(),
                operator: op,
                values: values.iter().map(|v| v.to_string()).collect(),
            }],
            ..Default::default()
        };
        assert!(s(SelectorOperator::In, &["prod"]).matches(&labels));
        assert!(!s(SelectorOperator::NotIn, &["prod"]).matches(&labels));
        assert!(s(SelectorOperator::NotIn, &["dev"]).matches(&Default::default()));
        assert!(s(SelectorOperator::Exists, &[]).matches(&labels));
        assert!(!s(SelectorOperator::DoesNotExist, &[]).matches(&labels));
        assert!(LabelSelector::default().matches(&labels));
    }
}
