//! [`Index`]: a named index the host computes on a subscribed resource.

use crate::bindings::kubewasm::controller::types as wit;
use crate::{Kind, Resource};

/// Where an index takes its values from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexSource {
    /// The value of a label.
    Label(String),
    /// The value of an annotation.
    Annotation(String),
    /// A dotted path into the object, e.g. `spec.nodeName`.
    Field(String),
    /// The UID of every owner reference.
    OwnerUid,
}

/// A named index on one subscribed resource, declared in `init` and computed by the host: no
/// guest code runs to index, and plugins declaring the same index share it. Query it with
/// [`Cache::by_index`](crate::Cache::by_index). The index `namespace` always exists.
///
/// ```
/// # use kubewasm_guest::{Index, k8s_openapi::api::core::v1::Pod};
/// let by_owner = Index::owner_uid::<Pod>("by-owner");
/// let by_node = Index::field::<Pod>("by-node", "spec.nodeName");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    name: String,
    resource: Resource,
    source: IndexSource,
}

impl Index {
    /// An index named `name` on `resource`, valued by `source`.
    pub fn new(name: impl Into<String>, resource: Resource, source: IndexSource) -> Self {
        Index {
            name: name.into(),
            resource,
            source,
        }
    }

    /// Objects of `K` by the value of label `key`.
    pub fn label<K: Kind>(name: impl Into<String>, key: impl Into<String>) -> Self {
        Self::new(name, K::resource(), IndexSource::Label(key.into()))
    }

    /// Objects of `K` by the value of annotation `key`.
    pub fn annotation<K: Kind>(name: impl Into<String>, key: impl Into<String>) -> Self {
        Self::new(name, K::resource(), IndexSource::Annotation(key.into()))
    }

    /// Objects of `K` by the value at a dotted field path.
    pub fn field<K: Kind>(name: impl Into<String>, path: impl Into<String>) -> Self {
        Self::new(name, K::resource(), IndexSource::Field(path.into()))
    }

    /// Objects of `K` by the UID of each of their owners.
    pub fn owner_uid<K: Kind>(name: impl Into<String>) -> Self {
        Self::new(name, K::resource(), IndexSource::OwnerUid)
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn to_wit(&self) -> wit::IndexDecl {
        wit::IndexDecl {
            name: self.name.clone(),
            gvk: self.resource.to_wit(),
            source: match &self.source {
                IndexSource::Label(key) => wit::IndexSource::Label(key.clone()),
                IndexSource::Annotation(key) => wit::IndexSource::Annotation(key.clone()),
                IndexSource::Field(path) => wit::IndexSource::Field(path.clone()),
                IndexSource::OwnerUid => wit::IndexSource::OwnerUid,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn constructors_map_to_the_wit_sources() {
        let decl = Index::label::<Pod>("by-app", "app").to_wit();
        assert_eq!(decl.name, "by-app");
        assert_eq!(decl.gvk.kind, "Pod");
        assert!(matches!(decl.source, wit::IndexSource::Label(ref key) if key == "app"));
        let field = Index::field::<Pod>("by-node", "spec.nodeName").to_wit();
        assert!(matches!(field.source, wit::IndexSource::Field(ref p) if p == "spec.nodeName"));
        let annotation = Index::annotation::<Pod>("by-team", "team").to_wit();
        assert!(matches!(annotation.source, wit::IndexSource::Annotation(ref k) if k == "team"));
        assert!(matches!(
            Index::owner_uid::<Pod>("by-owner").to_wit().source,
            wit::IndexSource::OwnerUid
        ));
    }
}
