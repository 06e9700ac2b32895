//! The plugin actor: one instance, one queue, guest calls one at a time and in order; on a
//! fault the instance is replaced by a fresh one that is replayed the cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Gvk;
use super::cache_api::{Access, SharedDocument};
use super::component::CompiledPlugin;
use super::grants::{Limits, describe};
use super::instance::{Event, Instance, Outcome};
use super::observer::{FailureKind, Observer};
use super::wiring::{EventSink, Queued, Subscribed, Subscriber};

/// Where a plugin is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginState {
    /// Receiving and handling events.
    Running,
    /// A fault threw the instance away; a fresh one is being started.
    Restarting,
    /// A fresh instance could not be started; events are dropped until the plugin is
    /// replaced or unloaded.
    Failed,
    /// Unloaded or shut down.
    Stopped,
}

/// The state an actor shares with the host (status, readiness) and with its event sinks.
pub(crate) struct Shared {
    /// The instance generation whose handlers are registered; older events are skipped.
    pub(crate) generation: AtomicU64,
    pub(crate) queue: AtomicUsize,
    pub(crate) delivered: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) traps: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) memory_faults: AtomicU64,
    pub(crate) restarts: AtomicU64,
    /// Initial-list adds pushed / handled for the current generation.
    pub(crate) replay_pushed: AtomicU64,
    pub(crate) replay_handled: AtomicU64,
    pub(crate) state: Mutex<PluginState>,
    pub(crate) last_error: Mutex<Option<String>>,
    pub(crate) subscribed: Mutex<Option<Box<dyn Subscribed>>>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            generation: AtomicU64::new(0),
            queue: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            traps: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            memory_faults: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            replay_pushed: AtomicU64::new(0),
            replay_handled: AtomicU64::new(0),
            state: Mutex::new(PluginState::Running),
            last_error: Mutex::new(None),
            subscribed: Mutex::new(None),
        }
    }

    /// Whether the current instance has handled its whole replay.
    pub(crate) fn replay_done(&self) -> bool {
        let synced = self.subscribed.lock().as_ref().is_some_and(|s| s.synced());
        synced
            && self.replay_handled.load(Ordering::Acquire)
                >= self.replay_pushed.load(Ordering::Acquire)
    }

    fn record_error(&self, message: String) {
        *self.last_error.lock() = Some(message);
    }
}

/// What an actor needs besides its instance.
pub(crate) struct ActorConfig {
    pub(crate) name: Arc<str>,
    pub(crate) compiled: CompiledPlugin,
    pub(crate) config: String,
    pub(crate) limits: Limits,
    pub(crate) access: Arc<Access>,
    /// The resource of each subscription, by index, as passed to the guest.
    pub(crate) resources: Vec<Gvk>,
    pub(crate) subscriber: Box<dyn Subscriber>,
    pub(crate) observer: Arc<dyn Observer>,
}

/// The host's handle on a running actor.
pub(crate) struct ActorHandle {
    pub(crate) shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ActorHandle {
    /// Starts the actor with an initialised instance and registers its handlers.
    pub(crate) fn spawn(config: ActorConfig, instance: Instance) -> Self {
        let shared = Arc::new(Shared::new());
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let mut actor = Actor {
            config,
            shared: shared.clone(),
            tx,
            instance: Some(instance),
            consecutive_failures: 0,
            suspects: Quarantine::default(),
            poisoned: Quarantine::default(),
        };
        actor.subscribe(1);
        let task = tokio::spawn(actor.run(rx, stop_rx));
        ActorHandle {
            shared,
            stop,
            task: Mutex::new(Some(task)),
        }
    }

    /// Stops taking events, lets the call in progress finish (bounded by `grace`) and
    /// unregisters the handlers.
    pub(crate) async fn stop(&self, grace: Duration) {
        let _ = self.stop.send(true);
        let task = self.task.lock().take();
        if let Some(mut task) = task
            && tokio::time::timeout(grace, &mut task).await.is_err()
        {
            task.abort();
        }
        self.shared.subscribed.lock().take();
        *self.shared.state.lock() = PluginState::Stopped;
    }
}

/// Backoff after repeated faults without a successful call in between, so a guest that faults
/// on every event cannot spin a core replaying the cache.
fn restart_backoff(consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(8);
    Duration::from_millis(50u64 << exp).min(Duration::from_secs(10))
}

struct Actor {
    config: ActorConfig,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Queued>,
    instance: Option<Instance>,
    consecutive_failures: u32,
    /// Object versions whose event made an instance fail once: the replay after the restart
    /// offers them again (the failure may have been the guest's state, not the object).
    suspects: Quarantine,
    /// Object versions that made an instance fail twice: never delivered again, so a replay
    /// cannot fault on them forever. A changed object is a new version and is delivered.
    poisoned: Quarantine,
}

/// Cached object versions, held by reference (cached objects are immutable and shared, so the
/// same version is the same allocation), the oldest forgotten past `QUARANTINE_LIMIT`.
#[derive(Default)]
struct Quarantine(std::collections::VecDeque<SharedDocument>);

const QUARANTINE_LIMIT: usize = 64;

impl Quarantine {
    fn contains(&self, object: &SharedDocument) -> bool {
        self.0
            .iter()
            .any(|o| std::ptr::addr_eq(Arc::as_ptr(o), Arc::as_ptr(object)))
    }

    fn remove(&mut self, object: &SharedDocument) -> bool {
        let before = self.0.len();
        self.0
            .retain(|o| !std::ptr::addr_eq(Arc::as_ptr(o), Arc::as_ptr(object)));
        self.0.len() != before
    }

    fn insert(&mut self, object: SharedDocument) {
        if self.0.len() == QUARANTINE_LIMIT {
            self.0.pop_front();
        }
        self.0.push_back(object);
    }
}

impl Actor {
    /// Registers the handlers of a new generation (dropping the previous registration first,
    /// so its events are skipped and the new handlers replay the cache).
    fn subscribe(&mut self, generation: u64) {
        self.shared.subscribed.lock().take();
        self.shared.replay_pushed.store(0, Ordering::Release);
        self.shared.replay_handled.store(0, Ordering::Release);
        self.shared.generation.store(generation, Ordering::Release);
        let sink = EventSink::new(self.tx.clone(), self.shared.clone(), generation, 0);
        let subscribed = self.config.subscriber.subscribe(&sink);
        *self.shared.subscribed.lock() = Some(subscribed);
    }

    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Queued>,
        mut stop: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                queued = rx.recv() => match queued {
                    Some(q) => self.handle(q).await,
                    None => break,
                },
            }
        }
        self.shared.subscribed.lock().take();
    }

    async fn handle(&mut self, queued: Queued) {
        let depth = self.shared.queue.fetch_sub(1, Ordering::AcqRel) - 1;
        self.config.observer.queue_depth(&self.config.name, depth);
        let generation = self.shared.generation.load(Ordering::Acquire);
        if queued.generation != generation {
            return;
        }
        let initial = matches!(
            queued.event,
            Event::Add {
                in_initial_list: true,
                ..
            }
        );
        let Some(instance) = self.instance.as_mut() else {
            return;
        };
        let Some(resource) = self.config.resources.get(queued.subscription) else {
            return;
        };
        if self.poisoned.contains(queued.event.object()) {
            if initial {
                self.shared.replay_handled.fetch_add(1, Ordering::AcqRel);
            }
            tracing::warn!(
                plugin = &*self.config.name,
                object = %object_key(queued.event.object().json()),
                "event skipped: this object version made the plugin fail twice"
            );
            return;
        }
        let kind = queued.event.kind();
        let started = Instant::now();
        let outcome = instance.deliver(resource, &queued.event).await;
        let elapsed = started.elapsed();
        if initial {
            self.shared.replay_handled.fetch_add(1, Ordering::AcqRel);
        }
        let name = &*self.config.name;
        match outcome {
            Outcome::Ok(()) => {
                self.consecutive_failures = 0;
                self.shared.delivered.fetch_add(1, Ordering::Relaxed);
                self.config
                    .observer
                    .event_handled(name, &resource.kind, kind, elapsed, true);
            }
            Outcome::GuestError(reason) => {
                self.consecutive_failures = 0;
                self.shared.delivered.fetch_add(1, Ordering::Relaxed);
                self.shared.errors.fetch_add(1, Ordering::Relaxed);
                self.config
                    .observer
                    .event_handled(name, &resource.kind, kind, elapsed, false);
                tracing::warn!(
                    plugin = name,
                    resource = %describe(resource),
                    event = kind.as_str(),
                    "handler returned an error: {reason}"
                );
                self.shared.record_error(format!(
                    "{} {}: {reason}",
                    kind.as_str(),
                    describe(resource)
                ));
            }
            Outcome::Failed(failure, reason) => {
                self.config
                    .observer
                    .event_handled(name, &resource.kind, kind, elapsed, false);
                let version = queued.event.object().clone();
                if self.suspects.remove(&version) {
                    self.poisoned.insert(version);
                } else {
                    self.suspects.insert(version);
                }
                let object = object_key(queued.event.object().json());
                self.fail(
                    failure,
                    format!(
                        "{} of {} {object}: {reason}",
                        kind.as_str(),
                        describe(resource)
                    ),
                )
                .await;
            }
        }
    }

    /// Counts and logs a fault, drops the instance, and starts a fresh one that is replayed
    /// the cache.
    async fn fail(&mut self, failure: FailureKind, message: String) {
        let name = self.config.name.clone();
        let counter = match failure {
            FailureKind::Trap => &self.shared.traps,
            FailureKind::Timeout => &self.shared.timeouts,
            FailureKind::Memory => &self.shared.memory_faults,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.config.observer.instance_failed(&name, failure);
        tracing::error!(
            plugin = &*name,
            failure = failure.as_str(),
            "instance dropped, event skipped: {message}"
        );
        self.shared
            .record_error(format!("{}: {message}", failure.as_str()));
        self.instance = None;
        *self.shared.state.lock() = PluginState::Restarting;
        // Unregister at once so no more events pile up for the dead generation.
        let next = self.shared.generation.load(Ordering::Acquire) + 1;
        self.shared.generation.store(next, Ordering::Release);
        self.shared.subscribed.lock().take();

        self.consecutive_failures += 1;
        tokio::time::sleep(restart_backoff(self.consecutive_failures)).await;

        match fresh_instance(&self.config).await {
            Ok(instance) => {
                self.instance = Some(instance);
                self.shared.restarts.fetch_add(1, Ordering::Relaxed);
                *self.shared.state.lock() = PluginState::Running;
                self.subscribe(next);
                tracing::info!(
                    plugin = &*name,
                    "fresh instance started, replaying the cache"
                );
            }
            Err(reason) => {
                *self.shared.state.lock() = PluginState::Failed;
                tracing::error!(
                    plugin = &*name,
                    "could not start a fresh instance: {reason}"
                );
                self.shared
                    .record_error(format!("restart failed: {reason}"));
            }
        }
    }
}

/// Instantiates and initialises a replacement instance.
async fn fresh_instance(c: &ActorConfig) -> Result<Instance, String> {
    {
        let mut instance = Instance::new(&c.compiled, c.name.clone(), c.limits, c.access.clone())
            .await
            .map_err(|e| e.to_string())?;
        match instance.init(&c.config).await {
            Outcome::Ok(_) => Ok(instance),
            Outcome::GuestError(reason) => Err(format!("init failed: {reason}")),
            Outcome::Failed(kind, reason) => Err(format!("init {}: {reason}", kind.as_str())),
        }
    }
}

/// `namespace/name` of an object's JSON for log lines, without parsing the whole document.
fn object_key(json: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Meta<'a> {
        #[serde(borrow)]
        metadata: Option<Inner<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Inner<'a> {
        #[serde(borrow)]
        namespace: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_str::<Meta>(json) {
        Ok(Meta {
            metadata:
                Some(Inner {
                    namespace: Some(ns),
                    name: Some(n),
                }),
        }) => format!("{ns}/{n}"),
        Ok(Meta {
            metadata: Some(Inner { name: Some(n), .. }),
        }) => n.into_owned(),
        _ => "(unnamed object)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use kubewasm_tests::{guest_logs, wait_until};
    use serde_json::json;

    use super::super::grants::{Grants, Limits};
    use super::super::testing::{FakeFeed, config_map, spawn_probe};
    use super::*;

    const WAIT: Duration = Duration::from_secs(30);

    fn events(plugin: &str) -> Vec<String> {
        guest_logs().lines_starting(plugin, "EVENT")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replay_then_live_events_arrive_in_order() {
        let feed = Arc::new(FakeFeed::default());
        feed.seed(config_map("a", "one", 1, &[]));
        feed.seed(config_map("a", "two", 2, &[]));
        let handle = spawn_probe(
            "order",
            json!({}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        feed.upsert(config_map("a", "one", 3, &[]));
        feed.upsert(config_map("b", "three", 4, &[]));
        feed.delete(&config_map("a", "two", 2, &[]));
        assert!(wait_until(WAIT, || events("order").len() == 5).await);
        assert_eq!(
            events("order"),
            [
                "EVENT add a/one rv=1 flag=true",
                "EVENT add a/two rv=2 flag=true",
                "EVENT update a/one rv=3",
                "EVENT add b/three rv=4 flag=false",
                "EVENT delete a/two rv=2 flag=false",
            ]
        );
        assert_eq!(guest_logs().lines_starting("order", "OLD"), ["OLD rv=1"]);
        assert_eq!(handle.shared.delivered.load(Ordering::Relaxed), 5);
        assert!(wait_until(WAIT, || handle.shared.replay_done()).await);
        handle.stop(Duration::from_secs(5)).await;
        assert_eq!(*handle.shared.state.lock(), PluginState::Stopped);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trap_drops_the_event_and_a_fresh_instance_is_replayed_the_cache() {
        let feed = Arc::new(FakeFeed::default());
        feed.seed(config_map("a", "seed", 1, &[]));
        let handle = spawn_probe(
            "trapper",
            json!({"mode": "trap", "trigger": "bad"}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        assert!(wait_until(WAIT, || events("trapper").len() == 1).await);
        feed.upsert(config_map("a", "bad", 2, &[]));
        assert!(wait_until(WAIT, || handle.shared.traps.load(Ordering::Relaxed) == 1).await);
        // The fresh instance is replayed both objects, then gets live events again.
        assert!(
            wait_until(WAIT, || handle.shared.replay_done()
                && handle.shared.restarts.load(Ordering::Relaxed) == 1)
            .await
        );
        feed.upsert(config_map("a", "good", 3, &[]));
        assert!(
            wait_until(WAIT, || events("trapper")
                .contains(&"EVENT add a/good rv=3 flag=false".to_owned()))
            .await
        );
        let ev = events("trapper");
        assert!(
            ev.contains(&"EVENT add a/bad rv=2 flag=true".to_owned()),
            "{ev:?}"
        );
        assert_eq!(
            ev.iter()
                .filter(|e| e.starts_with("EVENT add a/seed"))
                .count(),
            2
        );
        let last = handle.shared.last_error.lock().clone().unwrap_or_default();
        assert!(
            last.starts_with("trap: add of v1/ConfigMap a/bad"),
            "{last}"
        );
        assert!(
            guest_logs()
                .host_lines("trapper")
                .iter()
                .any(|l| l.contains("instance dropped"))
        );
        handle.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_object_that_fails_twice_is_not_replayed_again() {
        let feed = Arc::new(FakeFeed::default());
        feed.seed(config_map("a", "seed", 1, &[]));
        let handle = spawn_probe(
            "poisoned",
            json!({"mode": "trap", "trigger": "bad", "alsoInitial": true}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        assert!(wait_until(WAIT, || events("poisoned").len() == 1).await);
        // Traps live, then again when the fresh instance is replayed it: quarantined.
        feed.upsert(config_map("a", "bad", 2, &[]));
        assert!(
            wait_until(WAIT, || handle.shared.replay_done()
                && handle.shared.restarts.load(Ordering::Relaxed) == 2)
            .await
        );
        feed.upsert(config_map("a", "good", 3, &[]));
        assert!(
            wait_until(WAIT, || events("poisoned")
                .contains(&"EVENT add a/good rv=3 flag=false".to_owned()))
            .await
        );
        assert_eq!(handle.shared.traps.load(Ordering::Relaxed), 2);
        assert_eq!(*handle.shared.state.lock(), PluginState::Running);
        assert!(
            guest_logs()
                .host_lines("poisoned")
                .iter()
                .any(|l| l.contains("made the plugin fail twice"))
        );
        // A new version of the object is delivered (and traps: the guest still dislikes it).
        feed.upsert(config_map("a", "bad", 4, &[]));
        assert!(wait_until(WAIT, || handle.shared.traps.load(Ordering::Relaxed) == 3).await);
        handle.stop(Duration::from_secs(5)).await;
    }

    async fn fault(name: &str, mode: &str, limits: Limits) -> ActorHandle {
        let feed = Arc::new(FakeFeed::default());
        let handle = spawn_probe(
            name,
            json!({"mode": mode, "trigger": "bad"}),
            limits,
            Grants::default(),
            feed.clone(),
        )
        .await;
        feed.upsert(config_map("a", "bad", 1, &[]));
        feed.upsert(config_map("a", "fine", 2, &[]));
        // Queued before the fault, it reaches the fresh instance through the replay (flagged
        // initial-list); without a fault it arrives live.
        let ok = wait_until(WAIT, || {
            events(name)
                .iter()
                .any(|e| e.starts_with("EVENT add a/fine rv=2"))
        })
        .await;
        assert!(ok, "{name}: the event after the fault was not delivered");
        handle
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_loop_times_out_and_the_next_event_is_delivered() {
        let limits = Limits {
            call_deadline: Duration::from_millis(200),
            ..Limits::default()
        };
        let h = fault("looper", "loop", limits).await;
        assert_eq!(h.shared.timeouts.load(Ordering::Relaxed), 1);
        assert_eq!(h.shared.traps.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeping_guest_times_out() {
        let limits = Limits {
            call_deadline: Duration::from_millis(200),
            ..Limits::default()
        };
        let h = fault("sleeper", "sleep", limits).await;
        assert_eq!(h.shared.timeouts.load(Ordering::Relaxed), 1);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unbounded_allocation_hits_the_memory_cap() {
        let limits = Limits {
            memory: 16 << 20,
            ..Limits::default()
        };
        let h = fault("hoarder", "alloc", limits).await;
        assert_eq!(h.shared.memory_faults.load(Ordering::Relaxed), 1);
        assert_eq!(h.shared.traps.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn guest_errors_are_counted_without_a_restart() {
        let h = fault("refuser", "error", Limits::default()).await;
        assert_eq!(h.shared.errors.load(Ordering::Relaxed), 1);
        assert_eq!(h.shared.restarts.load(Ordering::Relaxed), 0);
        let last = h.shared.last_error.lock().clone().unwrap_or_default();
        assert!(last.contains("probe refuses bad"), "{last}");
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ungranted_query_returns_an_error_value() {
        let h = fault("nosy", "ungranted", Limits::default()).await;
        assert_eq!(
            guest_logs().lines_starting("nosy", "UNGRANTED"),
            ["UNGRANTED err not-granted v1/Secret"]
        );
        assert_eq!(h.shared.traps.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_answer_from_the_cache_through_declared_indexes() {
        let feed = Arc::new(FakeFeed::default());
        feed.seed(config_map("a", "w1", 1, &[("app", "web")]));
        feed.seed(config_map("b", "w2", 2, &[("app", "web")]));
        feed.seed(config_map("b", "d1", 3, &[("app", "db")]));
        let h = spawn_probe(
            "asker",
            json!({"indexes": [{"name": "by-app", "group": "", "version": "v1",
                                "kind": "ConfigMap", "label": "app"}]}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        let query =
            |name: &str, rv: u64, data: serde_json::Value| -> super::super::SharedDocument {
                let mut v = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"namespace": "q", "name": name, "resourceVersion": rv.to_string(),
                                 "labels": {"probe-query": "1"}},
                    "data": {"group": "", "version": "v1", "kind": "ConfigMap"},
                });
                if let (Some(d), Some(e)) = (v["data"].as_object_mut(), data.as_object()) {
                    d.extend(e.clone());
                }
                Arc::new(v.to_string())
            };
        feed.upsert(query(
            "q1",
            10,
            json!({"op": "by-index", "index": "by-app", "value": "web"}),
        ));
        feed.upsert(query(
            "q2",
            11,
            json!({"op": "index-values", "index": "by-app"}),
        ));
        feed.upsert(query(
            "q3",
            12,
            json!({"op": "by-index", "index": "namespace", "value": "b"}),
        ));
        feed.upsert(query(
            "q4",
            13,
            json!({"op": "get", "namespace": "a", "name": "w1"}),
        ));
        feed.upsert(query(
            "q5",
            14,
            json!({"op": "by-index", "index": "nope", "value": "x"}),
        ));
        feed.upsert(query("q6", 15, json!({"op": "has-synced", "kind": "Pod"})));
        feed.upsert(query("q7", 16, json!({"op": "list", "selector": "app=db"})));
        let answers = || guest_logs().lines_starting("asker", "ANSWER");
        assert!(wait_until(WAIT, || answers().len() == 7).await);
        assert_eq!(
            answers(),
            [
                "ANSWER q1 ok a/w1,b/w2",
                "ANSWER q2 ok db,web",
                "ANSWER q3 ok b/d1,b/w2",
                "ANSWER q4 ok a/w1",
                "ANSWER q5 err unknown-index nope on v1/ConfigMap",
                "ANSWER q6 err not-subscribed v1/Pod",
                "ANSWER q7 ok b/d1",
            ]
        );
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn guest_stdout_and_stderr_reach_the_log_tagged_with_the_plugin() {
        let h = fault("printer", "print", Limits::default()).await;
        let printed = || {
            let lines = guest_logs().lines("printer");
            lines.contains(&"STDOUT a/bad".to_owned()) && lines.contains(&"STDERR a/bad".to_owned())
        };
        assert!(
            wait_until(WAIT, printed).await,
            "{:?}",
            guest_logs().lines("printer")
        );
        h.stop(Duration::from_secs(5)).await;
    }

    #[test]
    fn restart_backoff_grows_and_is_capped() {
        assert_eq!(restart_backoff(1), Duration::from_millis(50));
        assert_eq!(restart_backoff(2), Duration::from_millis(100));
        assert_eq!(restart_backoff(100), Duration::from_secs(10));
    }

    #[test]
    fn object_key_reads_namespace_and_name() {
        assert_eq!(
            object_key(r#"{"metadata":{"namespace":"a","name":"b"}}"#),
            "a/b"
        );
        assert_eq!(object_key(r#"{"metadata":{"name":"n"}}"#), "n");
        assert_eq!(object_key("[]"), "(unnamed object)");
    }
}
