//! A plugin's read access to the shared cache: the documents it sees, and for each subscribed
//! resource the cache and the declared indexes it may query, under its grants. Contract-free:
//! each contract's `cache` import reads through it.

use std::collections::HashMap;
use std::sync::Arc;

use kubewasm_informer::ObjectRef;

use crate::model::declared::Gvk;
use crate::model::grants::Grants;

/// Read access to the cache of one subscribed resource (one informer's indexer).
pub(crate) trait ResourceCache: Send + Sync {
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<ObjectRef>;
    /// `Err` when the selector does not parse.
    fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, String>;
    /// `index` is the cache's own index name; `Err` when it is unknown.
    fn by_index(&self, index: &str, value: &str) -> Result<Vec<ObjectRef>, String>;
    fn index_values(&self, index: &str) -> Result<Vec<String>, String>;
    fn has_synced(&self) -> bool;
}

/// One subscribed resource as the guest may query it.
pub(crate) struct ResourceAccess {
    pub(crate) resource: Gvk,
    pub(crate) cache: Arc<dyn ResourceCache>,
    /// The plugin's index names mapped to the cache's (shared) index names.
    pub(crate) indexes: HashMap<String, String>,
}

impl ResourceAccess {
    /// The cache's name of the plugin's index `index` (`namespace` is the same in both).
    pub(crate) fn cache_index<'a>(&'a self, index: &'a str) -> Option<&'a str> {
        if index == NAMESPACE_INDEX {
            return Some(NAMESPACE_INDEX);
        }
        self.indexes.get(index).map(String::as_str)
    }

    /// The object's JSON, as the guest receives it.
    pub(crate) fn get(&self, namespace: Option<&str>, name: &str) -> Option<String> {
        self.cache.get(namespace, name).map(|d| d.json().to_owned())
    }
}

/// Everything one plugin may read: its grants and its subscribed resources.
pub(crate) struct Access {
    pub(crate) grants: Grants,
    pub(crate) resources: Vec<ResourceAccess>,
}

/// The index every resource has, under the same name in plugin and cache.
pub(crate) const NAMESPACE_INDEX: &str = "namespace";

impl Access {
    /// Access to nothing (before `init` has declared subscriptions).
    pub(crate) fn empty(grants: Grants) -> Self {
        Access {
            grants,
            resources: Vec::new(),
        }
    }
}
