//! Which workqueue keys an informer event queues for a 0.2 plugin: the object's own key
//! (controller-runtime's `For`) or its controlling owner's (`Owns`), as its `init` declared in
//! each subscription's `queue` rules.

use serde::Deserialize;

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

/// The keys an add, update or delete of `object` (the API server's JSON) of type
/// `group`/`kind` queues under `rules`. For an update, queue the keys of both the old and the
/// new object (an owner may have changed); the queue removes duplicates.
pub fn keys_for(
    group: &str,
    kind: &str,
    rules: &[QueueRule],
    object: &str,
) -> Result<Vec<ObjectKey>, serde_json::Error> {
    if rules.is_empty() {
        return Ok(Vec::new());
    }
    let Object { metadata } = serde_json::from_str(object)?;
    let mut keys = Vec::with_capacity(rules.len());
    for rule in rules {
        match rule {
            QueueRule::OwnKey => keys.push(ObjectKey {
                group: group.to_owned(),
                kind: kind.to_owned(),
                namespace: metadata.namespace.clone(),
                name: metadata.name.clone(),
            }),
            QueueRule::ControllingOwner { group, kind } => {
                let owner = metadata.owner_references.iter().find(|o| o.controller);
                if let Some(owner) = owner
                    && owner.kind == *kind
                    && api_group(&owner.api_version) == group
                {
                    keys.push(ObjectKey {
                        group: group.clone(),
                        kind: kind.clone(),
                        namespace: metadata.namespace.clone(),
                        name: owner.name.clone(),
                    });
                }
            }
        }
    }
    Ok(keys)
}

/// The group of an apiVersion (`apps/v1` -> `apps`, `v1` -> ``).
fn api_group(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

/// The part of an object the rules read; everything else is skipped unparsed.
#[derive(Deserialize)]
struct Object {
    metadata: Metadata,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    name: String,
    namespace: Option<String>,
    #[serde(default)]
    owner_references: Vec<OwnerReference>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReference {
    api_version: String,
    kind: String,
    name: String,
    #[serde(default)]
    controller: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(owners: serde_json::Value) -> String {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "ownerReferences": owners},
            "spec": {"replicas": 1},
        })
        .to_string()
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
        assert_eq!(keys.unwrap(), [key("apps", "Deployment", "web")]);
    }

    #[test]
    fn controlling_owner_queues_the_owner_of_that_type_only() {
        let owned = deployment(json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "1"},
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "my-foo",
             "uid": "2", "controller": true},
        ]));
        let keys = keys_for("apps", "Deployment", &[foo_owner()], &owned).unwrap();
        assert_eq!(keys, [key("samplecontroller.k8s.io", "Foo", "my-foo")]);

        let not_controller = deployment(json!([
            {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "f",
             "uid": "2"},
        ]));
        assert!(
            keys_for("apps", "Deployment", &[foo_owner()], &not_controller)
                .unwrap()
                .is_empty()
        );
        let other_group = deployment(json!([
            {"apiVersion": "example.com/v1", "kind": "Foo", "name": "f", "uid": "2",
             "controller": true},
        ]));
        assert!(
            keys_for("apps", "Deployment", &[foo_owner()], &other_group)
                .unwrap()
                .is_empty()
        );
        assert!(
            keys_for("apps", "Deployment", &[foo_owner()], &deployment(json!([])))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn both_rules_queue_both_keys_and_no_rules_parse_nothing() {
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
        assert_eq!(keys.unwrap().len(), 2);
        assert_eq!(keys_for("apps", "Deployment", &[], "not json").unwrap(), []);
        assert!(keys_for("apps", "Deployment", &[QueueRule::OwnKey], "not json").is_err());
    }
}
