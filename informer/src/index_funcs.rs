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

/// Files objects by what a dotted field path reaches ([`Object::field_values`]): the scalar at
/// `spec.nodeName`, each element of a list of scalars, each container's image at
/// `spec.containers.image`.
///
/// The path is looked up in the JSON each time the object is indexed (on add and update), so it
/// costs a partial parse; metadata-based functions cost nothing of the kind.
pub fn field_path(path: impl Into<String>) -> IndexFunc {
    let path = path.into();
    Arc::new(move |o: &Object| o.field_values(&path))
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

    #[test]
    fn field_paths_that_reach_lists_index_each_element() {
        let pod = Object::from_json(
            r#"{"metadata":{"name":"p","namespace":"ns"},"spec":{
                "containers":[{"name":"a","image":"nginx:1","ports":[{"containerPort":80},{"containerPort":443}]},
                              {"name":"b","image":"envoy:2"},{"name":"c","image":"nginx:1"},{"name":"d"}],
                "args":["--v",2,true,null,{"x":1}],
                "tolerations":[]}}"#,
        )
        .unwrap();
        assert_eq!(
            field_path("spec.containers.image")(&pod),
            vec!["nginx:1", "envoy:2"],
            "each container's image, once"
        );
        assert_eq!(
            field_path("spec.containers.ports.containerPort")(&pod),
            vec!["80", "443"]
        );
        assert_eq!(field_path("spec.args")(&pod), vec!["--v", "2", "true"]);
        assert!(field_path("spec.containers")(&pod).is_empty(), "objects");
        assert!(field_path("spec.tolerations")(&pod).is_empty());
        assert!(field_path("spec.containers.missing")(&pod).is_empty());
        assert_eq!(
            field_path("spec.args.x")(&pod),
            vec!["1"],
            "the objects among the elements"
        );
    }
}
