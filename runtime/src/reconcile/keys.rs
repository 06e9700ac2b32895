//! Which workqueue keys an informer event queues for a 0.2 plugin: the object's own key
//! (controller-runtime's `For`) or its controlling owner's (`Owns`), as its `init` declared in
//! each subscription's `queue` rules.

use kubewasm_informer::Object;

/// A key of a plugin's workqueue as the host holds it: by resource type rather than by
/// subscription handle, so that a key queued for one instance names the same object to the
/// next one (a reloaded version may number its subscriptions differently).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// API group, `""` for the core group.
    pub group: String,
    pub kind: String,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

/// What the events of one subscription queue, with subscription handles resolved to types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueRule {
    /// The object's own key.
    OwnKey,
    /// The key of the owner reference with `controller: true`, if it is of this type.
    ControllingOwner { group: String, kind: String },
}

/// The keys an add, update or delete of `object` (a cached object, of type `group`/`kind`)
/// queues under `rules`: read from the metadata the informer parsed, nothing parsed again. For
/// an update, queue the keys of both the old and the new object (an owner may have changed);
/// the queue removes duplicates.
pub fn keys_for(group: &str, kind: &str, rules: &[QueueRule], object: &Object) -> Vec<ObjectKey> {
    let mut keys = Vec::with_capacity(rules.len());
    for rule in rules {
        match rule {
            QueueRule::OwnKey => keys.push(ObjectKey {
                group: group.to_owned(),
                kind: kind.to_owned(),
                namespace: object.namespace().map(str::to_owned),
                name: object.name().to_owned(),
            }),
            QueueRule::ControllingOwner { group, kind } => {
                if let Some(owner) = object.controller()
                    && owner.kind == kind
                    && api_group(owner.api_version) == group
                {
                    keys.push(ObjectKey {
                        group: group.clone(),
                        kind: kind.clone(),
                        namespace: object.namespace().map(str::to_owned),
                        name: owner.name.to_owned(),
                    });
                }
            }
        }
    }
    keys
}

/// The group of an apiVersion (`apps/v1` -> `apps`, `v1` -> ``).
fn api_group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(owners: serde_json::Value) -> Object {
        let json = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "ownerReferences": owners},
            "spec": {"replicas": 1},
        });
        Object::from_json(&json.to_string()).expect("a deployment")
    }

    fn foo_owner() -> QueueRule {
        QueueRule::ControllingOwner {
            group: "samplecontroller.k8s.io".into(),
            kind: "Foo".into(),
        }
    }

    fn key(group: &str, kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            group: group.into(),
            kind: kind.into(),
            namespace: Some("shop".into()),
            name: name.into(),
        }
    }

    #[test]
    fn own_key_queues_the_object_itself() {
        let keys = keys_for(
            "apps",
            "Deployment",
            &[QueueRule::OwnKey],
            &deployment(json!([])),
        );
        assert_eq!(keys, [key("apps", "Deployment", "web")]);
    }

    #[test]
    fn controlling_owner_queues_the_owner_of_that_type_only() {
        let owned = deployment(json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "1"},
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "my-foo",
             "uid": "2", "controller": true},
        ]));
        let keys = keys_for("apps", "Deployment", &[foo_owner()], &owned);
        assert_eq!(keys, [key("samplecontroller.k8s.io", "Foo", "my-foo")]);

        let not_controller = deployment(json!([
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f",
             "uid": "2"},
        ]));
        assert!(keys_for("apps", "Deployment", &[foo_owner()], &not_controller).is_empty());
        let other_group = deployment(json!([
            {"apiVersion": "example.com/v1", "kind": "Foo", "name": "f", "uid": "2",
             "controller": true},
        ]));
        assert!(keys_for("apps", "Deployment", &[foo_owner()], &other_group).is_empty());
        assert!(keys_for("apps", "Deployment", &[foo_owner()], &deployment(json!([]))).is_empty());
    }

    #[test]
    fn both_rules_queue_both_keys_and_no_rules_queue_nothing() {
        let owned = deployment(json!([
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f",
             "uid": "2", "controller": true},
        ]));
        let keys = keys_for(
            "apps",
            "Deployment",
            &[QueueRule::OwnKey, foo_owner()],
            &owned,
        );
        assert_eq!(
            keys,
            [
                key("apps", "Deployment", "web"),
                key("samplecontroller.k8s.io", "Foo", "f")
            ]
        );
        assert_eq!(keys_for("apps", "Deployment", &[], &owned), []);
    }

    #[test]
    fn the_first_controller_counts_and_a_core_group_owner_matches_the_empty_group() {
        let owned = deployment(json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "first", "uid": "1",
             "controller": true},
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f",
             "uid": "2", "controller": true},
        ]));
        let config_map_owner = QueueRule::ControllingOwner {
            group: String::new(),
            kind: "ConfigMap".into(),
        };
        assert_eq!(
            keys_for("apps", "Deployment", &[config_map_owner], &owned),
            [key("", "ConfigMap", "first")]
        );
        assert!(keys_for("apps", "Deployment", &[foo_owner()], &owned).is_empty());
        let cluster_scoped = Object::from_json(
            &json!({"metadata": {"name": "n1", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "1", "controller": true}]}})
            .to_string(),
        )
        .unwrap();
        let keys = keys_for("", "Node", &[QueueRule::OwnKey], &cluster_scoped);
        assert_eq!(keys[0].namespace, None);
        assert_eq!(keys[0].name, "n1");
    }
}
