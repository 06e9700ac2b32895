//! The 0.1 imports (`cache`, `log`, `types`) on the host's [`Access`] and log cap, and the
//! conversions between the 0.1 contract's types and the host's model: the one place that knows
//! the 0.1 bindings' types besides the instance calling the 0.1 exports.

use kubewasm_informer::ObjectRef;

use crate::cache::access::{Access, ResourceAccess};
use crate::contracts::kubewasm::controller::{cache, log, types};
use crate::model::declared::{Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription};
use crate::model::grants::{describe, same_type};
use crate::model::names::{
    InvalidName, Namespace, ObjectName, {self},
};
use crate::wasm::state::HostState;

/// The resource `resource` names in `access`: granted and subscribed, or the error the guest
/// gets.
fn lookup<'a>(access: &'a Access, resource: &Gvk) -> Result<&'a ResourceAccess, types::CacheError> {
    if !access.grants.allows(resource) {
        return Err(types::CacheError::NotGranted(describe(resource)));
    }
    access
        .resources
        .iter()
        .find(|r| same_type(&r.resource, resource))
        .ok_or_else(|| types::CacheError::NotSubscribed(describe(resource)))
}

/// The cache's name of the plugin's index `index` on `resource`.
fn cache_index<'a>(
    resource: &'a ResourceAccess,
    index: &'a str,
) -> Result<&'a str, types::CacheError> {
    resource.cache_index(index).ok_or_else(|| {
        types::CacheError::UnknownIndex(format!("{index} on {}", describe(&resource.resource)))
    })
}

/// Bytes a list of strings takes in guest memory besides the strings: a pointer and a length.
const PER_ENTRY: usize = 8;

impl HostState {
    /// The objects as the guest receives them, or `invalid` when they would take more of its
    /// memory than its answer budget: the guest gets an error it can act on (narrow the
    /// query), not a memory fault while the host copies the answer in.
    fn bounded(&self, docs: Vec<ObjectRef>) -> Result<Vec<String>, types::CacheError> {
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
        resource: types::Gvk,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, types::CacheError> {
        let resource = Gvk::from(resource);
        let access = lookup(&self.access, &resource)?;
        let namespace = checked_namespace(namespace)?;
        let name = ObjectName::new(&resource.group, &name).map_err(invalid)?;
        Ok(access.get(namespace.as_ref().map(Namespace::as_str), name.as_str()))
    }

    fn list_objects(
        &mut self,
        resource: types::Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, types::CacheError> {
        let resource = Gvk::from(resource);
        let access = lookup(&self.access, &resource)?;
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
        resource: types::Gvk,
        index: String,
        value: String,
    ) -> Result<Vec<String>, types::CacheError> {
        let resource = Gvk::from(resource);
        let access = lookup(&self.access, &resource)?;
        let index = cache_index(access, &index)?;
        let docs = access
            .cache
            .by_index(index, &value)
            .map_err(types::CacheError::UnknownIndex)?;
        self.bounded(docs)
    }

    fn index_values(
        &mut self,
        resource: types::Gvk,
        index: String,
    ) -> Result<Vec<String>, types::CacheError> {
        let resource = Gvk::from(resource);
        let access = lookup(&self.access, &resource)?;
        let index = cache_index(access, &index)?;
        access
            .cache
            .index_values(index)
            .map_err(types::CacheError::UnknownIndex)
    }

    fn has_synced(&mut self, resource: types::Gvk) -> Result<bool, types::CacheError> {
        Ok(lookup(&self.access, &Gvk::from(resource))?
            .cache
            .has_synced())
    }
}

crate::wasm::state::log_import!(log);

impl From<types::Gvk> for Gvk {
    fn from(g: types::Gvk) -> Self {
        Gvk {
            group: g.group,
            version: g.version,
            kind: g.kind,
        }
    }
}

impl From<&Gvk> for types::Gvk {
    fn from(g: &Gvk) -> Self {
        types::Gvk {
            group: g.group.clone(),
            version: g.version.clone(),
            kind: g.kind.clone(),
        }
    }
}

impl From<types::PluginInfo> for PluginInfo {
    fn from(info: types::PluginInfo) -> Self {
        PluginInfo {
            name: info.name,
            subscriptions: info
                .subscriptions
                .into_iter()
                .map(|s| Subscription {
                    gvk: s.gvk.into(),
                    namespace: s.namespace,
                    label_selector: s.label_selector,
                    field_selector: s.field_selector,
                    resync_seconds: s.resync_seconds,
                    delivery: match s.delivery {
                        types::Delivery::Events => Delivery::Events,
                        types::Delivery::CacheOnly => Delivery::CacheOnly,
                    },
                })
                .collect(),
            indexes: info
                .indexes
                .into_iter()
                .map(|d| IndexDecl {
                    name: d.name,
                    gvk: d.gvk.into(),
                    source: match d.source {
                        types::IndexSource::Label(k) => IndexSource::Label(k),
                        types::IndexSource::Annotation(k) => IndexSource::Annotation(k),
                        types::IndexSource::Field(p) => IndexSource::Field(p),
                        types::IndexSource::OwnerUid => IndexSource::OwnerUid,
                    },
                })
                .collect(),
        }
    }
}
