//! The reconcile workers of a 0.2 plugin: each owns one guest instance and takes keys from the
//! plugin's host-owned workqueue, one at a time, with client-go's semantics (the queue never
//! hands one key to two workers; a failed reconcile is retried with backoff; a requeue asked
//! for by the guest is honoured). A worker whose instance faults completes its key as a
//! failure and starts a fresh instance; a stopped worker's key goes back to the queue.

use crate::leader::LeaderGate;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use kubewasm_informer::SharedIndexInformer;
use tokio::task::JoinHandle;
use wasmtime::Store;

use super::Gvk;
use super::actor::restart_backoff;
use super::bindings::v0_2::exports::kubewasm::controller::reconcile::Action;
use super::bindings::v0_2::kubewasm::controller::types as wit;
use super::bindings::v0_2::{HandlerExports, PluginExport, PluginExports, PluginPre};
use super::bindings::v0_2_1::exports::kubewasm::controller0_2_1::batch_handler as batch;
use super::cache_api::{Access, SharedDocument};
use super::client::Refusal;
use super::error::PluginError;
use super::grants::Limits;
use super::imports_v0_2::{Context, InstanceImports};
use super::instance::{Event, Outcome, guarded, new_store, same_document};
use super::keys::ObjectKey;
use super::log_gate::LogGate;
use super::observer::FailureKind;
use super::predicates::Declaration;
use super::state::HostState;
use super::workqueue::{Completion, ReconcileResult};

/// How a 0.2 plugin's reconciles run and write: its workqueue, its write client and how many
/// instances reconcile at once.
#[derive(Debug, Clone, PartialEq)]
pub struct ReconcileSettings {
    /// Instances reconciling at once (at least 1); one key is never in two of them at once.
    pub max_concurrent_reconciles: usize,
    /// Reconcile on every replica rather than only where the key's shard is led: for plugins
    /// that only observe (no write grants). Off by default, so that what a reconcile does
    /// besides writing (logs, metrics, calls out) happens once, not once per replica.
    pub every_replica: bool,
    /// Reconciles per second the plugin's instances start, together, once the burst is spent:
    /// a guest that requeues its keys at once for ever costs a bounded share of a core.
    pub reconciles_per_second: f64,
    /// Reconciles the plugin may start at once above that rate.
    pub reconcile_burst: u32,
    /// The shortest `requeue-after` honoured: a shorter one (`requeue-after(0)`) waits this
    /// long, so one key cannot loop faster.
    pub min_requeue_delay: Duration,
    pub queue: super::QueueOptions,
    pub client: super::ClientOptions,
}

impl Default for ReconcileSettings {
    /// client-go's defaults, one reconcile at a time, at most 200 reconciles a second (burst
    /// 1000), a requeue after at least 100 ms.
    fn default() -> Self {
        ReconcileSettings {
            max_concurrent_reconciles: 1,
            every_replica: false,
            reconciles_per_second: 200.0,
            reconcile_burst: 1000,
            min_requeue_delay: Duration::from_millis(100),
            queue: super::QueueOptions::default(),
            client: super::ClientOptions::default(),
        }
    }
}

impl ReconcileSettings {
    /// Checks the values make sense; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_concurrent_reconciles == 0 {
            return Err("max-concurrent-reconciles must be at least 1".into());
        }
        if !(self.reconciles_per_second.is_finite() && self.reconciles_per_second > 0.0) {
            return Err(format!(
                "reconciles per second must be positive, got {}",
                self.reconciles_per_second
            ));
        }
        if self.reconcile_burst == 0 {
            return Err("the reconcile burst must be at least 1".into());
        }
        self.queue.validate()?;
        self.client.validate()
    }
}

/// What every instance of one plugin version is made from.
#[derive(Clone)]
pub(crate) struct Recipe {
    pub(crate) pre: Arc<PluginPre>,
    pub(crate) file: std::path::PathBuf,
    pub(crate) name: Arc<str>,
    pub(crate) config: String,
    pub(crate) limits: Limits,
    pub(crate) access: Arc<Access>,
    pub(crate) log_gate: Arc<LogGate>,
    pub(crate) plugin: Arc<Context>,
    /// Keys are taken from the queue only while this replica leads; a standby keeps its
    /// instance warm and its queue filled from the cache.
    pub(crate) leader: LeaderGate,
    /// The caches of the plugin's subscriptions: no key is taken before all have synced.
    pub(crate) caches: CacheSync,
}

/// The informers of a plugin's subscriptions, for its reconcile workers to wait on: a reconcile
/// reads the cache, and a cache that has not synced answers "absent" for objects that exist
/// (a controller would create what is there already). controller-runtime's and kube-runtime's
/// controllers wait the same way. The queue feeders are inline handlers, which have handled
/// their informer's initial list by the time it has synced, so the informers' sync covers the
/// handlers that fill the queue too.
#[derive(Clone, Default)]
pub(crate) struct CacheSync {
    informers: Arc<[SharedIndexInformer]>,
}

impl CacheSync {
    /// Waits on `informers`.
    pub(crate) fn new(informers: Vec<SharedIndexInformer>) -> Self {
        CacheSync {
            informers: informers.into(),
        }
    }

    /// Waits until every cache has synced; `false` if one of the informers stopped first.
    /// A server that cannot be reached keeps it waiting: the plugin's readiness says so.
    pub(crate) async fn wait(&self) -> bool {
        for informer in self.informers.iter() {
            if !informer.wait_synced().await {
                return false;
            }
        }
        true
    }
}

/// One live 0.2 guest instance. Calls take `&mut self`: one at a time.
pub(crate) struct ReconcilerInstance {
    store: Store<HostState>,
    bindings: PluginExports,
    deadline: Duration,
    /// The objects and event numbers of the batch being delivered, kept between batches: a
    /// fresh buffer of a batch's size would be new pages, faulted in on every call.
    batch: (Vec<u8>, Vec<u32>),
}

impl ReconcilerInstance {
    /// Instantiates the component (the 0.2 imports not yet connected: `init` may only read
    /// and log).
    pub(crate) async fn new(
        pre: &PluginPre,
        file: &std::path::Path,
        label: Arc<str>,
        limits: Limits,
        access: Arc<Access>,
        log_gate: Arc<LogGate>,
    ) -> Result<Self, PluginError> {
        let mut store = new_store(pre.engine(), label, &limits, access, log_gate);
        let deadline = limits.call_deadline;
        let instantiated = guarded(
            &mut store,
            deadline,
            || Duration::ZERO,
            async |s| pre.instantiate_async(s).await.map(Ok),
        )
        .await;
        match instantiated {
            Outcome::Ok(bindings) => Ok(ReconcilerInstance {
                store,
                bindings,
                deadline,
                batch: Default::default(),
            }),
            Outcome::GuestError(reason) | Outcome::Failed(_, reason) => {
                Err(PluginError::Instantiate {
                    file: file.to_owned(),
                    reason,
                })
            }
        }
    }

    /// Calls the guest's `init` (0.2.0's or 0.2.2's): its declaration, with the predicates of
    /// its queue rules.
    pub(crate) async fn init(&mut self, config: &str) -> Outcome<Declaration> {
        let deadline = self.deadline;
        match self.bindings.plugin.clone() {
            PluginExport::V0_2_0(plugin) => declared(
                guarded(
                    &mut self.store,
                    deadline,
                    || Duration::ZERO,
                    async |s| plugin.call_init(s, config).await,
                )
                .await,
            ),
            PluginExport::V0_2_2(plugin) => declared(
                guarded(
                    &mut self.store,
                    deadline,
                    || Duration::ZERO,
                    async |s| plugin.call_init(s, config).await,
                )
                .await,
            ),
        }
    }

    /// Connects the instance to the plugin's queue and client, with the resource type of each
    /// subscription handle its `init` returned.
    pub(crate) fn connect(&mut self, plugin: Arc<Context>, subscriptions: Vec<Gvk>) {
        self.store.data_mut().v0_2_imports =
            Some(Arc::new(InstanceImports::new(plugin, subscriptions)));
    }

    /// Calls the guest's `reconcile`. Time the call waits for the API server does not count
    /// toward its deadline.
    pub(crate) async fn reconcile(&mut self, key: &wit::Key) -> Outcome<Action> {
        let Some(r) = self.bindings.reconcile.clone() else {
            return Outcome::GuestError("the component exports no `reconcile`".into());
        };
        let imports = self.api_waits();
        let excused = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
        let deadline = self.deadline;
        guarded(&mut self.store, deadline, excused, async |s| {
            r.call_reconcile(s, key).await
        })
        .await
    }
}

impl ReconcilerInstance {
    /// The imports whose API waits the next call's wall limit excuses, their count reset.
    fn api_waits(&self) -> Option<Arc<InstanceImports>> {
        let imports = self.store.data().v0_2_imports.clone();
        if let Some(i) = &imports {
            i.reset_waited();
        }
        imports
    }

    /// Why the host refused a write of the last call, if it refused one.
    fn refused(&self) -> Option<Refusal> {
        self.store
            .data()
            .v0_2_imports
            .as_ref()
            .and_then(|i| i.refused())
    }

    /// Whether the guest takes events in batches (`batch-handler`, 0.2.1).
    pub(crate) fn takes_batches(&self) -> bool {
        matches!(self.bindings.handler, Some(HandlerExports::Batch(_)))
    }

    /// Calls the guest's 0.2.0 handler for one event of subscription `subscription` (a
    /// `batch-handler` guest takes even one event through [`deliver_batch`](Self::deliver_batch)).
    pub(crate) async fn deliver(&mut self, subscription: u32, event: &Event) -> Outcome<()> {
        let Some(HandlerExports::Single(h)) = self.bindings.handler.clone() else {
            return Outcome::GuestError("the component exports no 0.2.0 `handler`".into());
        };
        let deadline = self.deadline;
        let imports = self.api_waits();
        let api_waited = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
        match event {
            Event::Add {
                object,
                in_initial_list,
            } => {
                guarded(&mut self.store, deadline, api_waited, async |s| {
                    h.call_on_add(s, subscription, object.json(), *in_initial_list)
                        .await
                })
                .await
            }
            Event::Update { old, new } => {
                guarded(&mut self.store, deadline, api_waited, async |s| {
                    h.call_on_update(s, subscription, old.json(), new.json())
                        .await
                })
                .await
            }
            Event::Delete {
                object,
                final_state_unknown,
            } => {
                guarded(&mut self.store, deadline, api_waited, async |s| {
                    h.call_on_delete(s, subscription, object.json(), *final_state_unknown)
                        .await
                })
                .await
            }
        }
    }

    /// Calls the guest's `on-events` with `events` (subscription handle, event), in one call
    /// under one deadline; answers the events the guest failed, by position, with its reason.
    pub(crate) async fn deliver_batch(
        &mut self,
        events: &[(u32, &Event)],
    ) -> Outcome<Vec<(usize, String)>> {
        let Some(HandlerExports::Batch(h)) = self.bindings.handler.clone() else {
            return Outcome::GuestError("the component exports no `batch-handler`".into());
        };
        let (mut documents, mut words) = std::mem::take(&mut self.batch);
        if let Err(reason) = lower_batch(events, &mut documents, &mut words) {
            return Outcome::GuestError(reason);
        }
        let batch = batch::EventBatch {
            documents: &documents,
            events: &words,
        };
        let deadline = self.deadline;
        let imports = self.api_waits();
        let api_waited = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
        let answered = guarded(&mut self.store, deadline, api_waited, async |s| {
            h.call_on_events(s, batch).await.map(Ok)
        })
        .await;
        documents.clear();
        // A batch of one huge object need not keep its buffer.
        documents.shrink_to(1 << 20);
        words.clear();
        self.batch = (documents, words);
        match answered {
            Outcome::Ok(errors) => {
                let mut failed = Vec::with_capacity(errors.len());
                for e in errors {
                    match usize::try_from(e.index) {
                        Ok(i) if i < events.len() => failed.push((i, e.reason)),
                        _ => {
                            return Outcome::Failed(
                                FailureKind::Trap,
                                format!(
                                    "on-events answered an error for event {} of a batch of {}",
                                    e.index,
                                    events.len()
                                ),
                            );
                        }
                    }
                }
                Outcome::Ok(failed)
            }
            Outcome::GuestError(reason) => Outcome::GuestError(reason),
            Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
        }
    }
}

/// `init`'s outcome with its declaration, of either contract, as the host reads it.
fn declared<I: Into<Declaration>>(outcome: Outcome<I>) -> Outcome<Declaration> {
    match outcome {
        Outcome::Ok(info) => Outcome::Ok(info.into()),
        Outcome::GuestError(reason) => Outcome::GuestError(reason),
        Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
    }
}

/// Asks the CPU to start loading the first bytes of `bytes` into its cache: the next object's
/// JSON arrives while this one is copied (objects are scattered over the heap, so the hardware
/// prefetcher cannot guess where the next one starts).
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64).take(8) {
        // SAFETY: prefetching is a hint: it reads nothing, faults on nothing.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Numbers per event in `event-batch.events`.
const EVENT_WORDS: usize = 6;

/// A batch as `on-events` takes it: the JSON of its objects one after another into
/// `documents`, each object once per event (a resync's old and new, the same object, once),
/// and the events, [`EVENT_WORDS`] numbers each, into `words` (both emptied first). An error
/// if the batch does not fit the 4 GiB the offsets can address.
fn lower_batch(
    events: &[(u32, &Event)],
    documents: &mut Vec<u8>,
    words: &mut Vec<u32>,
) -> Result<(), String> {
    const ADDED: u32 = 0;
    const UPDATED: u32 = 1;
    const DELETED: u32 = 2;
    const FLAG: u32 = 4;
    documents.clear();
    words.clear();
    words.reserve(events.len() * EVENT_WORDS);
    let mut place = |doc: &SharedDocument| -> Result<[u32; 2], String> {
        let json = doc.json().as_bytes();
        let offset = u32::try_from(documents.len()).map_err(|_| "a batch over 4 GiB")?;
        let len = u32::try_from(json.len()).map_err(|_| "an object over 4 GiB")?;
        documents.extend_from_slice(json);
        Ok([offset, len])
    };
    for (i, (subscription, event)) in events.iter().enumerate() {
        if let Some((_, next)) = events.get(i + 1) {
            prefetch(next.object().json().as_bytes());
        }
        let flagged = |what: u32, flag: bool| if flag { what | FLAG } else { what };
        let (what, [offset, len], [old_offset, old_len]) = match event {
            Event::Add {
                object,
                in_initial_list,
            } => (flagged(ADDED, *in_initial_list), place(object)?, [0, 0]),
            Event::Update { old, new } => {
                let placed = place(new)?;
                let old = if same_document(old, new) {
                    placed
                } else {
                    place(old)?
                };
                (UPDATED, placed, old)
            }
            Event::Delete {
                object,
                final_state_unknown,
            } => (
                flagged(DELETED, *final_state_unknown),
                place(object)?,
                [0, 0],
            ),
        };
        words.extend_from_slice(&[*subscription, what, offset, len, old_offset, old_len]);
    }
    Ok(())
}

/// A fresh instance of `recipe`, initialised and connected.
pub(crate) async fn start_instance(
    recipe: &Recipe,
) -> Result<(ReconcilerInstance, Vec<Gvk>), String> {
    let mut instance = ReconcilerInstance::new(
        &recipe.pre,
        &recipe.file,
        recipe.name.clone(),
        recipe.limits,
        recipe.access.clone(),
        recipe.log_gate.clone(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let info = match instance.init(&recipe.config).await {
        Outcome::Ok(declared) => declared.info,
        Outcome::GuestError(reason) => return Err(format!("init failed: {reason}")),
        Outcome::Failed(kind, reason) => return Err(format!("init {}: {reason}", kind.as_str())),
    };
    let subscriptions: Vec<Gvk> = info
        .subscriptions
        .iter()
        .map(|s| Gvk {
            group: s.gvk.group.clone(),
            version: s.gvk.version.clone(),
            kind: s.gvk.kind.clone(),
        })
        .collect();
    instance.connect(recipe.plugin.clone(), subscriptions.clone());
    Ok((instance, subscriptions))
}

/// The key as this instance names it: the handle of its subscription of the key's type.
fn wit_key(subscriptions: &[Gvk], key: &ObjectKey) -> Option<wit::Key> {
    let handle = subscriptions
        .iter()
        .position(|g| g.group == key.group && g.kind == key.kind)?;
    Some(wit::Key {
        subscription: u32::try_from(handle).ok()?,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    })
}

/// A fresh instance of `recipe` after `delay`.
async fn start_after(
    delay: Duration,
    recipe: &Recipe,
) -> Result<(ReconcilerInstance, Vec<Gvk>), String> {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    start_instance(recipe).await
}

/// How long a worker waits before starting a new instance after the last one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts `count` workers reconciling the keys of `recipe.plugin`'s queue, and (with leader
/// election) the task releasing parked keys when their shard comes to be led here. Abort them
/// to stop: the key each holds goes back to the queue.
pub(crate) fn spawn_workers(recipe: Recipe, count: usize) -> Vec<JoinHandle<()>> {
    let mut tasks: Vec<_> = (0..count.max(1))
        .map(|_| tokio::spawn(work(recipe.clone())))
        .collect();
    if recipe.leader.elects() {
        tasks.push(tokio::spawn(unpark_on_leadership(recipe)));
    }
    tasks
}

/// Releases the parked keys of `recipe`'s queue whose shard this replica has come to lead, on
/// every leadership transition, until aborted.
async fn unpark_on_leadership(recipe: Recipe) {
    let mut transitions = recipe.leader.subscribe_shards();
    let queue = recipe.plugin.queue.clone();
    loop {
        let gate = &recipe.leader;
        queue.unpark(|key| gate.leads(key.namespace.as_deref(), &key.name));
        if transitions.changed().await.is_err() {
            return;
        }
    }
}

/// The most of a guest's error message kept in the log and the plugin's status.
const MAX_REASON: usize = 1024;

/// `reason` cut to [`MAX_REASON`] bytes (at a character boundary).
pub(crate) fn cut(reason: &str) -> &str {
    if reason.len() <= MAX_REASON {
        return reason;
    }
    let mut end = MAX_REASON;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

/// `namespace/name` (or `name`) of a key, for messages.
fn key_name(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

/// Faults of a worker's instances with no reconcile returning in between: the next instance
/// waits for a growing backoff (the handler task's), so a guest that traps on every key cannot
/// spin a core instantiating.
#[derive(Debug, Default)]
struct FaultBackoff {
    in_a_row: u32,
}

impl FaultBackoff {
    fn faulted(&mut self) {
        self.in_a_row = self.in_a_row.saturating_add(1);
    }

    fn returned(&mut self) {
        self.in_a_row = 0;
    }

    /// How long to wait before the next instance starts.
    fn delay(&self) -> Duration {
        if self.in_a_row == 0 {
            Duration::ZERO
        } else {
            restart_backoff(self.in_a_row)
        }
    }
}

/// How a reconcile ended, for the metrics: an error after a refused write is `Refused`.
fn result_of(outcome: &Outcome<Action>, refused: Option<Refusal>) -> ReconcileResult {
    match outcome {
        Outcome::Ok(Action::Done) => ReconcileResult::Ok,
        Outcome::Ok(Action::RequeueAfter(_)) => ReconcileResult::Requeue,
        Outcome::GuestError(_) if refused.is_some() => ReconcileResult::Refused,
        Outcome::GuestError(_) => ReconcileResult::Error,
        Outcome::Failed(..) => ReconcileResult::Fault,
    }
}

async fn work(recipe: Recipe) {
    let queue = recipe.plugin.queue.clone();
    let mut faults = FaultBackoff::default();
    if !recipe.caches.wait().await {
        tracing::warn!(plugin = %recipe.name, "an informer of the plugin stopped before its cache synced: its reconcile worker stops");
        return;
    }
    let mut current: Option<(ReconcilerInstance, Vec<Gvk>)> = None;
    // Whether the next instance replaces one that faulted (a restart).
    let mut replacing = false;
    loop {
        let (instance, subscriptions) = match &mut current {
            Some(c) => (&mut c.0, &c.1),
            None => match start_after(faults.delay(), &recipe).await {
                Ok(c) => {
                    if std::mem::take(&mut replacing) {
                        recipe.plugin.restarts.fetch_add(1, Ordering::Relaxed);
                    }
                    let c = current.insert(c);
                    (&mut c.0, &c.1)
                }
                Err(reason) => {
                    tracing::warn!(plugin = %recipe.name, "starting a reconcile instance: {reason}");
                    tokio::time::sleep(RESTART_DELAY).await;
                    continue;
                }
            },
        };
        recipe.leader.wait_leader().await;
        // The plugin's reconcile rate: the token is taken before the key, so no key is held
        // while its worker waits.
        let wait = recipe.plugin.reconciles.lock().reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let Some(item) = queue.get().await else {
            return;
        };
        let leads = |key: &ObjectKey| recipe.leader.leads(key.namespace.as_deref(), &key.name);
        if !leads(item.key()) {
            let key = item.key().clone();
            item.complete(Completion::Park);
            // Leadership may have come between the check and the park, its release run.
            if leads(&key) {
                queue.unpark(|k| *k == key);
            }
            continue;
        }
        let Some(key) = wit_key(subscriptions, item.key()) else {
            tracing::warn!(plugin = %recipe.name, key = ?item.key(), "a queued key of a resource this version does not subscribe to: dropped");
            item.complete(Completion::Done);
            continue;
        };
        let started = Instant::now();
        let outcome = instance.reconcile(&key).await;
        let result = result_of(&outcome, instance.refused());
        queue.reconciled(result, started.elapsed());
        recipe.plugin.calls.count_reconcile(&outcome);
        match result {
            ReconcileResult::Fault => faults.faulted(),
            _ => faults.returned(),
        }
        match outcome {
            Outcome::Ok(Action::Done) => item.complete(Completion::Done),
            Outcome::Ok(Action::RequeueAfter(ms)) => {
                let delay = Duration::from_millis(ms.into()).max(recipe.plugin.min_requeue);
                item.complete(Completion::RequeueAfter(delay))
            }
            Outcome::GuestError(reason) => {
                let (key, reason) = (key_name(item.key()), cut(&reason));
                queue.reconcile_failed();
                if let Some(unlogged) = recipe.plugin.error_notices.admit(Instant::now()) {
                    tracing::warn!(plugin = %recipe.name, %key, unlogged, "reconcile of {key} failed, retried with backoff: {reason}");
                }
                recipe
                    .plugin
                    .record_error(format!("reconcile {key}: {reason}"));
                item.complete(Completion::Retry);
            }
            Outcome::Failed(kind, reason) => {
                let (key, reason) = (key_name(item.key()), cut(&reason));
                tracing::warn!(plugin = %recipe.name, %key, "reconcile {}, a fresh instance takes over: {reason}", kind.as_str());
                recipe
                    .plugin
                    .record_error(format!("reconcile {key} {}: {reason}", kind.as_str()));
                item.complete(Completion::Retry);
                current = None;
                replacing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_backs_off_after_faults_in_a_row_and_not_after_a_returned_reconcile() {
        let mut faults = FaultBackoff::default();
        assert_eq!(
            faults.delay(),
            Duration::ZERO,
            "the first instance starts at once"
        );
        faults.faulted();
        assert_eq!(faults.delay(), Duration::from_millis(50));
        faults.faulted();
        faults.faulted();
        assert_eq!(faults.delay(), Duration::from_millis(200));
        for _ in 0..100 {
            faults.faulted();
        }
        assert_eq!(faults.delay(), Duration::from_secs(10), "capped");
        faults.returned();
        assert_eq!(faults.delay(), Duration::ZERO);
    }

    #[test]
    fn results_are_typed_and_an_error_after_a_refused_write_is_refused() {
        let error = Outcome::GuestError("boom".into());
        assert_eq!(result_of(&error, None), ReconcileResult::Error);
        assert_eq!(
            result_of(&error, Some(Refusal::RateLimited)),
            ReconcileResult::Refused
        );
        assert_eq!(
            result_of(&Outcome::Ok(Action::Done), Some(Refusal::NotLeader)),
            ReconcileResult::Ok,
            "a refusal the guest got over is no failure"
        );
        assert_eq!(
            result_of(&Outcome::Ok(Action::RequeueAfter(5)), None),
            ReconcileResult::Requeue
        );
        assert_eq!(
            result_of(&Outcome::Failed(FailureKind::Trap, "t".into()), None),
            ReconcileResult::Fault
        );
    }
}
