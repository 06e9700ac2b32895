//! The 0.2 contract's imports on the host side: the paged `cache` (by subscription handle), the
//! `client` (through the plugin's [`WriteClient`] and [`EventRecorder`]), the `queue` (the
//! plugin's host-owned [`WorkQueue`]) and `log`.
//!
//! This is where a guest's namespaces, names, kinds and selectors enter the host: each is
//! checked here into the types of [`super::names`] before anything acts on it. A refusal is an
//! `invalid` error value (never a trap); a refused write is counted and logged by the
//! plugin's write client, and nothing is sent.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::Gvk;
use super::bindings::v0_2::kubewasm::controller::{cache, client, log, queue, types};
use super::cache_api::{ResourceAccess, SharedDocument};
use super::client::{
    DeleteOptions, Deleted, ObjectRef, PatchBody, Propagation, Refusal, WriteClient, WriteError,
    WriteVerb,
};
use super::events::{EventRecord, EventRecorder, EventType};
use super::keys::ObjectKey;
use super::names::{self, InvalidName, Namespace, ObjectName};
use super::notices::Notices;
use super::paging::{PageError, PageLimits, page};
use super::rate_limit::TokenBucket;
use super::reconciler::ReconcileSettings;
use super::state::HostState;
use super::workqueue::{QueueMetrics, QueueRefusal, WorkQueue};

/// What the `client` and `queue` imports of one 0.2 plugin act on. Shared by its instances and
/// handed from version to version on reload (the queue, the client and the recorder belong to
/// the plugin, not to one instance).
pub(crate) struct Context {
    pub(crate) client: Arc<WriteClient>,
    pub(crate) recorder: Arc<EventRecorder>,
    pub(crate) queue: WorkQueue<ObjectKey>,
    /// What the plugin's guest calls did, for its status.
    pub(crate) calls: super::instance::CallCounters,
    /// The plugin's reconcile rate, shared by its workers and versions.
    pub(crate) reconciles: Mutex<TokenBucket>,
    /// The shortest `requeue-after` honoured.
    pub(crate) min_requeue: Duration,
    /// Fresh instances started after one faulted (reconcile workers and handlers).
    pub(crate) restarts: AtomicU64,
    /// The last failed reconcile or handler call, or fault.
    pub(crate) last_error: Mutex<Option<String>>,
    /// Which refused queue adds reach the log.
    pub(crate) queue_notices: Notices,
    /// Which failed reconciles reach the log.
    pub(crate) error_notices: Notices,
}

impl Context {
    /// The context of a plugin writing through `client` and `recorder`, with its queue and
    /// reconcile rate set by `settings`.
    pub(crate) fn new(
        client: Arc<WriteClient>,
        recorder: Arc<EventRecorder>,
        settings: &ReconcileSettings,
        metrics: Arc<dyn QueueMetrics>,
    ) -> Self {
        Context {
            client,
            recorder,
            queue: WorkQueue::new(settings.queue.clone(), metrics),
            calls: Default::default(),
            reconciles: Mutex::new(TokenBucket::new(
                settings.reconciles_per_second,
                settings.reconcile_burst,
            )),
            min_requeue: settings.min_requeue_delay,
            restarts: AtomicU64::new(0),
            last_error: Mutex::new(None),
            queue_notices: Notices::default(),
            error_notices: Notices::default(),
        }
    }

    /// Records the plugin's last error, for its status.
    pub(crate) fn record_error(&self, error: String) {
        *self.last_error.lock() = Some(error);
    }

    /// The error a guest's refused queue add answers (the queue has counted it), logged at
    /// most once a second.
    fn queue_refused(&self, reason: QueueRefusal, key: &str) -> String {
        let message = match reason {
            QueueRefusal::Full => format!(
                "the workqueue is full ({} keys): {key} not queued",
                self.queue.options().max_keys
            ),
            QueueRefusal::KeyTooLong => format!(
                "the key is longer than {} bytes: not queued",
                self.queue.options().max_key_bytes
            ),
            QueueRefusal::DelayTooLong => format!(
                "the delay is longer than {:?}: {key} not queued",
                self.queue.options().max_add_after
            ),
        };
        if let Some(unlogged) = self.queue_notices.admit(tokio::time::Instant::now()) {
            tracing::warn!(
                plugin = self.client.plugin(),
                reason = reason.as_str(),
                unlogged,
                "queue add refused: {message}"
            );
        }
        message
    }
}

/// One instance's side of the 0.2 imports: the plugin's [`Context`], the type of each of this
/// instance's subscription handles, and how long the call in progress has waited for the API
/// server (which does not count toward its deadline, nor its wall limit).
pub(crate) struct InstanceImports {
    pub(crate) plugin: Arc<Context>,
    pub(crate) subscriptions: Vec<Gvk>,
    waits: Mutex<ApiWaits>,
}

/// The time the call in progress has spent waiting for the API server.
#[derive(Debug, Default)]
struct ApiWaits {
    /// The waits of API calls that have returned.
    done: Duration,
    /// When the API call in progress started (a guest call makes one at a time).
    since: Option<Instant>,
    /// The last write of the call the host refused, and why.
    refused: Option<Refusal>,
}

impl InstanceImports {
    pub(crate) fn new(plugin: Arc<Context>, subscriptions: Vec<Gvk>) -> Self {
        InstanceImports {
            plugin,
            subscriptions,
            waits: Mutex::new(ApiWaits::default()),
        }
    }

    /// Starts counting the waits of a new guest call from zero.
    pub(crate) fn reset_waited(&self) {
        *self.waits.lock() = ApiWaits::default();
    }

    /// Time the call in progress has spent waiting for the API server so far, the API call
    /// in progress included: the wall limit excuses a wait while it happens, so a hanging API
    /// call ends at its own timeout.
    pub(crate) fn waited(&self) -> Duration {
        let waits = self.waits.lock();
        waits.done + waits.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Why the host refused the last write it refused since the guest call began, if it did.
    pub(crate) fn refused(&self) -> Option<Refusal> {
        self.waits.lock().refused
    }

    /// Runs one write, counting the time it waits as excused from the guest's deadline and
    /// remembering a refusal for the call's result.
    async fn api<T>(
        &self,
        call: impl Future<Output = Result<T, WriteError>>,
    ) -> Result<T, WriteError> {
        /// Folds the wait into `done` however the call ends (also when it is dropped).
        struct Waiting<'a>(&'a Mutex<ApiWaits>);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                let mut waits = self.0.lock();
                if let Some(since) = waits.since.take() {
                    waits.done += since.elapsed();
                }
            }
        }
        self.waits.lock().since = Some(Instant::now());
        let waiting = Waiting(&self.waits);
        let result = call.await;
        drop(waiting);
        if let Some(refusal) = result.as_ref().err().and_then(WriteError::refusal) {
            self.waits.lock().refused = Some(refusal);
        }
        result
    }

    fn client(&self) -> &WriteClient {
        &self.plugin.client
    }

    fn gvk(&self, handle: u32) -> Option<&Gvk> {
        usize::try_from(handle)
            .ok()
            .and_then(|h| self.subscriptions.get(h))
    }

    fn key(&self, key: &types::Key) -> Result<ObjectKey, String> {
        let bytes = key.namespace.as_ref().map_or(0, String::len) + key.name.len();
        if bytes > self.plugin.queue.options().max_key_bytes {
            self.plugin.queue.count_refusal(QueueRefusal::KeyTooLong);
            return Err(self.plugin.queue_refused(QueueRefusal::KeyTooLong, ""));
        }
        let gvk = self.gvk(key.subscription).ok_or_else(|| {
            format!(
                "no subscription has handle {} ({} subscriptions)",
                key.subscription,
                self.subscriptions.len()
            )
        })?;
        Ok(ObjectKey {
            group: gvk.group.clone(),
            kind: gvk.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        })
    }
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
    ) -> Result<Vec<SharedDocument>, types::CacheError> {
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

/// `namespace/name`, or `name` for a cluster-scoped object: the key order of pages.
fn object_key(doc: &SharedDocument) -> String {
    #[derive(serde::Deserialize)]
    struct Meta {
        namespace: Option<String>,
        #[serde(default)]
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Meta,
    }
    match serde_json::from_str::<Obj>(doc.json()) {
        Ok(Obj {
            metadata:
                Meta {
                    namespace: Some(ns),
                    name,
                },
        }) => format!("{ns}/{name}"),
        Ok(Obj { metadata }) => metadata.name,
        Err(_) => String::new(),
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

fn object_page(
    docs: Vec<SharedDocument>,
    request: &types::PageRequest,
) -> Result<types::ObjectPage, types::CacheError> {
    let keyed: Vec<(String, SharedDocument)> =
        docs.into_iter().map(|d| (object_key(&d), d)).collect();
    let p = page(
        keyed,
        |(k, _)| k.as_str(),
        request.limit,
        request.continue_token.as_deref(),
        PageLimits::default(),
    )
    .map_err(page_error)?;
    Ok(types::ObjectPage {
        objects: p
            .items
            .into_iter()
            .map(|(_, d)| d.json().to_owned())
            .collect(),
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
        object_page(docs, &request)
    }

    fn list_keys(
        &mut self,
        subscription: u32,
        namespace: Option<String>,
        label_selector: Option<String>,
        request: types::PageRequest,
    ) -> Result<types::StringPage, types::CacheError> {
        let docs = self.listed(subscription, namespace, label_selector)?;
        string_page(docs.iter().map(object_key).collect(), &request)
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
        object_page(docs, &request)
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

    async fn record_event(&mut self, event: client::Event) -> Result<(), types::ApiError> {
        let i = self.connected()?;
        let record = EventRecord {
            regarding: object_ref(i.client(), WriteVerb::Create, event.regarding)?,
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
        let key = imports.key(&key)?;
        let named = key_name(&key);
        imports
            .plugin
            .queue
            .try_add(key)
            .map_err(|reason| imports.plugin.queue_refused(reason, &named))
    }

    fn add_after(&mut self, key: types::Key, delay_ms: u32) -> Result<(), String> {
        let imports = self.imports()?;
        let key = imports.key(&key)?;
        let named = key_name(&key);
        imports
            .plugin
            .queue
            .try_add_after(key, Duration::from_millis(delay_ms.into()))
            .map_err(|reason| imports.plugin.queue_refused(reason, &named))
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

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
