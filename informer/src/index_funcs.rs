//! Index functions: how the store groups objects for `by_index` look-ups.

use std::sync::Arc;

use crate::object::Object;

/// Maps an object to the index values it is filed under (none, one or several).
///
/// Called with the store's write lock held, on every add and update: keep it quick, and never
/// read the same informer's cache from inside it (that would deadlock).
pub type IndexFunc = Arc<dyn Fn(&Object) -> Vec<String> + Send + Sync>;

/// The name of the index every store has, by `metadata.namespace`.
pub const NAMESPACE_INDEX: &str = "namespace";

/// Files objects by namespace (cluster-scoped objects under no value).
pub fn namespace() -> IndexFunc {
    Arc::new(|o: &Object| o.namespace().map(str::to_owned).into_iter().collect())
}

/// Files objects by the value of label `key` (objects without it under no value).
pub fn label(key: impl Into<String>) -> IndexFunc {
    let key = key.into();
    Arc::new(move |o: &Object| o.label(&key).map(str::to_owned).into_iter().collect())
}

/// Files objects by the value of annotation `key`.
pub fn annotation(key: impl Into<String>) -> IndexFunc {
    let key = key.into();
    Arc::new(move |o: &Object| o.annotation(&key).map(str::to_owned).into_iter().collect())
}

/// Files objects by the scalar at a dotted field path such as `spec.nodeName`.
///
/// The path is looked up in the JSON each time the object is indexed (on add and update), so it
/// costs a partial parse; metadata-based functions cost nothing of the kind.
pub fn field_path(path: impl Into<String>) -> IndexFunc {
    let path = path.into();
    Arc::new(move |o: &Object| o.field(&path).into_iter().collect())
}

/// Files objects under the UID of each of their owners (`metadata.ownerReferences[].uid`).
pub fn owner_uid() -> IndexFunc {
    Arc::new(|o: &Object| o.owner_uids().map(str::to_owned).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_function_reads_its_source() {
        let o = Object::from_json(
            r#"{"metadata":{"name":"p","namespace":"ns","labels":{"app":"a"},"annotations":{"team":"t"},"ownerReferences":[{"uid":"u1"},{"uid":"u2"}]},"spec":{"nodeName":"n1"}}"#,
        )
        .unwrap();
        assert_eq!(namespace()(&o), vec!["ns"]);
        assert_eq!(label("app")(&o), vec!["a"]);
        assert!(label("tier")(&o).is_empty());
        assert_eq!(annotation("team")(&o), vec!["t"]);
        assert_eq!(field_path("spec.nodeName")(&o), vec!["n1"]);
        assert_eq!(owner_uid()(&o), vec!["u1", "u2"]);
    }
}
