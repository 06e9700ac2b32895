//! The plugin manager: loads, replaces and unloads plugins, wires them to the shared
//! informers, and reports their status.

use crate::leader_gate::LeaderGate;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kube::api::GroupVersionKind;
use kubewasm_informer::{InformerKey, KindResolver, SharedIndexInformer, SharedInformerFactory};
use parking_lot::Mutex;

use crate::cache::access::{Access, ResourceAccess};
use crate::error::PluginError;
use crate::events::event_loop::{ActorConfig, ActorHandle, PluginState, RestartPolicy};
use crate::events::informers::{EventSource, InformerCache, InformerSubscriber};
use crate::guest::calls::CallCounters;
use crate::guest::declare::{CheckOptions, Contract, checked_scope, declare_v0_1, invalid};
use crate::guest::instance::{Instance, Recipe};
use crate::guest::log_gate::{LogLimits, LogTap};
use crate::manager::controller::{Controller, QueueFeeder};
use crate::manager::leases::{Claims, Leases};
use crate::manager::policy::{PluginPolicy, PolicyLookup, StaticPolicy};
use crate::model::declared::{Delivery, PluginInfo};
use crate::model::grants::{DeclarationLimits, Limits, describe, same_type};
use crate::model::identity::PluginKey;
use crate::observer::{DropReason, NoopObserver, Observer, PluginObserver};
use crate::reconcile::workqueue::QueueStats;
use crate::wasm::component::{CompiledPlugin, Linked, Origin};
use crate::wasm::engine::{EngineOptions, PluginEngine};
use crate::wasm::state::MemoryUse;

use crate::admission::policy::{AdmissionPolicy, Authority};
use crate::client::events::{EventRecorder, RecorderOptions};
use crate::client::{Resources, WriteClient};
use crate::guest::declare::{Declared, declare_v0_2, v0_2_pre};
use crate::reconcile::context::Context;
use crate::reconcile::reconciler::{
    CacheSync, spawn_workers, {self},
};

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
    /// [`crate::WriteClient::new`]); `None`: the host's client.
    pub write_client: Option<kube::Client>,
    /// Whether this replica leads: 0.2 plugins reconcile and write only while it does.
    pub leader: LeaderGate,
    /// Where plugins of contract 0.3 register their admission policies for the webhook
    /// server (`kubewasm run --webhook-addr`).
    pub admission: crate::admission::registry::AdmissionRegistry,
    /// Where every plugin's log lines are also kept (`kubewasm test`); `None`: only logged.
    pub log_tap: Option<LogTap>,
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
            admission: crate::admission::registry::AdmissionRegistry::default(),
            log_tap: None,
        }
    }
}

/// A snapshot of one plugin.
#[derive(Debug, Clone)]
pub struct PluginStatus {
    pub id: PluginId,
    /// Who the plugin is: its file's stem, also its key in the config. Metrics, logs and
    /// webhooks name it by this.
    pub key: PluginKey,
    /// The file it was loaded from.
    pub source: PathBuf,
    /// The name its `init` returned: a label for people, never a key.
    pub name: String,
    /// The contract version and world the running component was built for.
    pub contract: Contract,
    /// SHA-256 of the component running now.
    pub content_hash: String,
    /// Where the running version's compiled code came from: compiled at its load, the
    /// host's compile cache, verified precompiled code, or a copy already loaded.
    pub origin: Origin,
    /// Each subscription as `group/version/Kind` plus namespace and selectors.
    pub subscriptions: Vec<String>,
    /// Events handled by handler calls that returned (ok or err); reconciles are not events.
    pub events_delivered: u64,
    /// Events whose handler call returned `err`.
    pub errors: u64,
    /// Reconciles that returned (ok or err), for 0.2 plugins.
    pub reconciles: u64,
    /// Reconciles that returned `err`.
    pub reconcile_errors: u64,
    pub traps: u64,
    pub timeouts: u64,
    pub memory_faults: u64,
    /// Fresh instances started after faults (for 0.2 plugins: reconcile and handler
    /// instances).
    pub restarts: u64,
    /// Events queued and not yet handed to the guest.
    pub queue_depth: usize,
    /// Resyncs its subscriptions declined because their previous one was still queued.
    pub resyncs_skipped: u64,
    pub state: PluginState,
    /// Whether the plugin is failed: its restarts kept failing to complete a replay, it is
    /// tried again only rarely (its `state` shows `Running` during such a try).
    pub failed: bool,
    /// Events the plugin did not receive, by reason (`fault`, `replaced`, `quarantined`).
    pub events_dropped: Vec<(&'static str, u64)>,
    /// Whether the current instance has handled its whole replay of the cache.
    pub replay_done: bool,
    /// The last handler or reconcile error, fault, or failed replacement.
    pub last_error: Option<String>,
    /// A 0.2 plugin's workqueue: its depth, and how long the oldest ready key has waited.
    pub workqueue: Option<QueueStats>,
    /// The webhooks a plugin of contract 0.3 serves.
    pub admission: Option<crate::admission::declaration::Declaration>,
    /// What its policy lets it read (its subscriptions, cache queries, indexes, Events and
    /// validating webhooks are checked against these), as [`Grants::describe`] prints them.
    ///
    /// [`Grants::describe`]: crate::Grants::describe
    pub reads: Vec<String>,
    /// What it may write (writes and mutating webhooks), as
    /// [`WriteGrants::describe`](crate::WriteGrants::describe) prints them.
    pub writes: Vec<String>,
    /// Why its webhook configurations could not be stored in the API server the host
    /// configures (`kubewasm dev`, `kubewasm test`); `None` when stored or not configured here.
    pub admission_unconfigured: Option<String>,
    /// The linear memory its live instances hold now, in bytes (the handler instance and each
    /// reconcile worker's); what the host keeps for it, such as the cache, is not in it.
    pub memory_bytes: usize,
}

impl PluginStatus {
    /// What every plugin reports alike: what it is and how its guest calls ended; the rest
    /// as for a plugin running with nothing queued, dropped or failed.
    fn new(
        id: PluginId,
        key: &PluginKey,
        source: &Path,
        name: &str,
        hash: &str,
        subscriptions: &[String],
        calls: &CallCounters,
    ) -> Self {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PluginStatus {
            id,
            key: key.clone(),
            source: source.to_owned(),
            name: name.to_owned(),
            contract: Contract::V0_1,
            content_hash: hash.to_owned(),
            origin: Origin::Compiled,
            subscriptions: subscriptions.to_vec(),
            events_delivered: load(&calls.returned),
            errors: load(&calls.errors),
            reconciles: load(&calls.reconciles),
            reconcile_errors: load(&calls.reconcile_errors),
            traps: load(&calls.traps),
            timeouts: load(&calls.timeouts),
            memory_faults: load(&calls.memory_faults),
            restarts: 0,
            queue_depth: 0,
            resyncs_skipped: 0,
            state: PluginState::Running,
            failed: false,
            events_dropped: DropReason::ALL
                .iter()
                .map(|r| (r.as_str(), calls.dropped(*r)))
                .collect(),
            replay_done: false,
            last_error: None,
            workqueue: None,
            admission: None,
            reads: Vec::new(),
            writes: Vec::new(),
            admission_unconfigured: None,
            memory_bytes: 0,
        }
    }
}

/// A loaded plugin, whatever its contract version.
struct Entry {
    key: PluginKey,
    source: PathBuf,
    /// The name its `init` declared (a label).
    name: String,
    contract: Contract,
    hash: String,
    origin: Origin,
    subscriptions: Vec<String>,
    keys: Vec<InformerKey>,
    /// The shared indexes this plugin declared, by informer.
    indexes: Vec<(InformerKey, String)>,
    call_deadline: Duration,
    /// The event loop of its subscriptions with events (`None`: a 0.2 plugin without).
    actor: Option<Arc<ActorHandle>>,
    /// A 0.2 plugin's context, queue feeders and reconcile workers.
    controller: Option<Controller>,
    /// Why the last `replace` failed (the old version kept running).
    replace_error: Option<String>,
    /// The linear memory its instances hold.
    memory: MemoryUse,
    /// Its effective grants, described (see [`PluginStatus::reads`]).
    reads: Vec<String>,
    writes: Vec<String>,
}

impl Entry {
    /// The entry of a plugin loaded from `compiled` that declared `info` and holds `claims`,
    /// with nothing started yet.
    fn new(
        key: PluginKey,
        compiled: &CompiledPlugin,
        info: &PluginInfo,
        claims: Claims,
        limits: Limits,
        policy: &PluginPolicy,
        memory: MemoryUse,
    ) -> Self {
        Entry {
            memory,
            reads: policy.grants.describe(),
            writes: policy.writes.describe(),
            key,
            source: compiled.file.clone(),
            name: info.name.clone(),
            contract: match &*compiled.pre {
                Linked::V0_1(_) => Contract::V0_1,
                Linked::V0_2(pre) => Contract::V0_2(pre.world()),
            },
            hash: compiled.hash.clone(),
            origin: compiled.origin,
            subscriptions: info
                .subscriptions
                .iter()
                .map(describe_subscription)
                .collect(),
            keys: claims.keys,
            indexes: claims.indexes,
            call_deadline: limits.call_deadline,
            actor: None,
            controller: None,
            replace_error: None,
        }
    }

    /// Stops the plugin: its reconcile workers (a key being reconciled goes back to the
    /// queue) and queue feeders at once, its event loop after the call in hand. The queue is
    /// left to the caller (a replacing 0.2 version takes it over).
    async fn stop(&mut self) {
        if let Some(controller) = &mut self.controller {
            controller.stop();
        }
        if let Some(actor) = &self.actor {
            actor.stop(self.call_deadline).await;
        }
    }

    /// Whether the plugin is ready: its event loop running with its replay handled (or
    /// failed), and its queue feeders synced.
    fn ready(&self) -> bool {
        self.actor.as_ref().is_none_or(|a| a.shared.ready())
            && self.controller.as_ref().is_none_or(Controller::synced)
    }

    fn status(&self, id: PluginId) -> PluginStatus {
        let actor = self.actor.as_ref().map(|a| &a.shared);
        let context = self.controller.as_ref().map(|c| &c.context);
        // A 0.2 event loop counts into its context's counters: one set either way.
        // Neither an event loop nor a controller: nothing runs, nothing was counted.
        let (none, no_restarts, no_error) = Default::default();
        let (calls, restarts, last_error) = match (context, actor) {
            (Some(c), _) => (&*c.calls, &*c.restarts, &*c.last_error),
            (None, Some(a)) => (&*a.calls, &*a.restarts, &*a.last_error),
            (None, None) => (&none, &no_restarts, &no_error),
        };
        let workqueue = context.map(|c| c.queue.stats());
        PluginStatus {
            restarts: restarts.load(Ordering::Relaxed),
            queue_depth: actor.map_or(0, |a| a.inbox.depth())
                + workqueue.as_ref().map_or(0, |q| q.depth),
            resyncs_skipped: actor.map_or(0, |a| a.inbox.resyncs_skipped()),
            state: match (actor, &self.controller) {
                (Some(a), _) => *a.state.lock(),
                (None, Some(c)) if c.working() || c.admission.is_some() => PluginState::Running,
                (None, _) => PluginState::Stopped,
            },
            failed: actor.is_some_and(|a| a.failed.load(Ordering::Acquire)),
            replay_done: actor.is_none_or(|a| a.replay_done())
                && self.controller.as_ref().is_none_or(Controller::synced),
            last_error: self
                .replace_error
                .clone()
                .or_else(|| last_error.lock().clone()),
            workqueue,
            admission: self
                .controller
                .as_ref()
                .and_then(|c| c.admission.as_ref())
                .map(|r| r.policy().declaration().clone()),
            memory_bytes: self.memory.bytes(),
            contract: self.contract,
            origin: self.origin,
            reads: self.reads.clone(),
            writes: self.writes.clone(),
            ..PluginStatus::new(
                id,
                &self.key,
                &self.source,
                &self.name,
                &self.hash,
                &self.subscriptions,
                calls,
            )
        }
    }
}

/// A plugin declared, checked and wired, its event loop not started yet (a 0.2 plugin's queue
/// feeders and reconcile workers are).
struct Prepared {
    entry: Entry,
    /// What its event loop is made of, with its first instance (`None`: no subscription with
    /// events).
    actor: Option<(ActorConfig, Instance)>,
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
    /// The resources serving subscribed kinds, discovered once per kind.
    kinds: KindResolver,
    /// The same for every plugin's writes and events, shared by their clients.
    resources: Arc<Resources>,
    /// Which plugins use each informer and index.
    leases: Leases,
    options: HostOptions,
    /// Every loaded plugin, of any contract version.
    plugins: Mutex<BTreeMap<PluginId, Entry>>,
    /// The keys of plugins being loaded, with their file (locked after `plugins`).
    reserved: Mutex<HashMap<PluginKey, PathBuf>>,
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
        let kinds = KindResolver::new(client.clone());
        let resources = Arc::new(Resources::sharing(kinds.clone()));
        Ok(PluginHost {
            inner: Arc::new(HostInner {
                engine,
                leases: Leases::new(factory.clone(), options.informer_grace),
                factory,
                client,
                kinds,
                resources,
                options,
                plugins: Mutex::new(BTreeMap::new()),
                reserved: Mutex::new(HashMap::new()),
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
    ///
    /// The plugin is known by its file's stem ([`PluginKey`]): a file whose stem a loaded
    /// plugin already has is refused, naming both files.
    pub async fn load(&self, source: &Path, bytes: Vec<u8>) -> Result<PluginId, PluginError> {
        self.check_running()?;
        let key = PluginKey::of(source)?;
        let id = PluginId(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        self.reserve(&key, source)?;
        let loaded = async {
            let compiled = self.inner.engine.compile(source, bytes).await?;
            self.inner.options.observer.code_loaded(compiled.origin);
            self.prepare(source, compiled, None).await
        };
        let prepared = match loaded.await {
            Ok(prepared) => prepared,
            Err(e) => {
                self.inner.reserved.lock().remove(&key);
                return Err(e);
            }
        };
        let entry = self.start(prepared);
        tracing::info!(plugin = %key, name = %entry.name, id = id.0, file = %source.display(), "plugin loaded");
        let mut plugins = self.inner.plugins.lock();
        plugins.insert(id, entry);
        self.inner.reserved.lock().remove(&key);
        Ok(id)
    }

    /// Holds `key` for the plugin being loaded from `source`; refused when a loaded
    /// plugin, or one being loaded, has it.
    fn reserve(&self, key: &PluginKey, source: &Path) -> Result<(), PluginError> {
        let plugins = self.inner.plugins.lock();
        let mut reserved = self.inner.reserved.lock();
        let other = plugins
            .values()
            .find(|e| &e.key == key)
            .map(|e| e.source.clone())
            .or_else(|| reserved.get(key).cloned());
        if let Some(other) = other {
            return Err(PluginError::DuplicateKey {
                file: source.to_owned(),
                key: key.to_string(),
                other,
            });
        }
        reserved.insert(key.clone(), source.to_owned());
        Ok(())
    }

    /// Compiles, instantiates and initialises the new version first; only if that succeeds
    /// are the old version's handlers removed (after the event in hand) and the new ones
    /// registered: new informers are started, and the new version is replayed the cache
    /// before live events, so none is lost. On failure the old version keeps running and the
    /// error is recorded in its status.
    ///
    /// The new version may be of another contract version (0.1 to 0.2 and back). A 0.2
    /// version replacing a 0.2 version takes over its queue, write client and recorder: its
    /// queue rules are registered (replaying the cache into the queue) before the old
    /// version's are removed, so no change goes unqueued, and the key an old worker held goes
    /// back to the queue. A 0.1 version replacing a 0.2 one ends the old queue.
    pub async fn replace(&self, id: PluginId, bytes: Vec<u8>) -> Result<(), PluginError> {
        self.check_running()?;
        let (source, context) = self
            .inner
            .plugins
            .lock()
            .get(&id)
            .map(|e| {
                let context = e.controller.as_ref().map(|c| c.context.clone());
                (e.source.clone(), context)
            })
            .ok_or(PluginError::UnknownPlugin(id.0))?;
        let prepared = match self.inner.engine.compile(&source, bytes).await {
            Ok(compiled) => {
                self.inner.options.observer.code_loaded(compiled.origin);
                self.prepare(&source, compiled, context).await
            }
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
        let mut old = old.ok_or(PluginError::UnknownPlugin(id.0))?;
        old.stop().await;
        let entry = self.start(prepared);
        let queue_kept = match (&old.controller, &entry.controller) {
            (Some(o), Some(n)) => Arc::ptr_eq(&o.context, &n.context),
            _ => false,
        };
        if let Some(controller) = &old.controller
            && !queue_kept
        {
            controller.context.queue.shut_down();
        }
        tracing::info!(plugin = %entry.key, name = %entry.name, id = id.0, file = %source.display(), queue_kept, "plugin replaced");
        self.inner.plugins.lock().insert(id, entry);
        self.inner.leases.release(&old.keys, &old.indexes).await;
        Ok(())
    }

    /// Stops the plugin (after the event in hand), removes its handlers and shuts its queue
    /// down; informers no plugin needs any more are stopped.
    pub async fn unload(&self, id: PluginId) {
        let entry = self.inner.plugins.lock().remove(&id);
        if let Some(mut entry) = entry {
            entry.stop().await;
            if let Some(controller) = &entry.controller {
                controller.context.queue.shut_down();
            }
            tracing::info!(plugin = %entry.key, name = %entry.name, id = id.0, "plugin unloaded");
            self.inner
                .options
                .observer
                .plugin_removed(entry.key.as_str());
            self.inner.leases.release(&entry.keys, &entry.indexes).await;
        }
    }

    /// Every loaded plugin's status, by id.
    pub fn plugins(&self) -> Vec<PluginStatus> {
        let plugins = self.inner.plugins.lock();
        let admission = &self.inner.options.admission;
        plugins
            .iter()
            .map(|(id, e)| {
                let mut status = e.status(*id);
                if status.admission.is_some() {
                    status.admission_unconfigured = admission.unconfigured(&status.name);
                }
                status
            })
            .collect()
    }

    /// Whether every plugin is running with its replay of the cache handled, or has failed
    /// (state `Failed`, which its status shows). A plugin restarting after a fault is not
    /// ready; one whose restarts keep failing ends up failed, so it cannot hold readiness
    /// back for ever.
    pub fn ready(&self) -> bool {
        self.inner.plugins.lock().values().all(Entry::ready)
    }

    /// [`check`](crate::check) with this host's engine, options and the policy for `source`.
    pub async fn check(&self, source: &Path, bytes: &[u8]) -> Result<PluginInfo, PluginError> {
        let policy = self.inner.options.policy.policy(source);
        let checked = crate::guest::declare::check(
            &self.inner.engine,
            source,
            bytes.to_vec(),
            &policy,
            &self.check_options(),
        )
        .await?;
        Ok(checked.info)
    }

    /// What declarations are checked with.
    fn check_options(&self) -> CheckOptions {
        CheckOptions {
            limits: self.inner.options.limits,
            declarations: self.inner.options.declarations,
            logs: self.inner.options.logs,
            log_tap: self.inner.options.log_tap.clone(),
        }
    }

    /// Stops every plugin: each finishes the event in hand (bounded by `grace`), then its
    /// handlers are removed. Loads and replacements are refused from now on. The informer
    /// factory is left to its owner.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.shutting_down.store(true, Ordering::Release);
        let mut entries: Vec<Entry> = std::mem::take(&mut *self.inner.plugins.lock())
            .into_values()
            .collect();
        for entry in &mut entries {
            entry.call_deadline = grace;
        }
        futures::future::join_all(entries.iter_mut().map(Entry::stop)).await;
        for entry in &entries {
            if let Some(controller) = &entry.controller {
                controller.context.queue.shut_down();
            }
        }
    }

    fn check_running(&self) -> Result<(), PluginError> {
        if self.inner.shutting_down.load(Ordering::Acquire) {
            return Err(PluginError::ShuttingDown);
        }
        Ok(())
    }

    /// Initialises the plugin and creates (or shares) its informers and indexes, as its
    /// contract version has it. On failure, informers this call created and indexes it added
    /// are released again. `context`: the queue, client and recorder a 0.2 version takes over.
    async fn prepare(
        &self,
        source: &Path,
        compiled: CompiledPlugin,
        context: Option<Arc<crate::reconcile::context::Context>>,
    ) -> Result<Prepared, PluginError> {
        if matches!(*compiled.pre, Linked::V0_2(_)) {
            return self.prepare_v0_2(source, compiled, context).await;
        }
        let key = PluginKey::of(source)?;
        let policy = self.inner.options.policy.policy(&compiled.file);
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let (mut instance, info) = declare_v0_1(&compiled, &policy, &self.check_options()).await?;
        let (claims, access, sources) = self.lease(&compiled.file, &info, &policy).await?;
        instance.set_access(access.clone());
        let observer = self.observer(&key, &info);
        let log_gate = instance.log_gate();
        log_gate.set_observer(observer.clone());
        let name = key.to_arc();
        let config = ActorConfig {
            recipe: Recipe {
                compiled: compiled.clone(),
                name: name.clone(),
                config: policy.config.clone(),
                limits,
                access,
                log_gate,
                memory: instance.memory_use(),
                context: None,
            },
            resources: info.subscriptions.iter().map(|s| s.gvk.clone()).collect(),
            subscriber: Box::new(InformerSubscriber { sources }),
            observer,
            restart: self.inner.options.restart,
        };
        Ok(Prepared {
            entry: Entry::new(
                key,
                &compiled,
                &info,
                claims,
                limits,
                &policy,
                config.recipe.memory.clone(),
            ),
            actor: Some((config, instance)),
        })
    }

    /// The measurement handles of the plugin `key`, which declared `info`.
    fn observer(&self, key: &PluginKey, info: &PluginInfo) -> Arc<dyn PluginObserver> {
        let kinds: Vec<String> = info
            .subscriptions
            .iter()
            .map(|s| s.gvk.kind.clone())
            .collect();
        self.inner.options.observer.plugin(key.as_str(), &kinds)
    }

    /// Leases the plugin's informers and indexes ([`wire`](Self::wire)); on failure what it
    /// took is given back.
    async fn lease(
        &self,
        file: &Path,
        info: &PluginInfo,
        policy: &PluginPolicy,
    ) -> Result<(Claims, Arc<Access>, Vec<EventSource>), PluginError> {
        let mut claims = Claims::default();
        match self.wire(file, info, policy, &mut claims).await {
            Ok((access, sources)) => {
                self.inner.leases.commit(&claims);
                Ok((claims, access, sources))
            }
            Err(e) => {
                self.inner.leases.abandon(&claims).await;
                Err(e)
            }
        }
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
        for (i, sub) in info.subscriptions.iter().enumerate() {
            let namespace =
                checked_scope(sub).map_err(|e| invalid(file, format!("subscription {i}: {e}")))?;
            let gvk = GroupVersionKind::gvk(&sub.gvk.group, &sub.gvk.version, &sub.gvk.kind);
            let (resource, namespaced) =
                self.inner
                    .kinds
                    .resolve(&gvk)
                    .await
                    .map_err(|e| PluginError::UnknownResource {
                        file: file.to_owned(),
                        plugin: crate::guest::declare::label_of(file).to_string(),
                        resource: describe(&sub.gvk),
                        reason: format!("discovery failed: {e}"),
                    })?;
            if !namespaced && namespace.is_some() {
                return Err(invalid(
                    file,
                    format!(
                        "subscription: {} is cluster-scoped but a namespace was given",
                        describe(&sub.gvk)
                    ),
                ));
            }
            let key = InformerKey {
                resource,
                namespace: namespace.map(|ns| ns.as_str().to_owned()),
                label_selector: sub.label_selector.clone(),
                field_selector: sub.field_selector.clone(),
            };
            informers.push(self.inner.leases.informer(key, claims));
        }

        let mut resources = Vec::new();
        let mut sources = Vec::new();
        for (i, (sub, informer)) in info.subscriptions.iter().zip(&informers).enumerate() {
            let key = claims.keys[i].clone();
            let mut indexes = HashMap::new();
            for decl in info.indexes.iter().filter(|d| same_type(&d.gvk, &sub.gvk)) {
                let shared = self
                    .inner
                    .leases
                    .index(
                        &key,
                        informer,
                        &decl.source,
                        &self.inner.options.declarations,
                        claims,
                    )
                    .map_err(|e| invalid(file, format!("index {}: {e}", decl.name)))?;
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

    /// Starts the event loop of a prepared plugin (it registers its handlers: the replay
    /// first, then live events) and the informers it needs.
    fn start(&self, prepared: Prepared) -> Entry {
        let Prepared { mut entry, actor } = prepared;
        entry.actor =
            actor.map(|(config, instance)| Arc::new(ActorHandle::spawn(config, instance)));
        self.inner.factory.start();
        entry
    }
}

fn describe_subscription(sub: &crate::model::declared::Subscription) -> String {
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

impl PluginHost {
    /// Prepares a 0.2 component: declares it, wires its informers and indexes, registers its
    /// queue rules and starts its reconcile workers; its event loop (for subscriptions with
    /// events) is left for [`start`](PluginHost::start). `context`: the queue, client and
    /// recorder of the 0.2 version it replaces (`None`: new ones).
    async fn prepare_v0_2(
        &self,
        source: &Path,
        compiled: CompiledPlugin,
        context: Option<Arc<Context>>,
    ) -> Result<Prepared, PluginError> {
        let key = PluginKey::of(source)?;
        let policy = self.inner.options.policy.policy(&compiled.file);
        let limits = policy.limits.unwrap_or(self.inner.options.limits);
        let Declared {
            info,
            rules,
            filters,
            events,
            world,
            mut instance,
        } = declare_v0_2(&compiled, &policy, &self.check_options()).await?;
        let (claims, access, mut sources) = self.lease(&compiled.file, &info, &policy).await?;
        let name = key.to_arc();
        let context = context.unwrap_or_else(|| self.new_context(&name, &policy));
        let informers = self.inner.factory.informers();
        let mut registrations = Vec::new();
        let mut caches = Vec::new();
        for (((sub, rules), filters), key) in info
            .subscriptions
            .iter()
            .zip(rules)
            .zip(filters)
            .zip(&claims.keys)
        {
            let Some((_, informer)) = informers.iter().find(|(k, _)| k == key) else {
                continue;
            };
            caches.push(informer.clone());
            if rules.is_empty() {
                continue;
            }
            let resync = sub
                .resync_seconds
                .map(|s| std::time::Duration::from_secs(s.into()));
            let feeder = Arc::new(QueueFeeder {
                group: sub.gvk.group.clone(),
                kind: sub.gvk.kind.clone(),
                rules,
                filters,
                queue: context.queue.clone(),
            });
            registrations.push((
                informer.clone(),
                informer.add_inline_event_handler(feeder, resync),
            ));
        }
        instance.set_access(access.clone());
        instance.connect(context.clone());
        let log_gate = instance.log_gate();
        let recipe = Recipe {
            compiled: compiled.clone(),
            name: name.clone(),
            config: policy.config.clone(),
            limits,
            access,
            log_gate: log_gate.clone(),
            memory: instance.memory_use(),
            context: Some(context.clone()),
        };
        let memory = recipe.memory.clone();
        // Subscriptions with queue rules only feed the queue: the event loop takes the ones
        // that asked for events.
        sources.retain(|s| events.get(s.subscription).copied().unwrap_or(false));
        // The log gate counts what it drops and suppresses for reconcile-only plugins too.
        let observer = self.observer(&key, &info);
        log_gate.set_observer(observer.clone());
        let actor = if sources.is_empty() {
            None
        } else {
            let config = ActorConfig {
                recipe: recipe.clone(),
                resources: info.subscriptions.iter().map(|s| s.gvk.clone()).collect(),
                subscriber: Box::new(InformerSubscriber { sources }),
                observer,
                restart: self.inner.options.restart,
            };
            Some((config, instance))
        };
        let admission = match v0_2_pre(&compiled)?.admission_indices() {
            Some(indices) => {
                let authority = Authority {
                    key: key.as_str(),
                    writes: &policy.writes,
                    discovery: Some(&self.inner.client),
                };
                let policy =
                    AdmissionPolicy::start(recipe.clone(), indices.clone(), authority).await?;
                Some(self.inner.options.admission.register(Arc::new(policy)))
            }
            None => None,
        };
        let mut workers = Vec::new();
        if world.has_reconcile() {
            let workers_recipe = reconciler::Recipe {
                instance: recipe,
                name: name.clone(),
                plugin: context.clone(),
                leader: if policy.reconcile.every_replica {
                    crate::leader_gate::LeaderGate::always()
                } else {
                    self.inner.options.leader.clone()
                },
                caches: CacheSync::new(caches.clone()),
            };
            workers = spawn_workers(workers_recipe, policy.reconcile.max_concurrent_reconciles);
        }
        let mut entry = Entry::new(key, &compiled, &info, claims, limits, &policy, memory);
        entry.controller = Some(Controller {
            context,
            registrations,
            caches,
            workers,
            admission,
        });
        Ok(Prepared { entry, actor })
    }

    /// A new plugin's queue, write client (its write grants, kube's retries off when the host
    /// was given such a client) and event recorder.
    fn new_context(&self, name: &Arc<str>, policy: &PluginPolicy) -> Arc<Context> {
        let kube = self
            .inner
            .options
            .write_client
            .clone()
            .unwrap_or_else(|| self.inner.client.clone());
        let resources = self.inner.resources.clone();
        // A plugin whose account is invalid and that has write grants was refused at load;
        // without write grants nothing is sent for it.
        let account = policy.impersonate.as_ref().and_then(|a| a.as_ref().ok());
        let client = Arc::new(
            WriteClient::new(
                kube.clone(),
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                resources.clone(),
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone())
            .impersonating(account),
        );
        // Events have a write budget of their own (the recorder paces its background writes),
        // so recording them takes nothing from the plugin's writes.
        let events = Arc::new(
            WriteClient::new(
                kube,
                name.clone(),
                policy.writes.clone(),
                policy.reconcile.client.clone(),
                resources,
                self.inner.options.observer.writes(name),
            )
            .with_leader(self.inner.options.leader.clone())
            .impersonating(account)
            .unmetered(),
        );
        let recorder = Arc::new(EventRecorder::new(events, RecorderOptions::default()));
        Arc::new(Context::new(
            client,
            recorder,
            &policy.reconcile,
            self.inner.options.observer.queue(name),
        ))
    }
}
