//! Which updates of an object a queue rule queues on (contract 0.2.2's predicates), and the
//! lowering of a 0.2.2 declaration to the 0.2.0 one the rest of the host reads plus the
//! predicates of each rule. controller-runtime's `GenerationChangedPredicate`,
//! `LabelChangedPredicate`, `AnnotationChangedPredicate` and kube-runtime's
//! `predicate_filter` do the same.

use kubewasm_informer::Object;

use crate::contracts::v0_2::kubewasm::controller::types as wit;
use crate::contracts::v0_2_2::exports::kubewasm::controller0_2_2::plugin as wit_0_2_2;

/// A change between an update's old and new object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Predicate {
    /// Any update, resyncs included (0.2.0's behaviour).
    ResourceVersion,
    /// `metadata.generation` changed.
    Generation,
    /// `metadata.labels` changed.
    Labels,
    /// `metadata.annotations` changed.
    Annotations,
}

/// The updates one queue rule queues on: when any of its predicates holds; none is any update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateFilter {
    when: Vec<Predicate>,
}

impl UpdateFilter {
    /// A filter queuing when any of `when` holds (every update when empty). Each predicate is
    /// kept once: a guest's list of a million repeats costs the host four entries.
    pub fn new(mut when: Vec<Predicate>) -> Self {
        when.sort_unstable();
        when.dedup();
        when.shrink_to_fit();
        UpdateFilter { when }
    }

    /// Whether every update passes (nothing to compare).
    pub fn passes_all(&self) -> bool {
        self.when.is_empty() || self.when.contains(&Predicate::ResourceVersion)
    }

    /// Whether an update from `old` to `new` queues, compared on the metadata the informer
    /// parsed (labels and annotations are held sorted by key, so equal maps compare equal
    /// whatever their order in the JSON).
    pub fn queues(&self, old: &Object, new: &Object) -> bool {
        if self.passes_all() {
            return true;
        }
        self.when.iter().any(|p| match p {
            Predicate::ResourceVersion => true,
            Predicate::Generation => old.generation() != new.generation(),
            Predicate::Labels => old.labels().ne(new.labels()),
            Predicate::Annotations => old.annotations().ne(new.annotations()),
        })
    }
}

/// What `init` declared, whatever the contract: the 0.2.0 declaration and, per subscription,
/// the update filter of each of its queue rules (in order).
#[derive(Debug, Clone)]
pub(crate) struct Declaration {
    pub(crate) info: wit::PluginInfo,
    pub(crate) filters: Vec<Vec<UpdateFilter>>,
}

impl From<wit::PluginInfo> for Declaration {
    /// A 0.2.0 declaration: every rule queues on every update.
    fn from(info: wit::PluginInfo) -> Self {
        let filters = info
            .subscriptions
            .iter()
            .map(|s| vec![UpdateFilter::default(); s.queue.len()])
            .collect();
        Declaration { info, filters }
    }
}

impl From<wit_0_2_2::PluginInfo> for Declaration {
    /// A 0.2.2 declaration: the rules without their predicates, and the predicates apart.
    fn from(info: wit_0_2_2::PluginInfo) -> Self {
        let mut filters = Vec::with_capacity(info.subscriptions.len());
        let subscriptions = info
            .subscriptions
            .into_iter()
            .map(|s| {
                let (queue, when): (Vec<_>, Vec<_>) = s
                    .queue
                    .into_iter()
                    .map(|spec| {
                        let when = spec.when.into_iter().map(predicate).collect();
                        (spec.rule, UpdateFilter::new(when))
                    })
                    .unzip();
                filters.push(when);
                wit::Subscription {
                    gvk: s.gvk,
                    namespace: s.namespace,
                    label_selector: s.label_selector,
                    field_selector: s.field_selector,
                    resync_seconds: s.resync_seconds,
                    events: s.events,
                    queue,
                }
            })
            .collect();
        Declaration {
            info: wit::PluginInfo {
                name: info.name,
                subscriptions,
                indexes: info.indexes,
            },
            filters,
        }
    }
}

fn predicate(p: wit_0_2_2::Predicate) -> Predicate {
    match p {
        wit_0_2_2::Predicate::ResourceVersion => Predicate::ResourceVersion,
        wit_0_2_2::Predicate::Generation => Predicate::Generation,
        wit_0_2_2::Predicate::Labels => Predicate::Labels,
        wit_0_2_2::Predicate::Annotations => Predicate::Annotations,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(generation: i64, labels: serde_json::Value, rv: &str) -> Object {
        parse(json!({
            "metadata": {"name": "f", "generation": generation, "labels": labels,
                         "resourceVersion": rv},
            "status": {"availableReplicas": rv},
        }))
    }

    fn parse(json: serde_json::Value) -> Object {
        Object::from_json(&json.to_string()).expect("an object")
    }

    #[test]
    fn repeated_predicates_are_kept_once_and_queue_as_one() {
        let mut when = vec![Predicate::Labels; 100_000];
        when.extend([Predicate::Generation; 3]);
        let filter = UpdateFilter::new(when);
        assert_eq!(
            filter,
            UpdateFilter::new(vec![Predicate::Generation, Predicate::Labels])
        );
        assert!(filter.when.capacity() <= 2);
        let before = object(1, json!({}), "10");
        assert!(filter.queues(&before, &object(2, json!({}), "11")));
        assert!(!filter.queues(&before, &object(1, json!({}), "11")));
    }

    #[test]
    fn generation_queues_spec_changes_and_not_status_writes_or_resyncs() {
        let filter = UpdateFilter::new(vec![Predicate::Generation]);
        let before = object(1, json!({}), "10");
        assert!(
            !filter.queues(&before, &object(1, json!({}), "11")),
            "status write"
        );
        assert!(!filter.queues(&before, &before), "resync");
        assert!(
            filter.queues(&before, &object(2, json!({}), "12")),
            "spec change"
        );
        let without = parse(json!({"metadata": {"name": "f"}}));
        assert!(
            filter.queues(&without, &before),
            "a generation appearing is a change"
        );
        assert!(!filter.queues(&without, &without));
    }

    #[test]
    fn labels_and_annotations_compare_their_maps_and_any_predicate_suffices() {
        let filter = UpdateFilter::new(vec![Predicate::Labels, Predicate::Generation]);
        let before = object(1, json!({"a": "1"}), "10");
        assert!(filter.queues(&before, &object(1, json!({"a": "2"}), "11")));
        assert!(filter.queues(&before, &object(2, json!({"a": "1"}), "11")));
        assert!(!filter.queues(&before, &object(1, json!({"a": "1"}), "11")));
        assert!(filter.queues(&before, &object(1, json!({"a": "1", "b": "2"}), "11")));
        assert!(filter.queues(&before, &object(1, json!({}), "11")));
        let annotations = UpdateFilter::new(vec![Predicate::Annotations]);
        let with = parse(json!({"metadata": {"name": "f", "annotations": {"x": "y"}}}));
        let without = parse(json!({"metadata": {"name": "f"}}));
        assert!(annotations.queues(&without, &with));
        assert!(!annotations.queues(&with, &with));
    }

    #[test]
    fn maps_in_another_order_or_with_escapes_are_the_same_map() {
        let labels = UpdateFilter::new(vec![Predicate::Labels]);
        let old = Object::from_json(
            r#"{"metadata":{"name":"f","labels":{"b":"2","a":"x/y"},"resourceVersion":"1"}}"#,
        )
        .unwrap();
        let new = Object::from_json(
            r#"{"metadata":{"name":"f","labels":{"a":"x\u002fy","b":"2"},"resourceVersion":"2"}}"#,
        )
        .unwrap();
        assert!(!labels.queues(&old, &new));
    }

    #[test]
    fn no_predicate_or_resource_version_queues_every_update() {
        let before = object(1, json!({}), "10");
        for filter in [
            UpdateFilter::default(),
            UpdateFilter::new(vec![Predicate::ResourceVersion]),
        ] {
            assert!(filter.passes_all());
            assert!(
                filter.queues(&before, &before),
                "resyncs queue, as in 0.2.0"
            );
        }
        assert!(!UpdateFilter::new(vec![Predicate::Generation]).passes_all());
    }

    #[test]
    fn a_0_2_2_declaration_lowers_to_0_2_0_rules_and_their_filters() {
        let info = wit_0_2_2::PluginInfo {
            name: "p".into(),
            subscriptions: vec![wit_0_2_2::Subscription {
                gvk: wit::Gvk {
                    group: "g".into(),
                    version: "v1".into(),
                    kind: "Foo".into(),
                },
                namespace: None,
                label_selector: None,
                field_selector: None,
                resync_seconds: Some(30),
                events: false,
                queue: vec![
                    wit_0_2_2::QueueSpec {
                        rule: wit::QueueRule::OwnKey,
                        when: vec![wit_0_2_2::Predicate::Generation],
                    },
                    wit_0_2_2::QueueSpec {
                        rule: wit::QueueRule::ControllingOwner(0),
                        when: Vec::new(),
                    },
                ],
            }],
            indexes: Vec::new(),
        };
        let declared = Declaration::from(info);
        let sub = &declared.info.subscriptions[0];
        assert_eq!(sub.resync_seconds, Some(30));
        assert!(matches!(
            sub.queue[..],
            [wit::QueueRule::OwnKey, wit::QueueRule::ControllingOwner(0)]
        ));
        assert_eq!(
            declared.filters,
            [vec![
                UpdateFilter::new(vec![Predicate::Generation]),
                UpdateFilter::default()
            ]]
        );
    }
}
