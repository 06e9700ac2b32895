//! The 0.2 contract's imports on the host side: the paged `cache` (by subscription handle), the
//! `client` (through the plugin's [`WriteClient`] and [`EventRecorder`]), the `queue` (the
//! plugin's host-owned [`WorkQueue`]) and `log`.
//!
//! This is where a guest's namespaces, names, kinds and selectors enter the host: each is
//! checked here into the types of [`super::names`] before anything acts on it. A refusal is an
//! `invalid` error value (never a trap); a refused write is counted and logged by the
//! plugin's write client, and nothing is sent.

use std::sync::Arc;
use std::time::Duration;

use kubewasm_informer::ObjectRef as Cached;

use crate::cache::access::ResourceAccess;
use crate::cache::paging::{Page, PageError, PageLimits, page, within_budget};
use crate::client::events::{EventRecord, EventType};
use crate::client::{
    DeleteOptions, Deleted, ObjectRef, PatchBody, Propagation, Refusal, WriteClient, WriteError,
    WriteVerb,
};
use crate::contracts::v0_2::kubewasm::controller::{cache, client, log, queue, types};
use crate::model::declared::Gvk;
use crate::model::grants::describe;
use crate::model::names::{
    InvalidName, Namespace, ObjectName, {self},
};
use crate::reconcile::context::InstanceImports;
use crate::reconcile::keys::ObjectKey;
use crate::reconcile::workqueue::QueueRefusal;
use crate::wasm::state::HostState;

/// The key a guest names, checked against the queue's key limit, its subscriptions and the
/// API server's rules for a namespace and a name of the subscription's resource (so no key
/// the guest makes up carries a control character into the queue, the log or `reconcile`).
fn queued_key(imports: &InstanceImports, key: &types::Key) -> Result<ObjectKey, String> {
    let bytes = key.namespace.as_ref().map_or(0, String::len) + key.name.len();
    if bytes > imports.plugin.queue.options().max_key_bytes {
        imports.plugin.queue.count_refusal(QueueRefusal::KeyTooLong);
        return Err(imports.plugin.queue_refused(QueueRefusal::KeyTooLong, ""));
    }
    let gvk = imports.gvk(key.subscription).ok_or_else(|| {
        format!(
            "no subscription has handle {} ({} subscriptions)",
            key.subscription,
            imports.subscriptions.len()
        )
    })?;
    let checked = key
        .namespace
        .as_deref()
        .map(Namespace::new)
        .transpose()
        .and_then(|_| ObjectName::new(&gvk.group, &key.name));
    if let Err(invalid) = checked {
        imports.plugin.queue.count_refusal(QueueRefusal::InvalidKey);
        return Err(imports
            .plugin
            .queue_refused(QueueRefusal::InvalidKey, &invalid.to_string()));
    }
    Ok(ObjectKey {
        group: gvk.group.clone(),
        kind: gvk.kind.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    })
}

/// `namespace/name` (or `name`) of a key, for messages.
fn key_name(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

impl HostState {
    /// The instance's queue and client; `Err` during `init`, before they are connected.
    fn imports(&self) -> Result<&InstanceImports, String> {
        self.v0_2_imports
            .as_deref()
            .ok_or_else(|| "the client and the queue are not available in init".to_owned())
    }

    fn connected(&self) -> Result<Arc<InstanceImports>, types::ApiError> {
        self.v0_2_imports.clone().ok_or_else(|| {
            types::ApiError::NotGranted("the client is not available in init".into())
        })
    }

    /// The cached objects of subscription `handle` in `namespace` matching `label_selector`,
    /// both checked first.
    fn listed(
        &self,
        handle: u32,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<Cached>, types::CacheError> {
        let resource = self.resource(handle)?;
        let namespace = namespace
            .as_deref()
            .map(Namespace::new)
            .transpose()
            .map_err(cache_invalid)?;
        let selector = label_selector
            .as_deref()
            .map(names::label_selector)
            .transpose()
            .map_err(cache_invalid)?;
        resource
            .cache
            .list(namespace.as_ref().map(Namespace::as_str), selector)
            .map_err(types::CacheError::Invalid)
    }

    fn resource(&self, handle: u32) -> Result<&ResourceAccess, types::CacheError> {
        usize::try_from(handle)
            .ok()
            .and_then(|h| self.access.resources.get(h))
            .ok_or(types::CacheError::UnknownSubscription(handle))
    }
}

fn cache_invalid(e: InvalidName) -> types::CacheError {
    types::CacheError::Invalid(e.to_string())
}

fn page_error(e: PageError) -> types::CacheError {
    match e {
        PageError::TooLarge(max) => types::CacheError::TooLarge(max),
        PageError::BadToken(_) => types::CacheError::Invalid(e.to_string()),
    }
}

/// Bytes a list of strings takes in guest memory besides the strings: a pointer and a length.
const PER_ENTRY: usize = 8;

/// The page of cached objects `request` asks for, in the order of their store key.
fn cached_page(
    objects: Vec<Cached>,
    request: &types::PageRequest,
) -> Result<Page<Cached>, types::CacheError> {
    page(
        objects,
        |o| o.key(),
        request.limit,
        request.continue_token.as_deref(),
        PageLimits::default(),
    )
    .map_err(page_error)
}

/// A page of cached objects in the order of their store key (`namespace/name`, or `name`),
/// ended early where its objects would take more than `budget` bytes (the plugin's answer
/// budget, `max-answer-mib`): a page of the most objects allowed, each of a megabyte, would
/// otherwise be copied whole into the host and then into the guest.
fn object_page(
    objects: Vec<Cached>,
    request: &types::PageRequest,
    budget: usize,
) -> Result<types::ObjectPage, types::CacheError> {
    let mut p = cached_page(objects, request)?;
    within_budget(&mut p, |o| o.key(), |o| o.json().len() + PER_ENTRY, budget).map_err(
        |bytes| {
            types::CacheError::Invalid(format!(
                "answer too large: the next object ({}) takes {bytes} bytes, over this \
                 plugin's limit of {budget} bytes per answer (`max-answer-mib` in the config)",
                p.items.first().map_or("", |o| o.key())
            ))
        },
    )?;
    Ok(types::ObjectPage {
        objects: p.items.iter().map(|o| o.json().to_owned()).collect(),
        continue_token: p.continue_token,
    })
}

fn string_page(
    items: Vec<String>,
    request: &types::PageRequest,
) -> Result<types::StringPage, types::CacheError> {
    let p = page(
        items,
        String::as_str,
        request.limit,
        request.continue_token.as_deref(),
        PageLimits::default(),
    )
    .map_err(page_error)?;
    Ok(types::StringPage {
        items: p.items,
        continue_token: p.continue_token,
    })
}

impl types::Host for HostState {}

impl cache::Host for HostState {
    fn get(
        &mut self,
        subscription: u32,
        namespace: Option<String>,
        name: String,
    ) -> Result<Option<String>, types::CacheError> {
        let resource = self.resource(subscription)?;
        let namespace = namespace
            .as_deref()
            .map(Namespace::new)
            .transpose()
            .map_err(cache_invalid)?;
        let name = ObjectName::new(&resource.resource.group, &name).map_err(cache_invalid)?;
        Ok(resource.get(namespace.as_ref().map(Namespace::as_str), name.as_str()))
    }

    fn list_objects(
        &mut self,
        subscription: u32,
        namespace: Option<String>,
        label_selector: Option<String>,
        request: types::PageRequest,
    ) -> Result<types::ObjectPage, types::CacheError> {
        let docs = self.listed(subscription, namespace, label_selector)?;
        object_page(docs, &request, self.answer_budget)
    }

    fn list_keys(
        &mut self,
        subscription: u32,
        namespace: Option<String>,
        label_selector: Option<String>,
        request: types::PageRequest,
    ) -> Result<types::StringPage, types::CacheError> {
        let docs = self.listed(subscription, namespace, label_selector)?;
        // The page is cut from the cache's objects, and only its keys are copied.
        let p = cached_page(docs, &request)?;
        Ok(types::StringPage {
            items: p.items.iter().map(|o| o.key().to_owned()).collect(),
            continue_token: p.continue_token,
        })
    }

    fn count(
        &mut self,
        subscription: u32,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<u32, types::CacheError> {
        let docs = self.listed(subscription, namespace, label_selector)?;
        Ok(u32::try_from(docs.len()).unwrap_or(u32::MAX))
    }

    fn by_index(
        &mut self,
        subscription: u32,
        index: String,
        value: String,
        request: types::PageRequest,
    ) -> Result<types::ObjectPage, types::CacheError> {
        let resource = self.resource(subscription)?;
        let name = cache_index_name(resource, &index)?;
        let docs = resource
            .cache
            .by_index(name, &value)
            .map_err(types::CacheError::UnknownIndex)?;
        object_page(docs, &request, self.answer_budget)
    }

    fn index_values(
        &mut self,
        subscription: u32,
        index: String,
        request: types::PageRequest,
    ) -> Result<types::StringPage, types::CacheError> {
        let resource = self.resource(subscription)?;
        let name = cache_index_name(resource, &index)?;
        let values = resource
            .cache
            .index_values(name)
            .map_err(types::CacheError::UnknownIndex)?;
        string_page(values, &request)
    }

    fn has_synced(&mut self, subscription: u32) -> Result<bool, types::CacheError> {
        Ok(self.resource(subscription)?.cache.has_synced())
    }
}

fn cache_index_name<'a>(
    resource: &'a ResourceAccess,
    index: &'a str,
) -> Result<&'a str, types::CacheError> {
    resource
        .cache_index(index)
        .ok_or_else(|| types::CacheError::UnknownIndex(index.to_owned()))
}

/// A guest's reference, checked; a refusal is counted and logged by the plugin's client as a
/// refused `verb`.
fn object_ref(
    client: &WriteClient,
    verb: WriteVerb,
    r: types::ObjectRef,
) -> Result<ObjectRef, types::ApiError> {
    let gvk = Gvk {
        group: r.gvk.group,
        version: r.gvk.version,
        kind: r.gvk.kind,
    };
    ObjectRef::new(gvk, r.namespace.as_deref(), &r.name).map_err(|e| client.invalid(verb, e).into())
}

fn patch_body(p: client::PatchBody) -> PatchBody {
    match p {
        client::PatchBody::Merge(s) => PatchBody::Merge(s),
        client::PatchBody::Json(s) => PatchBody::Json(s),
        client::PatchBody::Strategic(s) => PatchBody::Strategic(s),
        client::PatchBody::Apply(a) => PatchBody::Apply {
            object: a.object,
            force: a.force,
        },
    }
}

impl client::Host for HostState {
    async fn create(&mut self, object: String) -> Result<String, types::ApiError> {
        let i = self.connected()?;
        Ok(i.api(i.client().create(&object)).await?)
    }

    async fn update(&mut self, object: String) -> Result<String, types::ApiError> {
        let i = self.connected()?;
        Ok(i.api(i.client().update(&object)).await?)
    }

    async fn update_status(&mut self, object: String) -> Result<String, types::ApiError> {
        let i = self.connected()?;
        Ok(i.api(i.client().update_status(&object)).await?)
    }

    async fn patch(
        &mut self,
        target: types::ObjectRef,
        patch: client::PatchBody,
    ) -> Result<String, types::ApiError> {
        let i = self.connected()?;
        let target = object_ref(i.client(), WriteVerb::Patch, target)?;
        let patch = patch_body(patch);
        Ok(i.api(i.client().patch(&target, &patch)).await?)
    }

    async fn patch_status(
        &mut self,
        target: types::ObjectRef,
        patch: client::PatchBody,
    ) -> Result<String, types::ApiError> {
        let i = self.connected()?;
        let target = object_ref(i.client(), WriteVerb::PatchStatus, target)?;
        let patch = patch_body(patch);
        Ok(i.api(i.client().patch_status(&target, &patch)).await?)
    }

    async fn delete(
        &mut self,
        target: types::ObjectRef,
        options: client::DeleteOptions,
    ) -> Result<client::Deleted, types::ApiError> {
        let i = self.connected()?;
        let target = object_ref(i.client(), WriteVerb::Delete, target)?;
        let options = DeleteOptions {
            uid: options.uid,
            resource_version: options.resource_version,
            propagation: options.propagation.map(|p| match p {
                client::Propagation::Orphan => Propagation::Orphan,
                client::Propagation::Background => Propagation::Background,
                client::Propagation::Foreground => Propagation::Foreground,
            }),
        };
        Ok(match i.api(i.client().delete(&target, &options)).await? {
            Deleted::Gone => client::Deleted::Gone,
            Deleted::Pending(json) => client::Deleted::Pending(json),
        })
    }

    /// Records an Event about an object the plugin may read (its read grants: an Event is
    /// about something the plugin watches, not about any object of any kind), with a `uid` of
    /// UID shape (checked by the recorder).
    async fn record_event(&mut self, event: client::Event) -> Result<(), types::ApiError> {
        let i = self.connected()?;
        let regarding = object_ref(i.client(), WriteVerb::Create, event.regarding)?;
        if !self.access.grants.allows(regarding.gvk()) {
            let gvk = regarding.gvk();
            let message = format!(
                "an Event may only be about an object the plugin may read, and it may not read \
                 {}: add it to `grants` in the plugin's config",
                describe(gvk)
            );
            return Err(i
                .client()
                .not_readable(WriteVerb::Create, gvk, message)
                .into());
        }
        let record = EventRecord {
            regarding,
            uid: event.uid,
            event_type: match event.event_type {
                client::EventType::Normal => EventType::Normal,
                client::EventType::Warning => EventType::Warning,
            },
            reason: event.reason,
            message: event.message,
        };
        Ok(i.plugin.recorder.record(record)?)
    }
}

impl queue::Host for HostState {
    fn add(&mut self, key: types::Key) -> Result<(), String> {
        let imports = self.imports()?;
        let key = queued_key(imports, &key)?;
        let named = key_name(&key);
        imports
            .plugin
            .queue
            .try_add(key)
            .map_err(|reason| imports.plugin.queue_refused(reason, &named))
    }

    fn add_after(&mut self, key: types::Key, delay_ms: u32) -> Result<(), String> {
        let imports = self.imports()?;
        let key = queued_key(imports, &key)?;
        let named = key_name(&key);
        imports
            .plugin
            .queue
            .try_add_after(key, Duration::from_millis(delay_ms.into()))
            .map_err(|reason| imports.plugin.queue_refused(reason, &named))
    }
}

crate::wasm::state::log_import!(log);

/// A write error as the 0.2 `client` import answers it.
impl From<WriteError> for types::ApiError {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::Conflict(m) => types::ApiError::Conflict(m),
            WriteError::NotFound(m) => types::ApiError::NotFound(m),
            WriteError::AlreadyExists(m) => types::ApiError::AlreadyExists(m),
            WriteError::Forbidden(m) => types::ApiError::Forbidden(m),
            WriteError::Invalid { message, causes } => {
                types::ApiError::Invalid(types::InvalidDetails {
                    message,
                    causes: causes
                        .into_iter()
                        .map(|c| types::InvalidCause {
                            field: c.field,
                            reason: c.reason,
                            message: c.message,
                        })
                        .collect(),
                })
            }
            WriteError::NotGranted(m) => types::ApiError::NotGranted(m),
            WriteError::TooManyRequests(m) => types::ApiError::TooManyRequests(m),
            WriteError::Timeout(m) => types::ApiError::Timeout(m),
            WriteError::Server {
                code,
                reason,
                message,
            } => types::ApiError::ServerError(types::ServerError {
                code,
                reason,
                message,
            }),
            WriteError::Refused { refusal, message } => match refusal {
                Refusal::NotGranted | Refusal::NotLeader => types::ApiError::NotGranted(message),
                Refusal::RateLimited => types::ApiError::TooManyRequests(message),
                Refusal::Invalid => types::ApiError::Invalid(types::InvalidDetails {
                    message,
                    causes: Vec::new(),
                }),
            },
        }
    }
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
