//! The plugin manager: loads, replaces and unloads plugins, wires them to the shared
//! informers, and reports their status.

use crate::leader::LeaderGate;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kube::api::GroupVersionKind;
use kubewasm_informer::{InformerKey, SharedIndexInformer, SharedInformerFactory};
use parking_lot::Mutex;

use super::actor::{ActorConfig, ActorHandle, DropReason, PluginState, RestartPolicy};
use super::cache_api::{Access, NAMESPACE_INDEX, ResourceAccess};
use super::component::{CompiledPlugin, Linked};
use super::engine::{EngineOptions, PluginEngine};
use super::error::PluginError;
use super::grants::{
    DeclarationLimits, Limits, PluginPolicy, PolicyLookup, StaticPolicy, describe, same_type,
};
use super::informers::{EventSource, InformerCache, InformerSubscriber, ensure_index};
use super::instance::{Instance, Outcome};
use super::log_gate::{LogGate, LogLimits};
use super::observer::{NoopObserver, Observer};
use super::workqueue::QueueStats;
use super::{Delivery, PluginInfo};

mod v0_2;

/// Identifies a loaded plugin for the life of the host (stable across `replace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginId(pub u64);

impl std::fmt::Display for PluginId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How the plugin host runs plugins.
#[derive(Clone)]
pub struct HostOptions {
    /// Where compiled components are cached (`None`: compile on every load).
    pub cache_dir: Option<PathBuf>,
    /// Limits for plugins whose policy sets none.
    pub limits: Limits,
    /// Grants, config string and limits per plugin.
    pub policy: Arc<dyn PolicyLookup>,
    /// Receives per-event and per-fault measurements.
    pub observer: Arc<dyn Observer>,
    /// How long an informer no plugin uses any more keeps running (and its cache warm) before
    /// it is stopped and its memory returned. Zero stops it at once.
    pub informer_grace: Duration,
    /// How plugins whose instances keep faulting are restarted.
    pub restart: RestartPolicy,
    /// How much a plugin's `init` may declare.
    pub declarations: DeclarationLimits,
    /// How much a plugin may log.
    pub logs: LogLimits,
    /// The client 0.2 plugins write through, built with kube's default retries off (see
    /// [`super::WriteClient::new`]); `None`: the host's client.
    pub write_client: Option<kube::Client>,
    /// Whether this replica leads: 0.2 plugins reconcile and write only while it does.
    pub leader: LeaderGate,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            cache_dir: None,
            limits: Limits::default(),
            policy: Arc::new(StaticPolicy::default()),
            observer: Arc::new(NoopObserver),
            informer_grace: Duration::ZERO,
            restart: RestartPolicy::default(),
            declarations: DeclarationLimits::default(),
            logs: LogLimits::default(),
            write_client: None,
            leader: LeaderGate::always(),
        }
    }
}

/// A snapshot of one plugin.
#[derive(Debug, Clone)]
pub struct PluginStatus {
    pub id: PluginId,
    /// The file it was loaded from.
    pub source: PathBuf,
    /// The name its `init` returned.
    pub name: String,
    /// SHA-256 of the component running now.
    pub content_hash: String,
    /// Each subscription as `group/version/Kind` plus namespace and selectors.
    pub subscriptions: Vec<String>,
    /// Handler calls that returned (ok or err).
    pub events_delivered: u64,
    /// Handler calls that returned `err`.
    pub errors: u64,
    pub traps: u64,
    pub timeouts: u64,
    pub memory_faults: u64,
    /// Fresh instances started after faults.
    pub restarts: u64,
    /// Events queued and not yet handed to the guest.
    pub queue_depth: usize,
    pub state: PluginState,
    /// Whether the plugin is failed: its restarts kept failing to complete a replay, it is
    /// tried again only rarely (its `state` shows `Running` during such a try).
    pub failed: bool,
    /// Events the plugin did not receive, by reason (`fault`, `replaced`, `quarantined`).
    pub events_dropped: Vec<(&'static str, u64)>,
    /// Whether the current instance has handled its whole replay of the cache.
    pub replay_done: bool,
    /// The last handler error, fault or failed replacement.
    pub last_error: Option<String>,
    /// A 0.2 plugin's workqueue: its depth, and how long the oldest ready key has waited.
    pub workqueue: Option<QueueStats>,
}

/// A running plugin.
struct Entry {
    source: PathBuf,
    name: String,
    hash: String,
    subscriptions: Vec<String>,
    keys: Vec<InformerKey>,
    /// The shared indexes this plugin declared, by informer.
    indexes: Vec<(InformerKey, String)>,
    actor: Arc<ActorHandle>,
    call_deadline: Duration,
    /// Why the last `replace` failed (the old version kept running).
    replace_error: Option<String>,
}

/// A plugin compiled, initialised and wired, not yet started.
struct Prepared {
    name: Arc<str>,
    hash: String,
    instance: Instance,
    config: ActorConfig,
    subscriptions: Vec<String>,
    keys: Vec<InformerKey>,
    indexes: Vec<(InformerKey, String)>,
}

/// Runs plugins as listeners of the shared informers. Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    engine: PluginEngine,
    factory: SharedInformerFactory,
    client: kube::Client,
    options: HostOptions,
    plugins: Mutex<BTreeMap<PluginId, Entry>>,
    /// The running 0.2 plugins (reconcilers), apart from the 0.1 actors.
    controllers: Mutex<BTreeMap<PluginId, v0_2::ControllerEntry>>,
    /// How many plugins use each informer the host asked the factory for.
    informer_users: Mutex<HashMap<InformerKey, Users>>,
    /// How many plugins declare each shared index, by informer and index name: an index no
    /// plugin declares any more is removed (its function would run on every event for nobody).
    index_users: Mutex<HashMap<(InformerKey, String), usize>>,
    /// Numbers each release, so a grace timer only stops an informer nobody took up since.
    releases: AtomicU64,
    next_id: AtomicU64,
    shutting_down: AtomicBool,
}

impl PluginHost {
    /// A host with its own wasm engine over `factory` (which it starts when the first plugin
    /// loads) and `client` (for discovery of subscribed resources).
    pub fn new(
        factory: SharedInformerFactory,
        client: kube::Client,
        options: HostOptions,
    ) -> Result<Self, PluginError> {
        let engine = PluginEngine::new(EngineOptions {
            cache_dir: options.cache_dir.clone(),
        })?;
        Ok(PluginHost {
            inner: Arc::new(HostInner {
                engine,
                factory,
                client,
                options,
                plugins: Mutex::new(BTreeMap::new()),
                controllers: Mutex::new(BTreeMap::new()),
                informer_users: Mutex::new(HashMap::new()),
                index_users: Mutex::new(HashMap::new()),
                releases: AtomicU64::new(0),
                next_id: AtomicU64::new(1),
                shutting_down: AtomicBool::new(false),
            }),
        })
    }

    /// The engine plugins are compiled with.
    pub fn engine(&self) -> &PluginEngine {
        &self.inner.engine
    }

    /// Compiles the component, instantiates it, calls `init`, checks the result against the
    /// plugin's grants, creates or shares its informers and indexes, and starts it: the
    /// plugin is replayed the cache, then receives live events. `source` names the plugin in
    /// errors and selects its policy.
    pub async fn load(&self, source: &Path, bytes: Vec<u8>) -> Result<PluginId, PluginError> {
        self.check_running()?;
        let compiled = self.inner.engine.compile(source, bytes).await?;
        if matches!(*compiled.pre, Linked::V0_2(_)) {
            return self.load_v0_2(source, compiled).await;
        }
        let prepared = self.prepare(compiled).await?;
        let id = PluginId(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let entry = self.start(source.to_owned(), prepared);
        tracing::info!(plugin = %entry.name, id = id.0, file = %source.display(), "plugin loaded");
        self.inner.plugins.lock().insert(id, entry);
        Ok(id)
    }

    /// Compiles, instantiates and initialises the new version first; only if that succeeds
    /// are the old version's handlers removed (after the event in hand) and the new ones
    /// registered: new informers are started, and the new version is replayed the cache
    /// before live events, so none is lost. On failure the old version keeps running and the
    /// error is recorded in its status.
    pub async fn replace(&self, id: PluginId, bytes: Vec<u8>) -> Result<(), PluginError> {
        self.check_running()?;
        if self.inner.controllers.lock().contains_key(&id) {
            let source = self
                .inner
                .controllers
                .lock()
                .get(&id)
                .map(|e| e.source.clone());
            let source = source.ok_or(PluginError::UnknownPlugin(id.0))?;
            let compiled = self.inner.engine.compile(&source, bytes).await?;
            return self.replace_v0_2(id, compiled).await;
        }
        let source = self
            .inner
            .plugins
            .lock()
            .get(&id)
            .map(|e| e.source.clone())
            .ok_or(PluginError::UnknownPlugin(id.0))?;
        let prepared = match self.inner.engine.compile(&source, bytes).await {
            Ok(compiled) if matches!(*compiled.pre, Linked::V0_2(_)) => Err(PluginError::Invalid {
                file: source.clone(),
                reason: "a 0.1 plugin cannot be replaced by a 0.2 component: unload it and \
                             load the new one"
                    .into(),
            }),
            Ok(compiled) => self.prepare(compiled).await,
            Err(e) => Err(e),
        };
        let prepared = match prepared {
            Ok(p) => p,
            Err(e) => {
                if let Some(entry) = self.inner.plugins.lock().get_mut(&id) {
                    entry.replace_error = Some(e.to_string());
                }
                // The caller decides whether to warn (a half-written file is retried quietly).
                tracing::debug!(id = id.0, file = %source.display(), "replacement refused, the old version keeps running: {e}");
                return Err(e);
            }
        };
        let old = self.inner.plugins.lock().remove(&id);
        if let Some(old) = &old {
            old.actor.stop(old.call_deadline).await;
        }
        let entry = self.start(source.clone(), prepared);
        tracing::info!(plugin = %entry.name, id = id.0, file = %source.display(), "plugin replaced");
        self.inner.plugins.lock().insert(id, entry);
        if let Some(old) = &old {
            self.forget_name(&old.name);
        }
        if let Some(old) = old {
            self.release_indexes(&old.indexes);
            self.release(&old.keys).await;
        }
        Ok(())
    }

    /// Stops the plugin (after the event in hand) and removes its handlers; informers no
    /// plugin needs any more are stopped.
    pub async fn unload(&self, id: PluginId) {
        if let Some(name) = self.unload_v0_2(id).await {
            self.forget_name(&name);
            return;
        }
        let entry = self.inner.plugins.lock().remove(&id);
        if let Some(entry) = entry {
            entry.actor.stop(entry.call_deadline).await;
            tracing::info!(plugin = %entry.name, id = id.0, "plugin unloaded");
            self.forget_name(&entry.name);
            self.release_indexes(&entry.indexes);
            self.release(&entry.keys).await;
        }
    }

    /// Tells the observer a plugin name is gone, unless a loaded plugin still has it.
    fn forget_name(&self, name: &str) {
        let in_use = self.inner.plugins.lock().values().any(|e| e.name == name)
            || self.controller_named(name);
        if !in_use {
            self.inner.options.observer.plugin_removed(name);
        }
    }

    /// Every loaded plugin's status, by id.
    pub fn plugins(&self) -> Vec<PluginStatus> {
        let plugins = self.inner.plugins.lock();
        plugins
            .iter()
            .map(|(id, e)| {
                let s = &e.actor.shared;
                let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
                PluginStatus {
                    id: *id,
                    source: e.source.clone(),
                    name: e.name.clone(),
                    content_hash: e.hash.clone(),
                    subscriptions: e.subscriptions.clone(),
                    events_delivered: load(&s.delivered),
                    errors: load(&s.errors),
                    traps: load(&s.traps),
                    timeouts: load(&s.timeouts),
                    memory_faults: load(&s.memory_faults),
                    restarts: load(&s.restarts),
                    queue_depth: s.queue.load(Ordering::Relaxed),
                    state: *s.state.lock(),
                    failed: s.failed.load(Ordering::Acquire),
                    events_dropped: DropReason::ALL
                        .iter()
                        .map(|r| (r.as_str(), s.dropped(*r)))
                        .collect(),
                    replay_done: s.replay_done(),
                    last_error: e
                        .replace_error
                        .clone()
                        .or_else(|| s.last_error.lock().clone()),
                    workqueue: None,
                }
            })
            .chain(
                self.inner
                    .controllers
                    .lock()
                    .iter()
                    .map(|(id, e)| e.status(*id)),
            )
            .collect()
    }

    /// Whether every plugin is running with its replay of the cache handled, or has failed
    /// (state `Failed`, which its status shows). A plugin restarting after a fault is not
    /// ready; one whose restarts keep failing ends up failed, so it cannot hold readiness
    /// back for ever.
    pub fn ready(&self) -> bool {
        let plugins = self.inner.plugins.lock();
        plugins.values().all(|e| e.actor.shared.ready())
            && self.inner.controllers.lock().values().all(|e| e.ready())
    }

    /// Compiles the component and calls `init` in a throw-away instance, checking the result
    /// against the policy for `source`; nothing is registered and the API server is not asked.
    pub async fn check(&self, source: &Path, bytes: &[u8]) -> Result<PluginInfo, PluginError> {
        self.check_contract(source, bytes)
            .await
            .map(|(info, _)| info)
    }

    /// As [`PluginHost::check`], with the contract the component was built for
    /// (`kubewasm:controller@0.1.0` or `@0.2.0`), as `kubewasm push` records it.
    pub async fn check_contract(
        &self,
        source: &Path,
        bytes: &[u8],
    ) -> Result<(PluginInfo, &'static str), PluginError> {
        let compiled = self.inner.engine.compile(source, bytes.to_vec()).await?;
        let policy = self.inner.options.policy.policy(source);
        if matches!(*compiled.pre, Linked::V0_2(_)) {
            let info = self.check_v0_2(&compiled, &policy).await?;
            return Ok((info, "kubewasm:controller@0.2.0"));
        }
        let (_, info) = self.init(&compiled, &policy).await?;
        Ok((info, "kubewasm:controller@0.1.0"))
    }

    /// Stops every plugin: each finishes the event in hand (bounded by `grace`), then its
    /// handlers are removed. Loads and replacements are refused from now on. The informer
    /// factory is left to its owner.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutting_down.store(true, Ordering::Release);
        self.shutdown_v0_2();
        let entries: Vec<Entry> = std::mem::take(&mut *self.inner.plugins.lock())
            .into_values()
            .collect();
        futures::future::join_all(entries.iter().map(|e| e.actor.stop(grace))).await;
    }

    fn check_running(&self) -> Result<(), PluginError> {
        if self.inner.shutting_down.load(Ordering::Acquire) {
            return Err(PluginError::ShuttingDown);
        }
        Ok(())
    }

    /// Instantiates and initialises `compiled` under `policy`, and validates what `init`
    /// declared.
    async fn init(
        &self,
        compiled: &CompiledPlugin,
        policy: &PluginPolicy,
    ) -> Result<(Instance, PluginInfo), PluginError> {
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let file = compiled.file.clone();
        let mut instance = Instance::new(
            compiled,
            label_of(&file),
            limits,
            Arc::new(Access::empty(policy.grants.clone())),
            Arc::new(LogGate::new(self.inner.options.logs)),
        )
        .await?;
        let info = init_outcome(file.clone(), instance.init(&policy.config).await)?;
        validate(&file, &info, policy, &self.inner.options.declarations)?;
        instance.set_label(info.name.as_str().into());
        Ok((instance, info))
    }

    /// Initialises the plugin and creates (or shares) its informers and indexes. On failure,
    /// informers this call created and indexes it added are released again.
    async fn prepare(&self, compiled: CompiledPlugin) -> Result<Prepared, PluginError> {
        let policy = self.inner.options.policy.policy(&compiled.file);
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let (mut instance, info) = self.init(&compiled, &policy).await?;
        let mut claims = Claims::default();
        let wired = self.wire(&compiled.file, &info, &policy, &mut claims).await;
        let (access, sources) = match wired {
            Ok(wired) => wired,
            Err(e) => {
                self.release_indexes(&claims.indexes);
                for key in &claims.created {
                    self.stop_if_unclaimed(key).await;
                }
                return Err(e);
            }
        };
        instance.set_access(access.clone());
        let kinds: Vec<String> = info
            .subscriptions
            .iter()
            .map(|s| s.gvk.kind.clone())
            .collect();
        let observer = self.inner.options.observer.plugin(&info.name, &kinds);
        let log_gate = instance.log_gate();
        log_gate.set_observer(observer.clone());
        {
            let mut users = self.inner.informer_users.lock();
            for key in &claims.keys {
                users.entry(key.clone()).or_default().plugins += 1;
            }
        }
        let name: Arc<str> = info.name.as_str().into();
        Ok(Prepared {
            name: name.clone(),
            hash: compiled.hash.clone(),
            subscriptions: info
                .subscriptions
                .iter()
                .map(describe_subscription)
                .collect(),
            keys: claims.keys,
            indexes: claims.indexes,
            instance,
            config: ActorConfig {
                name,
                compiled,
                config: policy.config,
                limits,
                access,
                resources: info.subscriptions.iter().map(|s| s.gvk.clone()).collect(),
                subscriber: Box::new(InformerSubscriber { sources }),
                observer,
                restart: self.inner.options.restart,
                log_gate,
            },
        })
    }

    /// Resolves each subscription to a shared informer and each declared index to a shared
    /// index, recording in `claims` what it took so a failure can give it back.
    async fn wire(
        &self,
        file: &Path,
        info: &PluginInfo,
        policy: &PluginPolicy,
        claims: &mut Claims,
    ) -> Result<(Arc<Access>, Vec<EventSource>), PluginError> {
        let mut informers: Vec<SharedIndexInformer> = Vec::new();
        for sub in &info.subscriptions {
            let gvk = GroupVersionKind::gvk(&sub.gvk.group, &sub.gvk.version, &sub.gvk.kind);
            let (resource, namespaced) = kubewasm_informer::resolve(&self.inner.client, &gvk)
                .await
                .map_err(|e| PluginError::UnknownResource {
                    file: file.to_owned(),
                    plugin: info.name.clone(),
                    resource: describe(&sub.gvk),
                    reason: e.to_string(),
                })?;
            if !namespaced && sub.namespace.is_some() {
                return Err(invalid(
                    file,
                    info,
                    format!(
                        "subscription: {} is cluster-scoped but a namespace was given",
                        describe(&sub.gvk)
                    ),
                ));
            }
            let key = InformerKey {
                resource,
                namespace: sub.namespace.clone(),
                label_selector: sub.label_selector.clone(),
                field_selector: sub.field_selector.clone(),
            };
            let existed = self
                .inner
                .factory
                .informers()
                .iter()
                .any(|(k, _)| *k == key);
            let informer = self.inner.factory.informer_for(key.clone());
            if !existed {
                claims.created.push(key.clone());
            }
            claims.keys.push(key);
            informers.push(informer);
        }

        let mut resources = Vec::new();
        let mut sources = Vec::new();
        for (i, (sub, informer)) in info.subscriptions.iter().zip(&informers).enumerate() {
            let key = &claims.keys[i];
            let mut indexes = HashMap::new();
            for decl in info.indexes.iter().filter(|d| same_type(&d.gvk, &sub.gvk)) {
                let shared = self
                    .claim_index(key, informer, &decl.source)
                    .map_err(|e| invalid(file, info, format!("index {}: {e}", decl.name)))?;
                claims.indexes.push((key.clone(), shared.clone()));
                indexes.insert(decl.name.clone(), shared);
            }
            resources.push(ResourceAccess {
                resource: sub.gvk.clone(),
                cache: Arc::new(InformerCache {
                    informer: informer.clone(),
                    indexer: informer.indexer(),
                }),
                indexes,
            });
            if sub.delivery == Delivery::Events {
                sources.push(EventSource {
                    subscription: i,
                    informer: informer.clone(),
                    resync: sub.resync_seconds.map(|s| Duration::from_secs(s.into())),
                });
            }
        }
        let access = Arc::new(Access {
            grants: policy.grants.clone(),
            resources,
        });
        Ok((access, sources))
    }

    /// Adds the shared index to the informer if needed and counts one more plugin using it.
    fn claim_index(
        &self,
        key: &InformerKey,
        informer: &SharedIndexInformer,
        source: &super::IndexSource,
    ) -> Result<String, kubewasm_informer::Error> {
        let mut users = self.inner.index_users.lock();
        let name = ensure_index(informer, source)?;
        *users.entry((key.clone(), name.clone())).or_default() += 1;
        Ok(name)
    }

    /// Forgets one use of each index; an index no plugin declares any more is removed from
    /// its informer.
    fn release_indexes(&self, indexes: &[(InformerKey, String)]) {
        if indexes.is_empty() {
            return;
        }
        let informers = self.inner.factory.informers();
        let mut users = self.inner.index_users.lock();
        for claim in indexes {
            let Some(count) = users.get_mut(claim) else {
                continue;
            };
            *count = count.saturating_sub(1);
            if *count > 0 {
                continue;
            }
            users.remove(claim);
            let (key, name) = claim;
            if let Some((_, informer)) = informers.iter().find(|(k, _)| k == key) {
                informer.remove_indexer(name);
                tracing::debug!(resource = %key.resource.plural, index = %name, "removed an index no plugin declares");
            }
        }
    }

    /// Stops an informer a failed load created, unless a plugin took it up meanwhile.
    async fn stop_if_unclaimed(&self, key: &InformerKey) {
        if self.inner.informer_users.lock().contains_key(key) {
            return;
        }
        let idle = self
            .inner
            .factory
            .informers()
            .iter()
            .find(|(k, _)| k == key)
            .is_some_and(|(_, i)| i.handler_count() == 0);
        if idle {
            tracing::debug!(resource = %key.resource.plural, "stopping an informer a failed load created");
            self.inner.factory.stop_informer(key).await;
        }
    }

    fn start(&self, source: PathBuf, prepared: Prepared) -> Entry {
        let call_deadline = prepared.config.limits.call_deadline;
        let actor = ActorHandle::spawn(prepared.config, prepared.instance);
        self.inner.factory.start();
        Entry {
            source,
            name: prepared.name.to_string(),
            hash: prepared.hash,
            subscriptions: prepared.subscriptions,
            keys: prepared.keys,
            indexes: prepared.indexes,
            actor: Arc::new(actor),
            call_deadline,
            replace_error: None,
        }
    }

    /// Forgets one use of each informer; stops those no plugin uses and no other handler
    /// listens to, after `informer_grace` (a plugin reloaded or loaded meanwhile that wants the
    /// same informer finds its cache warm: no new LIST).
    async fn release(&self, keys: &[InformerKey]) {
        let mut unused = Vec::new();
        {
            let mut users = self.inner.informer_users.lock();
            for key in keys {
                if let Some(u) = users.get_mut(key) {
                    u.plugins = u.plugins.saturating_sub(1);
                    if u.plugins == 0 {
                        u.released = self.inner.releases.fetch_add(1, Ordering::Relaxed) + 1;
                        unused.push((key.clone(), u.released));
                    }
                }
            }
        }
        let grace = self.inner.options.informer_grace;
        if grace.is_zero() {
            for (key, release) in unused {
                self.stop_if_unused(&key, release).await;
            }
            return;
        }
        for (key, release) in unused {
            let host = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                host.stop_if_unused(&key, release).await;
            });
        }
    }

    /// Stops the informer if no plugin took it up since `release` and no handler listens.
    async fn stop_if_unused(&self, key: &InformerKey, release: u64) {
        {
            let mut users = self.inner.informer_users.lock();
            match users.get(key) {
                Some(u) if u.plugins == 0 && u.released == release => {
                    users.remove(key);
                }
                _ => return,
            }
        }
        let idle = self
            .inner
            .factory
            .informers()
            .iter()
            .find(|(k, _)| k == key)
            .is_some_and(|(_, i)| i.handler_count() == 0);
        if idle {
            tracing::debug!(resource = %key.resource.plural, "stopping an informer no plugin uses");
            self.inner.factory.stop_informer(key).await;
        }
    }
}

/// What one load took from the shared informers, to give back if it fails.
#[derive(Default)]
struct Claims {
    /// The informer of each subscription, in order.
    keys: Vec<InformerKey>,
    /// Of those, the ones this load created.
    created: Vec<InformerKey>,
    /// Shared indexes claimed (counted in `index_users`).
    indexes: Vec<(InformerKey, String)>,
}

/// The plugins using one informer, and the last time that number fell to zero.
#[derive(Debug, Default)]
struct Users {
    plugins: usize,
    released: u64,
}

fn invalid(file: &Path, info: &PluginInfo, what: String) -> PluginError {
    PluginError::InvalidDeclaration {
        file: file.to_owned(),
        plugin: info.name.clone(),
        what,
    }
}

/// Checks `init`'s declarations: within `limits`, every subscription granted and unique,
/// every index on a subscribed resource with a fresh name.
fn validate(
    file: &Path,
    info: &PluginInfo,
    policy: &PluginPolicy,
    limits: &DeclarationLimits,
) -> Result<(), PluginError> {
    let too_many = |what: &str, n: usize, max: usize, key: &str| PluginError::OverLimit {
        file: file.to_owned(),
        what: format!(
            "{n} {what}, more than the limit of {max} (`{key}` in the config's [limits])"
        ),
    };
    if info.name.len() > limits.max_name_bytes {
        return Err(too_many(
            "bytes of plugin name",
            info.name.len(),
            limits.max_name_bytes,
            "max-name-bytes",
        ));
    }
    if info.subscriptions.len() > limits.max_subscriptions {
        return Err(too_many(
            "subscriptions",
            info.subscriptions.len(),
            limits.max_subscriptions,
            "max-subscriptions",
        ));
    }
    if info.indexes.len() > limits.max_indexes {
        return Err(too_many(
            "indexes",
            info.indexes.len(),
            limits.max_indexes,
            "max-indexes",
        ));
    }
    if info.name.trim().is_empty() {
        return Err(invalid(file, info, "name: it is empty".into()));
    }
    if info.name.chars().any(char::is_control) {
        return Err(invalid(
            file,
            info,
            "name: it holds control characters".into(),
        ));
    }
    for (i, sub) in info.subscriptions.iter().enumerate() {
        if !policy.grants.allows(&sub.gvk) {
            return Err(PluginError::NotGranted {
                file: file.to_owned(),
                plugin: info.name.clone(),
                what: describe(&sub.gvk),
            });
        }
        if info.subscriptions[..i]
            .iter()
            .any(|s| same_type(&s.gvk, &sub.gvk))
        {
            return Err(invalid(
                file,
                info,
                format!("subscription: {} twice", describe(&sub.gvk)),
            ));
        }
    }
    for (i, decl) in info.indexes.iter().enumerate() {
        if !info
            .subscriptions
            .iter()
            .any(|s| same_type(&s.gvk, &decl.gvk))
        {
            return Err(invalid(
                file,
                info,
                format!(
                    "index {}: {} is not subscribed",
                    decl.name,
                    describe(&decl.gvk)
                ),
            ));
        }
        let clash = decl.name == NAMESPACE_INDEX
            || info.indexes[..i]
                .iter()
                .any(|d| d.name == decl.name && same_type(&d.gvk, &decl.gvk));
        if clash {
            return Err(invalid(
                file,
                info,
                format!("index {}: the name is already taken", decl.name),
            ));
        }
    }
    Ok(())
}

fn describe_subscription(sub: &super::Subscription) -> String {
    let mut s = describe(&sub.gvk);
    if let Some(ns) = &sub.namespace {
        s.push_str(&format!(" ns={ns}"));
    }
    if let Some(l) = &sub.label_selector {
        s.push_str(&format!(" labels={l}"));
    }
    if let Some(f) = &sub.field_selector {
        s.push_str(&format!(" fields={f}"));
    }
    if sub.delivery == Delivery::CacheOnly {
        s.push_str(" (cache only)");
    }
    s
}

/// A plugin's short label before its `init` names it: the file name without `.wasm`.
pub(super) fn label_of(file: &Path) -> Arc<str> {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.display().to_string())
        .into()
}

/// What a call of `init` came to, as the load's result: a guest error or a fault refuses it.
pub(super) fn init_outcome<T>(file: PathBuf, outcome: Outcome<T>) -> Result<T, PluginError> {
    match outcome {
        Outcome::Ok(info) => Ok(info),
        Outcome::GuestError(reason) => Err(PluginError::InitFailed { file, reason }),
        Outcome::Failed(kind, reason) => Err(PluginError::InitTrapped {
            file,
            reason: format!("{}: {reason}", kind.as_str()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::super::grants::{Grants, ResourcePattern};
    use super::super::{Gvk, IndexDecl, IndexSource, Subscription};
    use super::*;

    fn gvk(kind: &str) -> Gvk {
        Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    fn sub(kind: &str) -> Subscription {
        Subscription {
            gvk: gvk(kind),
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            delivery: Delivery::Events,
        }
    }

    fn info(subs: Vec<Subscription>, indexes: Vec<IndexDecl>) -> PluginInfo {
        PluginInfo {
            name: "p".into(),
            subscriptions: subs,
            indexes,
        }
    }

    fn check(info: &PluginInfo, grants: Grants) -> Result<(), PluginError> {
        let policy = PluginPolicy {
            grants,
            ..PluginPolicy::default()
        };
        validate(
            Path::new("p.wasm"),
            info,
            &policy,
            &DeclarationLimits::default(),
        )
    }

    #[test]
    fn ungranted_subscription_is_refused_naming_file_and_resource() {
        let err = check(&info(vec![sub("Secret")], vec![]), Grants::default()).unwrap_err();
        assert!(matches!(err, PluginError::NotGranted { .. }));
        let msg = err.to_string();
        assert!(msg.contains("p.wasm") && msg.contains("v1/Secret"), "{msg}");
        let grants = Grants::only(vec![ResourcePattern::new("", "Secret")]);
        assert!(check(&info(vec![sub("Secret")], vec![]), grants).is_ok());
    }

    #[test]
    fn duplicate_subscription_is_refused() {
        let err = check(
            &info(vec![sub("Pod"), sub("Pod")], vec![]),
            Grants::default(),
        );
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
    }

    #[test]
    fn index_on_an_unsubscribed_resource_is_refused() {
        let decl = IndexDecl {
            name: "by-node".into(),
            gvk: gvk("Pod"),
            source: IndexSource::Field("spec.nodeName".into()),
        };
        let err = check(
            &info(vec![sub("ConfigMap")], vec![decl.clone()]),
            Grants::default(),
        );
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
        assert!(check(&info(vec![sub("Pod")], vec![decl]), Grants::default()).is_ok());
    }

    #[test]
    fn declarations_over_the_limits_are_refused_with_the_limit_and_its_key() {
        let limits = DeclarationLimits {
            max_name_bytes: 10,
            max_subscriptions: 2,
            max_indexes: 1,
        };
        let policy = PluginPolicy::default();
        let run = |info: &PluginInfo| validate(Path::new("p.wasm"), info, &policy, &limits);
        let mut long = info(vec![sub("Pod")], vec![]);
        long.name = "n".repeat(10 << 20);
        let msg = run(&long).unwrap_err().to_string();
        assert!(
            msg.starts_with("p.wasm: ")
                && msg.contains("10485760 bytes of plugin name")
                && msg.contains("max-name-bytes"),
            "{}",
            &msg[..msg.len().min(300)]
        );
        assert!(msg.len() < 300, "the refusal does not repeat the name");
        let subs = info(vec![sub("Pod"), sub("ConfigMap"), sub("Secret")], vec![]);
        let msg = run(&subs).unwrap_err().to_string();
        assert!(
            msg.contains("3 subscriptions") && msg.contains("limit of 2"),
            "{msg}"
        );
        let decl = |n: usize| IndexDecl {
            name: format!("i{n}"),
            gvk: gvk("Pod"),
            source: IndexSource::Label(format!("l{n}")),
        };
        let many = info(vec![sub("Pod")], (0..100_000).map(decl).collect());
        let msg = run(&many).unwrap_err().to_string();
        assert!(
            msg.contains("100000 indexes") && msg.contains("max-indexes"),
            "{msg}"
        );
        assert!(run(&info(vec![sub("Pod")], vec![decl(0)])).is_ok());
        let mut control = info(vec![sub("Pod")], vec![]);
        control.name = "a\nb".into();
        assert!(run(&control).is_err());
    }

    #[test]
    fn redeclaring_the_namespace_index_is_refused() {
        let decl = IndexDecl {
            name: "namespace".into(),
            gvk: gvk("Pod"),
            source: IndexSource::Label("ns".into()),
        };
        let err = check(&info(vec![sub("Pod")], vec![decl]), Grants::default());
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
    }
}
