//! The `cache` and `log` imports: the guest's read-only, granted view of the shared cache.

use std::collections::HashMap;
use std::sync::Arc;

use super::Gvk;
use super::bindings::kubewasm::controller::{cache, log, types};
use super::grants::{Grants, describe, same_type};
use super::names::{self, InvalidName, Namespace, ObjectName};
use super::state::HostState;

/// A cached object as the guest sees it: the API server's JSON, serialised once and shared.
pub trait Document: Send + Sync {
    fn json(&self) -> &str;
}

/// One cached object version, shared between the cache, every plugin queue and every call.
pub type SharedDocument = Arc<dyn Document>;

impl Document for String {
    fn json(&self) -> &str {
        self
    }
}

/// Read access to the cache of one subscribed resource (one informer's indexer).
pub(crate) trait ResourceCache: Send + Sync {
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<SharedDocument>;
    /// `Err` when the selector does not parse.
    fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<SharedDocument>, String>;
    /// `index` is the cache's own index name; `Err` when it is unknown.
    fn by_index(&self, index: &str, value: &str) -> Result<Vec<SharedDocument>, String>;
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

    fn lookup(&self, resource: &Gvk) -> Result<&ResourceAccess, types::CacheError> {
        if !self.grants.allows(resource) {
            return Err(types::CacheError::NotGranted(describe(resource)));
        }
        self.resources
            .iter()
            .find(|r| same_type(&r.resource, resource))
            .ok_or_else(|| types::CacheError::NotSubscribed(describe(resource)))
    }

    fn index<'a>(
        &self,
        access: &'a ResourceAccess,
        index: &'a str,
    ) -> Result<&'a str, types::CacheError> {
        access.cache_index(index).ok_or_else(|| {
            types::CacheError::UnknownIndex(format!("{index} on {}", describe(&access.resource)))
        })
    }
}

/// Bytes a list of strings takes in guest memory besides the strings: a pointer and a length.
const PER_ENTRY: usize = 8;

impl HostState {
    /// The objects as the guest receives them, or `invalid` when they would take more of its
    /// memory than its answer budget: the guest gets an error it can act on (narrow the
    /// query), not a memory fault while the host copies the answer in.
    fn bounded(&self, docs: Vec<SharedDocument>) -> Result<Vec<String>, types::CacheError> {
        let bytes: usize = docs.iter().map(|d| d.json().len() + PER_ENTRY).sum();
        if bytes > self.answer_budget {
            return Err(types::CacheError::Invalid(format!(
                "answer too large: {} objects, {bytes} bytes, over this plugin's limit of {} \
                 bytes per answer ({}); narrow the query with a namespace, a label selector or \
                 an index",
                docs.len(),
                self.answer_budget,
                if self.answer_budget == self.memory / 4 {
                    format!(
                        "a quarter of its {} MiB memory cap, `max-answer-mib` in the config",
                        self.memory >> 20
                    )
                } else {
                    "`max-answer-mib` in the config".to_owned()
                }
            )));
        }
        Ok(docs.iter().map(|d| d.json().to_owned()).collect())
    }
}

fn invalid(e: InvalidName) -> types::CacheError {
    types::CacheError::Invalid(e.to_string())
}

/// A guest's namespace, checked (the cache is keyed by valid namespaces only).
fn checked_namespace(namespace: Option<String>) -> Result<Option<Namespace>, types::CacheError> {
    namespace
        .as_deref()
        .map(Namespace::new)
        .transpose()
        .map_err(invalid)
}

impl types::Host for HostState {}

impl cache::Host for HostState {
    fn get(
        &mut self,
        resource: Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, types::CacheError> {
        let access = self.access.lookup(&resource)?;
        let namespace = checked_namespace(namespace)?;
        let name = ObjectName::new(&resource.group, &name).map_err(invalid)?;
        Ok(access.get(namespace.as_ref().map(Namespace::as_str), name.as_str()))
    }

    fn list_objects(
        &mut self,
        resource: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, types::CacheError> {
        let access = self.access.lookup(&resource)?;
        let namespace = checked_namespace(namespace)?;
        let selector = label_selector
            .as_deref()
            .map(names::label_selector)
            .transpose()
            .map_err(invalid)?;
        let docs = access
            .cache
            .list(namespace.as_ref().map(Namespace::as_str), selector)
            .map_err(types::CacheError::Invalid)?;
        self.bounded(docs)
    }

    fn by_index(
        &mut self,
        resource: Gvk,
        index: String,
        value: String,
    ) -> Result<Vec<String>, types::CacheError> {
        let access = self.access.lookup(&resource)?;
        let index = self.access.index(access, &index)?;
        let docs = access
            .cache
            .by_index(index, &value)
            .map_err(types::CacheError::UnknownIndex)?;
        self.bounded(docs)
    }

    fn index_values(
        &mut self,
        resource: Gvk,
        index: String,
    ) -> Result<Vec<String>, types::CacheError> {
        let access = self.access.lookup(&resource)?;
        let index = self.access.index(access, &index)?;
        access
            .cache
            .index_values(index)
            .map_err(types::CacheError::UnknownIndex)
    }

    fn has_synced(&mut self, resource: Gvk) -> Result<bool, types::CacheError> {
        Ok(self.access.lookup(&resource)?.cache.has_synced())
    }
}

impl HostState {
    /// One line the guest logged through the `log` import (of either contract), through the
    /// plugin's log cap, tagged with the plugin's name.
    pub(crate) fn guest_log(&self, level: tracing::Level, message: &str) {
        let plugin = &*self.plugin;
        let Some(message) = self.log_gate.admit(plugin, message) else {
            return;
        };
        match level {
            tracing::Level::TRACE => {
                tracing::trace!(target: "kubewasm::guest", plugin, "{message}")
            }
            tracing::Level::DEBUG => {
                tracing::debug!(target: "kubewasm::guest", plugin, "{message}")
            }
            tracing::Level::INFO => {
                tracing::info!(target: "kubewasm::guest", plugin, "{message}")
            }
            tracing::Level::WARN => {
                tracing::warn!(target: "kubewasm::guest", plugin, "{message}")
            }
            tracing::Level::ERROR => {
                tracing::error!(target: "kubewasm::guest", plugin, "{message}")
            }
        }
    }
}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => tracing::Level::TRACE,
            log::Level::Debug => tracing::Level::DEBUG,
            log::Level::Info => tracing::Level::INFO,
            log::Level::Warn => tracing::Level::WARN,
            log::Level::Error => tracing::Level::ERROR,
        };
        self.guest_log(level, &message);
    }
}
