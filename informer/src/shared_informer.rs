//! SharedIndexInformer: one reflector, one FIFO, one indexed store, many handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::delta_fifo::{DeltaFifo, DeltaType, Deltas};
use crate::error::{Error, Result};
use crate::health::{Failing, HealthSignal};
use crate::index_funcs::IndexFunc;
use crate::lister_watcher::ListerWatcher;
use crate::processor::{
    ListenerShared, ListenerStats, Notification, Processor, ResourceEventHandler,
};
use crate::reflector::{
    DeltaProcessor, Hooks, ListStrategy, Reflector, ReflectorOptions, ReflectorStatus,
    TransformFunc, WatchErrorHandler,
};
use crate::store::{Indexer, Store};

/// How a [`SharedIndexInformer`] runs.
#[derive(Debug, Clone, Default)]
pub struct InformerOptions {
    /// Listing, watching and retrying.
    pub reflector: ReflectorOptions,
    /// The resync period of handlers added with `resync = None`; `None`: no resync.
    pub default_resync: Option<Duration>,
    /// Bumped when this informer starts or ends a failure streak or finds a connection dead
    /// (a factory passes its own, [`crate::SharedInformerFactory::health_signal`]).
    pub health: Option<HealthSignal>,
}

/// Counters of one informer, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InformerStats {
    /// Objects in the cache.
    pub objects: usize,
    /// Completed lists (the first included).
    pub lists: u64,
    /// Lists after the first: relists after 410 Gone.
    pub relists: u64,
    /// Watches that ended and were reopened.
    pub watch_restarts: u64,
    /// List and watch failures (each followed by a backoff).
    pub errors: u64,
    /// Periodic bookmarks received from the server.
    pub bookmarks: u64,
    /// Deltas applied to the cache.
    pub events: u64,
    /// Keys waiting in the DeltaFIFO.
    pub queued: usize,
    /// Whether lists are streaming (false once the server rejected it, or when disabled).
    pub streaming_list: bool,
    /// One entry per handler: queue depth, deliveries, time in the handler.
    pub listeners: Vec<ListenerStats>,
    /// The failures since the last successful list or watch; `None` while it works.
    pub failing: Option<Failing>,
    /// Watches and LISTs found dead: open, but silent past their idle limit.
    pub dead_connections: u64,
}

/// The delta processing (client-go's controller loop and HandleDeltas), run by whichever task
/// filled the FIFO: the reflector after each event, the resync timer after a resync.
struct Pipeline {
    fifo: Arc<DeltaFifo>,
    store: Arc<Store>,
    processor: Processor,
    /// Held while deltas are applied and while a late handler is given the cache's replay, so
    /// the replay and the live events neither overlap nor leave a gap.
    block_deltas: Mutex<()>,
    events: AtomicU64,
}

impl Pipeline {
    /// client-go's HandleDeltas: update the store, then notify.
    fn handle_deltas(&self, deltas: Deltas, in_initial_list: bool) {
        let _block = self.block_deltas.lock();
        for delta in deltas {
            self.events.fetch_add(1, Ordering::Relaxed);
            match delta.kind {
                DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                    let new = delta.object;
                    match self.store.upsert(new.clone()) {
                        Some(old) => {
                            // An unchanged resourceVersion is a resync: only for handlers due.
                            let sync = old.resource_version() == new.resource_version();
                            self.processor
                                .distribute(Notification::Update { old, new }, sync);
                        }
                        None => self.processor.distribute(
                            Notification::Add {
                                obj: new,
                                initial: in_initial_list,
                            },
                            false,
                        ),
                    }
                }
                DeltaType::Deleted => {
                    self.store.delete(delta.object.key());
                    self.processor.distribute(
                        Notification::Delete {
                            obj: delta.object,
                            final_state_unknown: delta.final_state_unknown,
                        },
                        false,
                    );
                }
            }
        }
    }
}

impl DeltaProcessor for Pipeline {
    fn process_queued(&self, max: usize) -> bool {
        for _ in 0..max {
            let popped = self
                .fifo
                .pop_ready(|deltas, initial| self.handle_deltas(deltas, initial));
            if popped.is_none() {
                return false;
            }
        }
        self.fifo.len() > 0
    }

    fn flush(&self) {
        self.processor.flush();
    }
}

struct RunState {
    started: bool,
    stopped: bool,
    tasks: Vec<JoinHandle<()>>,
}

struct Inner {
    lw: Arc<dyn ListerWatcher>,
    fifo: Arc<DeltaFifo>,
    pipeline: Arc<Pipeline>,
    hooks: Arc<Hooks>,
    status: Arc<ReflectorStatus>,
    options: InformerOptions,
    cancel: CancellationToken,
    run: Mutex<RunState>,
}

/// The last handle is gone: stop the tasks, which hold only the pipeline, so the cache's memory
/// is freed even without an explicit `stop`.
impl Drop for Inner {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// client-go's SharedIndexInformer: lists and watches one collection into an indexed cache and
/// tells every registered handler about each change, after the cache has it.
///
/// Cheap to clone; clones share everything. Must be started (and stopped) inside a Tokio
/// runtime; handlers run on their own threads.
#[derive(Clone)]
pub struct SharedIndexInformer {
    inner: Arc<Inner>,
}

/// A handler's registration: remove it with it, or ask whether the handler is synced.
pub struct Registration {
    shared: Arc<ListenerShared>,
    synced: watch::Receiver<bool>,
}

impl Registration {
    /// The registration's id (also in [`ListenerStats::id`]).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The informer has synced and this handler has handled its initial list (or replay).
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow() && self.shared.pending_initial.load(Ordering::Acquire) == 0
    }

    /// Waits until [`has_synced`](Self::has_synced) (`false` if the informer is dropped
    /// first). An informer that cannot reach its server never syncs: wrap this in a timeout.
    pub async fn wait_synced(&self) -> bool {
        let mut synced = self.synced.clone();
        if synced.wait_for(|s| *s).await.is_err() {
            return false;
        }
        loop {
            let notified = self.shared.initial_done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.shared.pending_initial.load(Ordering::Acquire) == 0 {
                return true;
            }
            notified.await;
        }
    }

    /// Notifications buffered for this handler and not yet handled.
    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Relaxed)
    }
}

impl SharedIndexInformer {
    /// An informer over `lw`; nothing runs until [`start`](Self::start).
    pub fn new(lw: Arc<dyn ListerWatcher>, options: InformerOptions) -> SharedIndexInformer {
        let store = Arc::new(Store::new());
        let fifo = Arc::new(DeltaFifo::new(store.clone()));
        SharedIndexInformer {
            inner: Arc::new(Inner {
                lw,
                fifo: fifo.clone(),
                pipeline: Arc::new(Pipeline {
                    fifo: fifo.clone(),
                    store,
                    processor: Processor::default(),
                    block_deltas: Mutex::new(()),
                    events: AtomicU64::new(0),
                }),
                hooks: Arc::new(Hooks::default()),
                status: Arc::new(ReflectorStatus {
                    signal: options.health.clone(),
                    ..ReflectorStatus::default()
                }),
                options,
                cancel: CancellationToken::new(),
                run: Mutex::new(RunState {
                    started: false,
                    stopped: false,
                    tasks: Vec::new(),
                }),
            }),
        }
    }

    /// Registers a handler. If the cache holds objects already, the handler first receives an
    /// `on_add(obj, in_initial_list = true)` for each of them, then live events: nothing is lost
    /// or doubled in between. `resync`: this handler's resync period (`None`: the informer's
    /// default), at which it receives `on_update(obj, obj)` for every cached object.
    pub fn add_event_handler(
        &self,
        handler: Arc<dyn ResourceEventHandler>,
        resync: Option<Duration>,
    ) -> Registration {
        self.register(handler, resync, false)
    }

    /// Registers a handler that is called on the informer's own processing thread, in order,
    /// with no buffer or thread of its own: for a handler whose only work is to put each event
    /// in a queue it owns (that queue is then its per-handler buffer, and whoever drains it
    /// its listener), saving a thread and a hand-off per event. It must never block or do
    /// real work: every other handler of the informer waits for it. [`ResourceEventHandler::flush`]
    /// ends each batch. Replay, resync and [`Registration::has_synced`] are as for
    /// [`add_event_handler`](Self::add_event_handler), except that the replay is handed over
    /// before this call returns (on the calling thread), so the handler is synced as soon as
    /// the informer is. After [`remove_event_handler`](Self::remove_event_handler) returns, the
    /// handler is never called again.
    pub fn add_inline_event_handler(
        &self,
        handler: Arc<dyn ResourceEventHandler>,
        resync: Option<Duration>,
    ) -> Registration {
        self.register(handler, resync, true)
    }

    /// Adds a listener (`inline` or with its own thread) that is replayed the cache first,
    /// with no delta applied between the snapshot and the registration.
    fn register(
        &self,
        handler: Arc<dyn ResourceEventHandler>,
        resync: Option<Duration>,
        inline: bool,
    ) -> Registration {
        let pipeline = &self.inner.pipeline;
        let resync = resync.or(self.inner.options.default_resync);
        let shared = {
            let _block = pipeline.block_deltas.lock();
            let replay = pipeline.store.list();
            if inline {
                pipeline
                    .processor
                    .add_inline_listener(handler, resync, replay)
            } else {
                pipeline.processor.add_listener(handler, resync, replay)
            }
        };
        Registration {
            shared,
            synced: self.inner.fifo.subscribe_synced(),
        }
    }

    /// Unregisters a handler; it gets no further calls after the one in progress.
    pub fn remove_event_handler(&self, registration: &Registration) {
        self.inner
            .pipeline
            .processor
            .remove_listener(registration.shared.id);
    }

    /// How many handlers are registered.
    pub fn handler_count(&self) -> usize {
        self.inner.pipeline.processor.len()
    }

    /// The first list has been applied to the cache (and handed to the handlers).
    pub fn has_synced(&self) -> bool {
        self.inner.fifo.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced); `false` if the informer stopped first.
    pub async fn wait_synced(&self) -> bool {
        let mut synced = self.inner.fifo.subscribe_synced();
        tokio::select! {
            r = synced.wait_for(|s| *s) => r.is_ok(),
            _ = self.inner.cancel.cancelled() => self.has_synced(),
        }
    }

    /// A read-only view of the cache.
    pub fn indexer(&self) -> Indexer {
        Indexer::new(self.inner.pipeline.store.clone())
    }

    /// Adds index functions, before or after start (existing objects are indexed at once).
    /// A name already in use is an error and nothing is added.
    pub fn add_indexers(&self, indexers: Vec<(String, IndexFunc)>) -> Result<()> {
        self.inner.pipeline.store.add_indexers(indexers)
    }

    /// Removes an index added with [`SharedIndexInformer::add_indexers`] (its function is no
    /// longer run on updates); the namespace index cannot be removed. Returns whether the
    /// index was there.
    pub fn remove_indexer(&self, name: &str) -> bool {
        self.inner.pipeline.store.remove_indexer(name)
    }

    /// Sets the transform applied to every object from the server before it is cached
    /// (after the managedFields strip). Only before start, as in client-go.
    pub fn set_transform(&self, transform: TransformFunc) -> Result<()> {
        if self.inner.run.lock().started {
            return Err(Error::AlreadyStarted);
        }
        *self.inner.hooks.transform.write() = Some(transform);
        Ok(())
    }

    /// Sets the function told about every list or watch failure (default: a warning log).
    pub fn set_watch_error_handler(&self, handler: WatchErrorHandler) {
        *self.inner.hooks.watch_error_handler.write() = Some(handler);
    }

    /// The resourceVersion of the last list, event or bookmark seen.
    pub fn last_sync_resource_version(&self) -> Option<String> {
        self.inner.status.last_sync_resource_version.lock().clone()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> InformerStats {
        let status = &self.inner.status;
        let lists = status.lists.load(Ordering::Relaxed);
        InformerStats {
            objects: self.inner.pipeline.store.len(),
            lists,
            relists: lists.saturating_sub(1),
            watch_restarts: status.watch_restarts.load(Ordering::Relaxed),
            errors: status.errors.load(Ordering::Relaxed),
            bookmarks: status.bookmarks.load(Ordering::Relaxed),
            events: self.inner.pipeline.events.load(Ordering::Relaxed),
            queued: self.inner.fifo.len(),
            streaming_list: self.inner.options.reflector.list == ListStrategy::Streaming
                && !status.streaming_unsupported.load(Ordering::Relaxed),
            listeners: self.inner.pipeline.processor.stats(),
            failing: status.failing.lock().clone(),
            dead_connections: status.dead_connections.load(Ordering::Relaxed),
        }
    }

    /// Whether [`start`](Self::start) has been called.
    pub fn is_started(&self) -> bool {
        self.inner.run.lock().started
    }

    /// Starts listing, watching and dispatching. Idempotent; a stopped informer stays stopped.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn start(&self) {
        let mut run = self.inner.run.lock();
        if run.started || run.stopped {
            return;
        }
        run.started = true;
        let inner = &self.inner;
        let reflector = Reflector::new(
            inner.lw.clone(),
            inner.fifo.clone(),
            inner.pipeline.clone(),
            inner.hooks.clone(),
            inner.status.clone(),
            inner.options.reflector.clone(),
        );
        run.tasks
            .push(tokio::spawn(reflector.run(inner.cancel.clone())));

        let (fifo, pipeline, cancel) = (
            inner.fifo.clone(),
            inner.pipeline.clone(),
            inner.cancel.clone(),
        );
        run.tasks.push(tokio::spawn(async move {
            loop {
                let period = pipeline.processor.min_resync_period();
                let check = period
                    .unwrap_or(Duration::from_secs(1))
                    .max(Duration::from_millis(100));
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(check) => {}
                }
                if period.is_some() && pipeline.processor.should_resync(Instant::now()) {
                    fifo.resync();
                    while pipeline.process_queued(1024) {
                        tokio::task::yield_now().await;
                    }
                    pipeline.flush();
                }
            }
        }));
    }

    /// Stops every task; handlers finish what they have buffered, then their threads end.
    pub async fn stop(&self) {
        let tasks = {
            let mut run = self.inner.run.lock();
            if run.stopped {
                return;
            }
            run.stopped = true;
            std::mem::take(&mut run.tasks)
        };
        self.inner.cancel.cancel();
        for task in tasks {
            let _ = task.await;
        }
        self.inner.pipeline.processor.stop().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lister_watcher::{ListPage, WatchEvent, WatchStream};
    use crate::object::Object;
    use crate::processor::tests::Recorder;
    use futures::future::BoxFuture;
    use futures::stream;

    /// Lists `objects` at version 10, then watches forever without events.
    struct Fixed {
        objects: Vec<String>,
    }

    impl ListerWatcher for Fixed {
        fn list(&self, _: Option<String>) -> BoxFuture<'_, Result<ListPage>> {
            Box::pin(async move {
                Ok(ListPage {
                    items: self
                        .objects
                        .iter()
                        .map(|j| Object::from_json(j))
                        .collect::<Result<_>>()?,
                    resource_version: "10".into(),
                    continue_token: None,
                })
            })
        }
        fn watch(&self, _: String, _: bool, _: Duration) -> BoxFuture<'_, Result<WatchStream>> {
            Box::pin(async move {
                let events: WatchStream = Box::pin(stream::pending::<Result<WatchEvent>>());
                Ok(events)
            })
        }
    }

    fn informer(names: &[&str]) -> SharedIndexInformer {
        let objects = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"metadata":{{"name":"{n}","namespace":"ns","resourceVersion":"1","managedFields":[{{}}]}}}}"#
                )
            })
            .collect();
        SharedIndexInformer::new(
            Arc::new(Fixed { objects }),
            InformerOptions {
                reflector: ReflectorOptions {
                    list: ListStrategy::Paginated,
                    ..ReflectorOptions::default()
                },
                ..InformerOptions::default()
            },
        )
    }

    /// Polls `cond` for up to 20 s of real time (listener threads run on real time).
    async fn eventually(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..2000 {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
            tokio::task::yield_now().await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(start_paused = true)]
    async fn resync_reaches_only_handlers_that_asked_for_it() {
        let informer = informer(&["a", "b"]);
        let resyncing = Arc::new(Recorder::default());
        let quiet = Arc::new(Recorder::default());
        informer.add_event_handler(resyncing.clone(), Some(Duration::from_secs(30)));
        informer.add_event_handler(quiet.clone(), None);
        informer.start();
        assert!(informer.wait_synced().await);
        eventually("the initial adds", || quiet.events().len() == 2).await;
        tokio::time::sleep(Duration::from_secs(31)).await;
        eventually("a resync of both objects", || {
            let seen = resyncing.events();
            seen.contains(&"update:ns/a:1>1".to_string())
                && seen.contains(&"update:ns/b:1>1".to_string())
        })
        .await;
        assert_eq!(
            quiet.events().len(),
            2,
            "no resync for a handler without a period"
        );
        informer.stop().await;
    }

    #[tokio::test]
    async fn a_handler_added_after_another_was_removed_gets_its_resyncs() {
        let informer = informer(&["a"]);
        informer.start();
        assert!(informer.wait_synced().await);
        let period = Some(Duration::from_millis(200));
        for round in 0..3 {
            let recorder = Arc::new(Recorder::default());
            let registration = informer.add_event_handler(recorder.clone(), period);
            eventually(&format!("round {round}: two resyncs"), || {
                recorder
                    .events()
                    .iter()
                    .filter(|e| e.starts_with("update:"))
                    .count()
                    >= 2
            })
            .await;
            informer.remove_event_handler(&registration);
        }
        informer.stop().await;
    }

    #[tokio::test]
    async fn transform_runs_before_caching_and_only_before_start() {
        let informer = informer(&["a"]);
        informer
            .set_transform(Arc::new(|o: Object| {
                let mut v: serde_json::Value = o.deserialize()?;
                v["metadata"]["labels"] = serde_json::json!({"seen": "yes"});
                Object::from_json(&v.to_string())
            }))
            .unwrap();
        informer.start();
        assert!(informer.wait_synced().await);
        let a = informer.indexer().get("ns/a").unwrap();
        assert_eq!(a.label("seen"), Some("yes"));
        assert!(matches!(
            informer.set_transform(Arc::new(Ok)),
            Err(Error::AlreadyStarted)
        ));
        informer.stop().await;
    }

    #[tokio::test]
    async fn registration_syncs_after_its_replay_and_stop_drains_handlers() {
        let informer = informer(&["a", "b", "c"]);
        informer.start();
        assert!(informer.wait_synced().await);
        let slow = Arc::new(Recorder {
            delay: Duration::from_millis(20),
            ..Recorder::default()
        });
        let registration = informer.add_event_handler(slow.clone(), None);
        assert!(
            !registration.has_synced(),
            "the replay is still being delivered"
        );
        assert!(registration.wait_synced().await);
        assert_eq!(slow.events().len(), 3);
        assert!(
            slow.events().iter().all(|e| e.ends_with(":true")),
            "replayed adds are flagged in-initial-list"
        );
        let stats = informer.stats();
        assert_eq!(stats.objects, 3);
        assert_eq!(stats.lists, 1);
        assert_eq!(stats.listeners.len(), 1);
        assert_eq!(informer.last_sync_resource_version().as_deref(), Some("10"));
        informer.remove_event_handler(&registration);
        assert_eq!(informer.handler_count(), 0);
        informer.stop().await;
    }

    #[tokio::test]
    async fn dropping_the_last_handle_stops_tasks_and_listener_threads() {
        let informer = informer(&["a"]);
        let rec = Arc::new(Recorder::default());
        informer.add_event_handler(rec.clone(), None);
        informer.start();
        assert!(informer.wait_synced().await);
        eventually("the add", || rec.events().len() == 1).await;
        assert!(
            Arc::strong_count(&rec) > 1,
            "the listener thread holds the handler"
        );
        drop(informer);
        eventually("the listener thread to end and drop the handler", || {
            Arc::strong_count(&rec) == 1
        })
        .await;
    }
}
