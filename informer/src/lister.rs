//! Listers: client-go's GenericLister and GenericNamespaceLister over an informer's cache.

use kubewasm_labels::Selector;

use crate::object::ObjectRef;
use crate::store::Indexer;

/// Reads one informer's cache, optionally within one namespace.
#[derive(Clone)]
pub struct Lister {
    indexer: Indexer,
    namespace: Option<String>,
}

impl Lister {
    /// A lister over `indexer`, across all namespaces.
    pub fn new(indexer: Indexer) -> Lister {
        Lister {
            indexer,
            namespace: None,
        }
    }

    /// The same cache, restricted to `namespace`.
    pub fn by_namespace(&self, namespace: impl Into<String>) -> Lister {
        Lister {
            indexer: self.indexer.clone(),
            namespace: Some(namespace.into()),
        }
    }

    /// The namespace this lister is restricted to.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The objects whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<ObjectRef> {
        self.indexer
            .list_by_selector(self.namespace.as_deref(), selector)
    }

    /// The object called `name` (in this lister's namespace, or cluster-scoped without one).
    pub fn get(&self, name: &str) -> Option<ObjectRef> {
        self.indexer.get_by_name(self.namespace.as_deref(), name)
    }

    /// The underlying indexer.
    pub fn indexer(&self) -> &Indexer {
        &self.indexer
    }
}
