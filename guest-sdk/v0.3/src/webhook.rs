//! Declaring webhooks: constructors for the contract's [`Rule`], [`Webhook`] and
//! [`LabelSelector`] with the defaults a policy usually wants, so a declaration names only what
//! differs.

use std::any::TypeId;

use crate::{
    FailurePolicy, LabelSelector, Operation, Rule, Scope, SelectorOperator, SelectorRequirement,
    SideEffects, Webhook,
};

impl Rule {
    /// Creates and updates of the resource `K` (its group, version and plural name; scoped as
    /// `K` is): `Rule::of::<ConfigMap>()` is what `kubectl` calls `configmaps` in the core
    /// group, `v1`.
    pub fn of<K>() -> Rule
    where
        K: k8s_openapi::Resource,
        K::Scope: 'static,
    {
        let scope = if TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::ClusterResourceScope>()
        {
            Scope::Cluster
        } else if TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>() {
            Scope::Namespaced
        } else {
            Scope::Any
        };
        Rule {
            operations: vec![Operation::Create, Operation::Update],
            api_groups: vec![K::GROUP.to_owned()],
            api_versions: vec![K::VERSION.to_owned()],
            resources: vec![K::URL_PATH_SEGMENT.to_owned()],
            scope,
        }
    }

    /// Creates and updates of `resources` (plural names, `pods/status` for a subresource, `*`
    /// for all) of `group` (empty: the core group) at `version`, in any scope: for a custom
    /// resource or a type k8s-openapi does not have.
    pub fn new(group: &str, version: &str, resources: &[&str]) -> Rule {
        Rule {
            operations: vec![Operation::Create, Operation::Update],
            api_groups: vec![group.to_owned()],
            api_versions: vec![version.to_owned()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            scope: Scope::Any,
        }
    }

    /// The same rule for `operations` instead.
    pub fn on(mut self, operations: &[Operation]) -> Rule {
        self.operations = operations.to_vec();
        self
    }
}

impl Webhook {
    /// A webhook for `rules` that fails closed (a review the policy cannot answer is denied),
    /// has no side effects, the API server's default timeout (10 s) and no selectors.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Webhook {
        Webhook {
            rules: rules.into_iter().collect(),
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::None,
            timeout_seconds: 0,
            namespace_selector: None,
            object_selector: None,
        }
    }

    /// What the API server and the host do when the policy cannot answer: `Ignore` allows the
    /// request (for a policy that only helps, like a default).
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Webhook {
        self.failure_policy = policy;
        self
    }

    /// The API server's timeout for a call, 1 to 30 seconds; the host's deadline for the
    /// policy lies inside it.
    pub fn timeout_seconds(mut self, seconds: u32) -> Webhook {
        self.timeout_seconds = seconds;
        self
    }

    /// Only objects in namespaces whose labels match.
    pub fn namespaces(mut self, selector: LabelSelector) -> Webhook {
        self.namespace_selector = Some(selector);
        self
    }

    /// Only objects whose labels match.
    pub fn objects(mut self, selector: LabelSelector) -> Webhook {
        self.object_selector = Some(selector);
        self
    }
}

impl LabelSelector {
    /// A selector that matches everything; add to it with [`label`](Self::label) and
    /// [`require`](Self::require).
    pub fn everything() -> LabelSelector {
        LabelSelector {
            match_labels: Vec::new(),
            match_expressions: Vec::new(),
        }
    }

    /// Labels whose `key` is none of `values`, or absent: `LabelSelector::not_in(
    /// "kubernetes.io/metadata.name", &["kube-system"])` is every namespace but `kube-system`.
    pub fn not_in(key: &str, values: &[&str]) -> LabelSelector {
        LabelSelector::everything().require(key, SelectorOperator::NotIn, values)
    }

    /// And label `key` equal to `value`.
    pub fn label(mut self, key: &str, value: &str) -> LabelSelector {
        self.match_labels.push((key.to_owned(), value.to_owned()));
        self
    }

    /// And the requirement `key operator values` (`values` empty for `Exists` and
    /// `DoesNotExist`).
    pub fn require(
        mut self,
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> LabelSelector {
        self.match_expressions.push(SelectorRequirement {
            key: key.to_owned(),
            operator,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::api::networking::v1::Ingress;

    use super::*;

    #[test]
    fn a_rule_of_a_type_names_its_group_version_plural_and_scope() {
        let rule = Rule::of::<Ingress>();
        assert_eq!(rule.api_groups, ["networking.k8s.io"]);
        assert_eq!(rule.api_versions, ["v1"]);
        assert_eq!(rule.resources, ["ingresses"]);
        assert_eq!(rule.scope, Scope::Namespaced);
        assert_eq!(rule.operations, [Operation::Create, Operation::Update]);
        assert_eq!(Rule::of::<ConfigMap>().api_groups, [""]);
        assert_eq!(Rule::of::<Namespace>().scope, Scope::Cluster);
        let deletes = Rule::new("example.com", "v1", &["widgets"]).on(&[Operation::Delete]);
        assert_eq!(deletes.operations, [Operation::Delete]);
        assert_eq!(deletes.scope, Scope::Any);
    }

    #[test]
    fn a_webhook_fails_closed_by_default_and_takes_its_settings() {
        let plain = Webhook::new([Rule::of::<ConfigMap>()]);
        assert_eq!(plain.failure_policy, FailurePolicy::Fail);
        assert_eq!(plain.side_effects, SideEffects::None);
        assert_eq!(plain.timeout_seconds, 0);
        assert!(plain.namespace_selector.is_none() && plain.object_selector.is_none());
        let set = Webhook::new([Rule::of::<ConfigMap>()])
            .failure_policy(FailurePolicy::Ignore)
            .timeout_seconds(5)
            .namespaces(LabelSelector::not_in(
                "kubernetes.io/metadata.name",
                &["kube-system"],
            ))
            .objects(LabelSelector::everything().label("app", "web"));
        assert_eq!(set.failure_policy, FailurePolicy::Ignore);
        assert_eq!(set.timeout_seconds, 5);
        let namespaces = set.namespace_selector.expect("a namespace selector");
        assert!(namespaces.match_labels.is_empty());
        let [requirement] = &namespaces.match_expressions[..] else {
            panic!("one requirement: {namespaces:?}");
        };
        assert_eq!(requirement.key, "kubernetes.io/metadata.name");
        assert_eq!(requirement.operator, SelectorOperator::NotIn);
        assert_eq!(requirement.values, ["kube-system"]);
        let objects = set.object_selector.expect("an object selector");
        assert_eq!(objects.match_labels, [("app".to_owned(), "web".to_owned())]);
    }
}
