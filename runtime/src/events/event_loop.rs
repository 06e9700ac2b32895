//! The plugin actor, THE event loop of every contract version: one instance, one queue, guest
//! calls one at a time and in order (one event per call for 0.1 and 0.2.0 guests, batches for
//! 0.2.1 `batch-handler` guests); on a fault the instance is replaced by a fresh one that is
//! replayed the cache, with one fault policy (backoff, quarantine, `failed`) for all.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kubewasm_informer::ObjectRef;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::events::batch::BatchSizer;
use crate::events::inbox::{Event, EventSink, Inbox, Queued, Subscribed, Subscriber};
use crate::guest::calls::{CallCounters, Outcome};
use crate::guest::instance::{Instance, Recipe, shown};
use crate::model::declared::Gvk;
use crate::model::grants::describe;
use crate::observer::{DropReason, FailureKind, PluginObserver};

/// Where a plugin is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginState {
    /// Receiving and handling events.
    Running,
    /// A fault threw the instance away; a fresh one is being started.
    Restarting,
    /// Restart after restart failed to make progress (or a fresh instance could not be
    /// started): the plugin receives nothing and is retried after a long backoff
    /// ([`RestartPolicy::failed_retry`]), or when it is replaced.
    Failed,
    /// Unloaded or shut down.
    Stopped,
}

/// The state an actor shares with the host (status, readiness).
pub(crate) struct Shared {
    /// The queue its handlers push into.
    pub(crate) inbox: Arc<Inbox>,
    /// How the guest calls ended (a fault's call counted when the instance is dropped);
    /// a 0.2 plugin's are its context's, which its reconcile workers count into too.
    pub(crate) calls: Arc<CallCounters>,
    pub(crate) restarts: Arc<AtomicU64>,
    /// Initial-list adds handled for the current generation.
    pub(crate) replay_handled: AtomicU64,
    pub(crate) state: Mutex<PluginState>,
    /// Set when the plugin enters [`PluginState::Failed`], cleared once an instance completes
    /// its replay: a plugin retrying out of the failed state still counts as failed for
    /// readiness, so it does not flap.
    pub(crate) failed: AtomicBool,
    pub(crate) last_error: Arc<Mutex<Option<String>>>,
    pub(crate) subscribed: Mutex<Option<Box<dyn Subscribed>>>,
}

/// How a plugin whose instances keep faulting is restarted.
///
/// A restart whose instance faults before it has handled its whole replay made no progress:
/// such restarts back off exponentially (50 ms, doubling, at most 10 s), and after
/// `max_restarts_without_progress` of them in a row the plugin is put in the
/// [`PluginState::Failed`] state and tried again only every `failed_retry`. A completed replay
/// resets the count: live events handled between faults are progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    pub max_restarts_without_progress: u32,
    pub failed_retry: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts_without_progress: 5,
            failed_retry: Duration::from_secs(300),
        }
    }
}

impl Shared {
    /// The state of an actor of `recipe`: counters of its own, or for a 0.2 plugin its
    /// context's.
    fn new(recipe: &Recipe) -> Self {
        let (calls, restarts, last_error) = match &recipe.context {
            Some(c) => (c.calls.clone(), c.restarts.clone(), c.last_error.clone()),
            None => Default::default(),
        };
        Shared {
            inbox: Arc::default(),
            calls,
            restarts,
            replay_handled: AtomicU64::new(0),
            state: Mutex::new(PluginState::Running),
            failed: AtomicBool::new(false),
            last_error,
            subscribed: Mutex::new(None),
        }
    }

    /// Whether the current instance has handled its whole replay.
    pub(crate) fn replay_done(&self) -> bool {
        let synced = self.subscribed.lock().as_ref().is_some_and(|s| s.synced());
        synced && self.replay_handled.load(Ordering::Acquire) >= self.inbox.replay_pushed()
    }

    fn record_error(&self, message: String) {
        *self.last_error.lock() = Some(message);
    }

    /// Whether the plugin counts as ready: running with its replay handled, or failed (and
    /// saying so in its status).
    pub(crate) fn ready(&self) -> bool {
        let state = *self.state.lock();
        state == PluginState::Stopped
            || self.failed.load(Ordering::Acquire)
            || (state == PluginState::Running && self.replay_done())
    }
}

/// What an actor needs besides its instance.
pub(crate) struct ActorConfig {
    /// What a fresh instance is made from.
    pub(crate) recipe: Recipe,
    /// The resource of each subscription, by index, for messages.
    pub(crate) resources: Vec<Gvk>,
    pub(crate) subscriber: Box<dyn Subscriber>,
    pub(crate) observer: Arc<dyn PluginObserver>,
    pub(crate) restart: RestartPolicy,
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
        let shared = Arc::new(Shared::new(&config.recipe));
        let (stop, stop_rx) = watch::channel(false);
        let sizer = BatchSizer::new(&config.recipe.limits);
        let mut actor = Actor {
            config,
            sizer,
            chunk: Vec::new(),
            shared: shared.clone(),
            instance: Some(instance),
            consecutive_failures: 0,
            restart_at: None,
            stale: 0,
            suspects: Quarantine::default(),
            poisoned: Quarantine::default(),
        };
        actor.subscribe(1);
        let task = tokio::spawn(actor.run(stop_rx));
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
        self.shared.inbox.close();
        *self.shared.state.lock() = PluginState::Stopped;
    }
}

/// Backoff after repeated faults without a successful call in between, so a guest that faults
/// on every event cannot spin a core replaying the cache.
pub(crate) fn restart_backoff(consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(8);
    Duration::from_millis(50u64 << exp).min(Duration::from_secs(10))
}

struct Actor {
    config: ActorConfig,
    /// How many events the next batch carries (for a guest that takes batches).
    sizer: BatchSizer,
    /// The events of the batch being delivered (kept between batches).
    chunk: Vec<Queued>,
    shared: Arc<Shared>,
    instance: Option<Instance>,
    /// Restarts in a row whose instance faulted before completing its replay.
    consecutive_failures: u32,
    /// When to start a fresh instance; `Some` exactly while there is no instance.
    restart_at: Option<tokio::time::Instant>,
    /// Events of dropped generations skipped since the last one was logged.
    stale: u64,
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
struct Quarantine(VecDeque<ObjectRef>);

const QUARANTINE_LIMIT: usize = 64;

impl Quarantine {
    fn contains(&self, object: &ObjectRef) -> bool {
        self.0.iter().any(|o| Arc::ptr_eq(o, object))
    }

    fn remove(&mut self, object: &ObjectRef) -> bool {
        let before = self.0.len();
        self.0.retain(|o| !Arc::ptr_eq(o, object));
        self.0.len() != before
    }

    fn insert(&mut self, object: ObjectRef) {
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
        self.shared.replay_handled.store(0, Ordering::Release);
        self.shared.inbox.set_generation(generation);
        let sink = EventSink::new(self.shared.inbox.clone(), generation);
        let subscribed = self.config.subscriber.subscribe(&sink);
        *self.shared.subscribed.lock() = Some(subscribed);
    }

    /// Takes the inbox's events in batches and handles them one by one, until stopped.
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let inbox = self.shared.inbox.clone();
        let mut batch = VecDeque::new();
        'run: loop {
            let restart_at = self.restart_at;
            let restart = async {
                match restart_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = restart => self.restart().await,
                more = inbox.take(&mut batch) => {
                    if !more {
                        break;
                    }
                    while !batch.is_empty() {
                        // A load of the channel's state per event; its lock only once a value
                        // was sent (only `true` is) or the sender is gone.
                        if stop.has_changed().unwrap_or(true) && *stop.borrow() {
                            break 'run;
                        }
                        let n = self.next_call_len(&batch);
                        if n > 1 {
                            self.handle_batch(&mut batch, n).await;
                        } else if let Some(queued) = batch.pop_front() {
                            self.handle(queued).await;
                        }
                    }
                }
            }
        }
        inbox.handled(batch.len());
        self.shared.subscribed.lock().take();
    }

    fn drop_events(&self, reason: DropReason, n: u64) {
        self.shared.calls.drop_events(reason, n);
        self.config.observer.events_dropped(reason, n);
    }

    /// How many of the `waiting` events the next guest call carries: one, unless the guest
    /// takes batches and its instance has completed a replay since the last fault (after a
    /// fault the replay goes one event per call, so the event that faults is known and can be
    /// quarantined as a 0.1 guest's is); a batch holds only events of the current generation
    /// that are not quarantined.
    fn next_call_len(&self, waiting: &VecDeque<Queued>) -> usize {
        let batches = self.instance.as_ref().is_some_and(Instance::takes_batches);
        if !batches || self.consecutive_failures > 0 {
            return 1;
        }
        let generation = self.shared.inbox.generation();
        self.sizer.next_len(waiting.iter().take_while(|q| {
            q.generation == generation && !self.poisoned.contains(q.event.object())
        }))
    }

    /// Delivers the first `n` (more than one) of the `waiting` events in one call.
    async fn handle_batch(&mut self, waiting: &mut VecDeque<Queued>, n: usize) {
        self.shared.inbox.handled(n);
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.clear();
        chunk.extend(waiting.drain(..n));
        let Some(instance) = self.instance.as_mut() else {
            self.chunk = chunk;
            return;
        };
        let initial = chunk.iter().filter(|q| is_initial(&q.event)).count();
        let outcome = instance.deliver_batch(&chunk).await;
        let elapsed = instance.last_call();
        self.config.observer.handler_called(elapsed);
        self.shared
            .replay_handled
            .fetch_add(initial as u64, Ordering::AcqRel);
        match outcome {
            Outcome::Ok(failed) => {
                self.sizer.returned(n, elapsed);
                self.shared.calls.returned_events(n, failed.len());
                let mut failed = failed.into_iter().peekable();
                for (i, q) in chunk.iter().enumerate() {
                    let ok = match failed.next_if(|(f, _)| *f <= i) {
                        Some((_, reason)) => {
                            // A guest naming one event twice or out of order fails it once.
                            while failed.next_if(|(f, _)| *f <= i).is_some() {}
                            self.guest_error(q, &reason);
                            false
                        }
                        None => true,
                    };
                    self.config
                        .observer
                        .event_handled(q.subscription, q.event.kind(), ok);
                }
            }
            // A batch answers a list, never one error: the host could not lower it.
            Outcome::GuestError(reason) => {
                self.shared.calls.returned_events(n, n);
                let reason = shown(&reason);
                if let Some(unlogged) = self
                    .config
                    .recipe
                    .log_gate
                    .admit_error(crate::guest::log_gate::GuestErrors::Handler)
                {
                    tracing::warn!(
                        plugin = &*self.config.recipe.name,
                        unlogged,
                        "handler call refused: {reason}"
                    );
                }
                self.shared
                    .record_error(format!("a batch of {n} events: {reason}"));
                for q in &chunk {
                    self.config
                        .observer
                        .event_handled(q.subscription, q.event.kind(), false);
                }
            }
            Outcome::Failed(failure, reason) => {
                let message = format!("a batch of {n} events: {}", shown(&reason));
                let newly_failed = self.drop_instance();
                for q in &chunk {
                    self.config
                        .observer
                        .event_handled(q.subscription, q.event.kind(), false);
                }
                // Which event faulted is not known: the batch's objects reach the fresh
                // instance through its replay, one per call.
                self.drop_events(DropReason::Replaced, n as u64);
                self.sizer.faulted();
                self.count_fault(failure, message);
                if newly_failed {
                    self.report_failed();
                }
                self.chunk = chunk;
                return;
            }
        }
        self.chunk = chunk;
        self.note_progress();
    }

    /// Records an event the guest answered with an error, and logs it unless one of the
    /// plugin's error lines was logged within the last second (a handler failing every event
    /// of a resync cannot flood the log).
    fn guest_error(&self, queued: &Queued, reason: &str) {
        let kind = queued.event.kind();
        let resource = self
            .config
            .resources
            .get(queued.subscription)
            .map_or_else(|| "?".to_owned(), describe);
        let reason = shown(reason);
        if let Some(unlogged) = self
            .config
            .recipe
            .log_gate
            .admit_error(crate::guest::log_gate::GuestErrors::Handler)
        {
            tracing::warn!(
                plugin = &*self.config.recipe.name,
                resource = %resource,
                event = kind.as_str(),
                unlogged,
                "handler returned an error: {reason}"
            );
        }
        self.shared
            .record_error(format!("{} {resource}: {reason}", kind.as_str()));
    }

    async fn handle(&mut self, queued: Queued) {
        self.shared.inbox.handled(1);
        let generation = self.shared.inbox.generation();
        if queued.generation != generation {
            // A failed plugin has no fresh instance to replay the cache to: its events are
            // not replaced, only lost.
            if self.shared.failed.load(Ordering::Acquire) {
                self.drop_events(DropReason::Failed, 1);
            } else {
                self.stale += 1;
                self.drop_events(DropReason::Replaced, 1);
            }
            return;
        }
        if self.stale > 0 {
            tracing::warn!(
                plugin = &*self.config.recipe.name,
                "plugin {}: {} events queued for the instance that faulted were not delivered; \
                 the fresh instance was replayed the cache's current state instead",
                self.config.recipe.name,
                self.stale
            );
            self.stale = 0;
        }
        let initial = is_initial(&queued.event);
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
            self.drop_events(DropReason::Quarantined, 1);
            tracing::warn!(
                plugin = &*self.config.recipe.name,
                object = queued.event.object().key(),
                "event skipped: this object version made the plugin fail twice"
            );
            self.note_progress();
            return;
        }
        let kind = queued.event.kind();
        let outcome = instance.deliver(&queued).await;
        let elapsed = instance.last_call();
        let batches = instance.takes_batches();
        self.config.observer.handler_called(elapsed);
        match &outcome {
            Outcome::Failed(..) => self.sizer.faulted(),
            // Only a guest that takes batches has its batches sized (its calls of one event
            // after a fault): for the others the sizer's two divisions an event are for nothing.
            _ if batches => self.sizer.returned(1, elapsed),
            _ => {}
        }
        if initial {
            self.shared.replay_handled.fetch_add(1, Ordering::AcqRel);
        }
        match outcome {
            Outcome::Ok(()) => {
                self.shared.calls.returned.fetch_add(1, Ordering::Relaxed);
                self.config
                    .observer
                    .event_handled(queued.subscription, kind, true);
            }
            Outcome::GuestError(reason) => {
                self.shared.calls.returned.fetch_add(1, Ordering::Relaxed);
                self.shared.calls.errors.fetch_add(1, Ordering::Relaxed);
                self.config
                    .observer
                    .event_handled(queued.subscription, kind, false);
                self.guest_error(&queued, &reason);
            }
            Outcome::Failed(failure, reason) => {
                let message = format!(
                    "{} of {} {}: {}",
                    kind.as_str(),
                    describe(resource),
                    queued.event.object().key(),
                    shown(&reason)
                );
                // The status first: whoever sees the fault counted sees the instance replaced.
                let newly_failed = self.drop_instance();
                self.config
                    .observer
                    .event_handled(queued.subscription, kind, false);
                self.drop_events(DropReason::Fault, 1);
                let version = queued.event.object().clone();
                if self.suspects.remove(&version) {
                    self.poisoned.insert(version);
                } else {
                    self.suspects.insert(version);
                }
                self.count_fault(failure, message);
                if newly_failed {
                    self.report_failed();
                }
                return;
            }
        }
        self.note_progress();
    }

    /// A completed replay is progress: the restart count starts again, and a plugin that had
    /// failed has recovered.
    fn note_progress(&mut self) {
        if self.consecutive_failures == 0 && !self.shared.failed.load(Ordering::Acquire) {
            return;
        }
        if !self.shared.replay_done() {
            return;
        }
        self.consecutive_failures = 0;
        if self.shared.failed.swap(false, Ordering::AcqRel) {
            tracing::info!(
                plugin = &*self.config.recipe.name,
                "plugin {} recovered: its instance handled the whole replay",
                self.config.recipe.name
            );
        }
    }

    /// Throws the faulted instance away and schedules a fresh one, which will be replayed the
    /// cache. From here until the fresh instance has handled its replay the status says so:
    /// the state is `Restarting` (or `Failed`) and `replay_done` is false, so no one takes the
    /// dead instance's finished replay for the fresh one's. Whether the plugin just failed.
    fn drop_instance(&mut self) -> bool {
        // A fault before the replay was handled is a restart without progress.
        if self.shared.replay_done() {
            self.consecutive_failures = 0;
        }
        self.instance = None;
        // Unregister at once so no more events pile up for the dead generation; without a
        // registration the replay is not done.
        self.shared
            .inbox
            .set_generation(self.shared.inbox.generation() + 1);
        self.shared.subscribed.lock().take();
        self.schedule_restart()
    }

    /// Logs, records and counts the fault that made [`drop_instance`](Self::drop_instance)
    /// throw the instance away. The count is published with release ordering last: whoever
    /// sees it sees the status, the log record and the last error of the fault.
    fn count_fault(&self, failure: FailureKind, message: String) {
        let name = self.config.recipe.name.clone();
        // One record naming the plugin; the guest's part of the message is escaped, so a
        // backtrace shows as `\n`-separated frames on the same line.
        tracing::error!(
            plugin = &*name,
            failure = failure.as_str(),
            "plugin {name}: instance dropped after a {} in {message}",
            failure.as_str()
        );
        self.shared
            .record_error(format!("{}: {message}", failure.as_str()));
        let counter = match failure {
            FailureKind::Trap => &self.shared.calls.traps,
            FailureKind::Timeout => &self.shared.calls.timeouts,
            FailureKind::Memory => &self.shared.calls.memory_faults,
        };
        counter.fetch_add(1, Ordering::Release);
        self.config.observer.instance_failed(failure);
    }

    /// Counts a restart without progress and schedules the next attempt: soon while the
    /// count is under the policy's limit, after the long `failed_retry` once it is not.
    /// Whether this put the plugin in the failed state (it was not before).
    fn schedule_restart(&mut self) -> bool {
        self.consecutive_failures += 1;
        let policy = self.config.restart;
        let (delay, newly_failed) =
            if self.consecutive_failures >= policy.max_restarts_without_progress {
                *self.shared.state.lock() = PluginState::Failed;
                let was_failed = self.shared.failed.swap(true, Ordering::AcqRel);
                (policy.failed_retry, !was_failed)
            } else {
                *self.shared.state.lock() = PluginState::Restarting;
                (restart_backoff(self.consecutive_failures), false)
            };
        self.restart_at = Some(tokio::time::Instant::now() + delay);
        newly_failed
    }

    /// Logs that the plugin entered the failed state.
    fn report_failed(&self) {
        tracing::error!(
            plugin = &*self.config.recipe.name,
            "plugin {} failed: {} restarts in a row did not complete the replay; \
             it receives nothing and is tried again every {:?}",
            self.config.recipe.name,
            self.consecutive_failures,
            self.config.restart.failed_retry
        );
    }

    /// Starts a fresh instance and registers it (it is replayed the cache).
    async fn restart(&mut self) {
        self.restart_at = None;
        let name = self.config.recipe.name.clone();
        match Instance::start(&self.config.recipe).await {
            Ok(instance) => {
                self.instance = Some(instance);
                self.shared.restarts.fetch_add(1, Ordering::Relaxed);
                *self.shared.state.lock() = PluginState::Running;
                self.subscribe(self.shared.inbox.generation());
                if self.shared.failed.load(Ordering::Acquire) {
                    tracing::debug!(plugin = &*name, "failed plugin tried again");
                } else {
                    tracing::info!(
                        plugin = &*name,
                        "fresh instance started, replaying the cache"
                    );
                }
            }
            Err(reason) => {
                if !self.shared.failed.load(Ordering::Acquire) {
                    tracing::error!(
                        plugin = &*name,
                        "plugin {name}: could not start a fresh instance: {reason}"
                    );
                }
                self.shared
                    .record_error(format!("restart failed: {reason}"));
                if self.schedule_restart() {
                    self.report_failed();
                }
            }
        }
    }
}

/// Whether `event` is an add of the initial list (or of a replay).
fn is_initial(event: &Event) -> bool {
    matches!(
        event,
        Event::Add {
            in_initial_list: true,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use kubewasm_tests::{guest_logs, wait_until};
    use serde_json::json;

    use super::*;
    use crate::guest::log_gate::LogLimits;
    use crate::model::grants::{Grants, Limits};
    use crate::testing::{
        ProbeOptions, TestInformer, config_map_json, spawn_probe, spawn_probe_with,
    };

    const WAIT: Duration = Duration::from_secs(30);

    fn events(plugin: &str) -> Vec<String> {
        guest_logs().lines_starting(plugin, "EVENT")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replay_then_live_events_arrive_in_order() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "one", &[]));
        feed.upsert(config_map_json("a", "two", &[]));
        let handle = spawn_probe(
            "order",
            json!({}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        feed.upsert(config_map_json("a", "one", &[]));
        feed.upsert(config_map_json("b", "three", &[]));
        feed.delete("a/two");
        assert!(wait_until(WAIT, || events("order").len() == 5).await);
        let seen = events("order");
        // The replay comes first, in the cache's order (a hash map's: any order); then the live
        // events, in the order they happened.
        let mut replay = seen[..2].to_vec();
        replay.sort();
        assert_eq!(
            replay,
            [
                "EVENT add a/one rv=1 flag=true",
                "EVENT add a/two rv=2 flag=true"
            ],
            "{seen:?}"
        );
        assert_eq!(
            seen[2..],
            [
                "EVENT update a/one rv=3",
                "EVENT add b/three rv=4 flag=false",
                "EVENT delete a/two rv=5 flag=false",
            ]
        );
        assert_eq!(guest_logs().lines_starting("order", "OLD"), ["OLD rv=1"]);
        // Counted once the call returned, which is after the guest logged.
        assert!(
            wait_until(WAIT, || handle
                .shared
                .calls
                .returned
                .load(Ordering::Relaxed)
                == 5)
            .await
        );
        assert!(wait_until(WAIT, || handle.shared.replay_done()).await);
        handle.stop(Duration::from_secs(5)).await;
        assert_eq!(*handle.shared.state.lock(), PluginState::Stopped);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn trap_drops_the_event_and_a_fresh_instance_is_replayed_the_cache() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "seed", &[]));
        let handle = spawn_probe(
            "trapper",
            json!({"mode": "trap", "trigger": "bad"}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        assert!(wait_until(WAIT, || events("trapper").len() == 1).await);
        feed.upsert(config_map_json("a", "bad", &[]));
        assert!(
            wait_until(WAIT, || handle.shared.calls.traps.load(Ordering::Relaxed)
                == 1)
            .await
        );
        // The fresh instance is replayed both objects, then gets live events again.
        assert!(
            wait_until(WAIT, || handle.shared.replay_done()
                && handle.shared.restarts.load(Ordering::Relaxed) == 1)
            .await
        );
        feed.upsert(config_map_json("a", "good", &[]));
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
        // One record, whose first line names the plugin (a backtrace may follow).
        let records: Vec<String> = guest_logs()
            .host_lines("trapper")
            .into_iter()
            .filter(|l| l.contains("instance dropped"))
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        let first = records[0].lines().next().unwrap_or_default();
        assert!(first.contains("plugin trapper"), "{first}");
        assert_eq!(handle.shared.calls.dropped(DropReason::Fault), 1);
        handle.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_object_that_fails_twice_is_not_replayed_again() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "seed", &[]));
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
        feed.upsert(config_map_json("a", "bad", &[]));
        assert!(
            wait_until(WAIT, || handle.shared.replay_done()
                && handle.shared.restarts.load(Ordering::Relaxed) == 2)
            .await
        );
        feed.upsert(config_map_json("a", "good", &[]));
        assert!(
            wait_until(WAIT, || events("poisoned")
                .contains(&"EVENT add a/good rv=3 flag=false".to_owned()))
            .await
        );
        assert_eq!(handle.shared.calls.traps.load(Ordering::Relaxed), 2);
        assert_eq!(*handle.shared.state.lock(), PluginState::Running);
        assert!(
            guest_logs()
                .host_lines("poisoned")
                .iter()
                .any(|l| l.contains("made the plugin fail twice"))
        );
        // A new version of the object is delivered (and traps: the guest still dislikes it).
        feed.upsert(config_map_json("a", "bad", &[]));
        assert!(
            wait_until(WAIT, || handle.shared.calls.traps.load(Ordering::Relaxed)
                == 3)
            .await
        );
        handle.stop(Duration::from_secs(5)).await;
    }

    async fn fault(name: &str, mode: &str, limits: Limits) -> ActorHandle {
        let feed = TestInformer::new();
        let handle = spawn_probe(
            name,
            json!({"mode": mode, "trigger": "bad"}),
            limits,
            Grants::default(),
            feed.clone(),
        )
        .await;
        feed.upsert(config_map_json("a", "bad", &[]));
        feed.upsert(config_map_json("a", "fine", &[]));
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
        assert_eq!(h.shared.calls.timeouts.load(Ordering::Relaxed), 1);
        assert_eq!(h.shared.calls.traps.load(Ordering::Relaxed), 0);
        // The event it timed out on, and the one queued behind it for the dropped instance
        // (the fresh instance got it through its replay instead): counted and logged.
        assert_eq!(h.shared.calls.dropped(DropReason::Fault), 1);
        assert_eq!(h.shared.calls.dropped(DropReason::Replaced), 1);
        assert!(
            guest_logs()
                .host_lines("looper")
                .iter()
                .any(|l| l.contains("1 events queued for the instance that faulted"))
        );
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeping_guest_times_out() {
        let limits = Limits {
            call_deadline: Duration::from_millis(200),
            ..Limits::default()
        };
        let h = fault("sleeper", "sleep", limits).await;
        assert_eq!(h.shared.calls.timeouts.load(Ordering::Relaxed), 1);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_on_the_host_does_not_count_against_the_deadline() {
        let feed = TestInformer::new();
        let limits = Limits {
            call_deadline: Duration::from_millis(300),
            ..Limits::default()
        };
        let h = spawn_probe(
            "napper",
            json!({"mode": "nap", "trigger": "slow", "napMs": 900}),
            limits,
            Grants::default(),
            feed.clone(),
        )
        .await;
        feed.upsert(config_map_json("a", "slow", &[]));
        assert!(
            wait_until(WAIT, || guest_logs()
                .lines("napper")
                .contains(&"NAPPED slow".to_owned()))
            .await
        );
        // The call is counted when it returns to the host, a moment after the guest's log line.
        assert!(
            wait_until(WAIT, || h.shared.calls.returned.load(Ordering::Relaxed)
                == 1)
            .await,
            "the napping call never returned"
        );
        assert_eq!(h.shared.calls.timeouts.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unbounded_allocation_hits_the_memory_cap() {
        let limits = Limits {
            memory: 16 << 20,
            ..Limits::default()
        };
        let h = fault("hoarder", "alloc", limits).await;
        assert_eq!(h.shared.calls.memory_faults.load(Ordering::Relaxed), 1);
        assert_eq!(h.shared.calls.traps.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn guest_errors_are_counted_without_a_restart() {
        let h = fault("refuser", "error", Limits::default()).await;
        assert_eq!(h.shared.calls.errors.load(Ordering::Relaxed), 1);
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
        assert_eq!(h.shared.calls.traps.load(Ordering::Relaxed), 0);
        h.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queries_answer_from_the_cache_through_declared_indexes() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "w1", &[("app", "web")]));
        feed.upsert(config_map_json("b", "w2", &[("app", "web")]));
        feed.upsert(config_map_json("b", "d1", &[("app", "db")]));
        let h = spawn_probe(
            "asker",
            json!({"indexes": [{"name": "by-app", "group": "", "version": "v1",
                                "kind": "ConfigMap", "label": "app"}]}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        let query = |name: &str, data: serde_json::Value| -> String {
            let mut v = json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "q", "name": name, "labels": {"probe-query": "1"}},
                "data": {"group": "", "version": "v1", "kind": "ConfigMap"},
            });
            if let (Some(d), Some(e)) = (v["data"].as_object_mut(), data.as_object()) {
                d.extend(e.clone());
            }
            v.to_string()
        };
        feed.upsert(query(
            "q1",
            json!({"op": "by-index", "index": "by-app", "value": "web"}),
        ));
        feed.upsert(query(
            "q2",
            json!({"op": "index-values", "index": "by-app"}),
        ));
        feed.upsert(query(
            "q3",
            json!({"op": "by-index", "index": "namespace", "value": "b"}),
        ));
        feed.upsert(query(
            "q4",
            json!({"op": "get", "namespace": "a", "name": "w1"}),
        ));
        feed.upsert(query(
            "q5",
            json!({"op": "by-index", "index": "nope", "value": "x"}),
        ));
        feed.upsert(query("q6", json!({"op": "has-synced", "kind": "Pod"})));
        feed.upsert(query("q7", json!({"op": "list", "selector": "app=db"})));
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_guest_trapping_on_every_third_add_ends_failed_and_is_retried_rarely() {
        let feed = TestInformer::new();
        for i in 0..20 {
            feed.upsert(config_map_json("a", &format!("o{i:02}"), &[]));
        }
        let policy = RestartPolicy {
            max_restarts_without_progress: 5,
            failed_retry: Duration::from_secs(2),
        };
        let handle = spawn_probe_with(
            "flapper",
            json!({"mode": "trap-every", "every": 3}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
            ProbeOptions {
                restart: policy,
                ..ProbeOptions::default()
            },
        )
        .await;
        let s = handle.shared.clone();
        assert!(wait_until(WAIT, || *s.state.lock() == PluginState::Failed).await);
        // Five restarts in a row never completed the replay: failed, not restarted at once.
        assert_eq!(s.calls.traps.load(Ordering::Relaxed), 5);
        assert_eq!(s.restarts.load(Ordering::Relaxed), 4);
        assert!(s.ready(), "a failed plugin does not hold readiness back");
        // Retried after the long backoff, it fails again at once: still failed, logged once.
        assert!(wait_until(WAIT, || s.calls.traps.load(Ordering::Relaxed) >= 6).await);
        assert!(wait_until(WAIT, || *s.state.lock() == PluginState::Failed).await);
        let failed_lines = guest_logs()
            .host_lines("flapper")
            .iter()
            .filter(|l| l.contains("plugin flapper failed"))
            .count();
        assert_eq!(failed_lines, 1);
        assert!(s.calls.dropped(DropReason::Fault) >= 6);
        // The replay queued behind the fault that made it failed went to no fresh instance:
        // dropped as `failed`, not `replaced`.
        assert!(s.calls.dropped(DropReason::Failed) > 0);
        handle.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fault_after_the_replay_is_progress_and_backs_off_no_further() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "seed", &[]));
        let handle = spawn_probe(
            "progressing",
            json!({"mode": "trap", "trigger": "bad"}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
        )
        .await;
        let s = handle.shared.clone();
        // Each bad object traps live once; every fresh instance completes its replay first
        // (a replayed bad object arrives in the initial list, where the probe does not trap).
        for i in 0..7 {
            assert!(wait_until(WAIT, || s.ready() && s.replay_done()).await);
            feed.upsert(config_map_json("a", &format!("bad{i}"), &[]));
            assert!(wait_until(WAIT, || s.calls.traps.load(Ordering::Acquire) == i + 1).await);
        }
        assert!(
            wait_until(WAIT, || *s.state.lock() == PluginState::Running
                && s.replay_done())
            .await
        );
        assert!(!s.failed.load(Ordering::Acquire));
        handle.stop(Duration::from_secs(5)).await;
    }

    /// The plugin's status at each moment its fault is reported: (state, replay done, ready).
    #[derive(Default)]
    struct StatusAtFault {
        shared: std::sync::OnceLock<Arc<Shared>>,
        seen: Mutex<Vec<(PluginState, bool, bool)>>,
    }

    impl StatusAtFault {
        fn record(&self) {
            if let Some(s) = self.shared.get() {
                let state = *s.state.lock();
                self.seen.lock().push((state, s.replay_done(), s.ready()));
            }
        }
    }

    impl PluginObserver for StatusAtFault {
        fn instance_failed(&self, _failure: FailureKind) {
            self.record();
        }
        fn events_dropped(&self, reason: DropReason, _n: u64) {
            if reason == DropReason::Fault {
                self.record();
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fault_is_reported_once_the_status_says_the_instance_is_being_replaced() {
        let feed = TestInformer::new();
        feed.upsert(config_map_json("a", "seed", &[]));
        let observer = Arc::new(StatusAtFault::default());
        let handle = spawn_probe_with(
            "replaced",
            json!({"mode": "trap", "trigger": "bad"}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
            ProbeOptions {
                observer: observer.clone(),
                ..ProbeOptions::default()
            },
        )
        .await;
        let s = handle.shared.clone();
        assert!(observer.shared.set(s.clone()).is_ok());
        assert!(wait_until(WAIT, || s.ready() && s.replay_done()).await);
        feed.upsert(config_map_json("a", "bad", &[]));
        assert!(wait_until(WAIT, || observer.seen.lock().len() == 2).await);
        // Not the dead instance's replay reported as done, nor the plugin as ready.
        assert_eq!(
            *observer.seen.lock(),
            [(PluginState::Restarting, false, false); 2]
        );
        // The fresh instance is replayed the cache (the bad object too, without trapping).
        assert!(wait_until(WAIT, || s.ready() && s.replay_done()).await);
        assert_eq!(*s.state.lock(), PluginState::Running);
        assert_eq!(s.calls.traps.load(Ordering::Acquire), 1);
        handle.stop(Duration::from_secs(5)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_guest_flooding_the_log_is_capped_in_rate_and_line_length() {
        let feed = TestInformer::new();
        let logs = LogLimits {
            lines_per_second: 100,
            burst_lines: 100,
            line_bytes: 8 << 10,
        };
        let h = spawn_probe_with(
            "spammer",
            json!({"mode": "spam", "trigger": "flood", "spamLines": 300, "spamBytes": 20000}),
            Limits::default(),
            Grants::default(),
            feed.clone(),
            ProbeOptions {
                logs,
                ..ProbeOptions::default()
            },
        )
        .await;
        feed.upsert(config_map_json("a", "flood", &[]));
        assert!(
            wait_until(WAIT, || h.shared.calls.returned.load(Ordering::Relaxed)
                == 1)
            .await
        );
        // 600 lines (log import and stdout) at once: about a burst of 100 gets through. Past a
        // second, the next line is admitted with a notice of what was dropped.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        feed.upsert(config_map_json("a", "calm", &[]));
        assert!(
            wait_until(WAIT, || guest_logs()
                .lines("spammer")
                .iter()
                .any(|l| l.starts_with("EVENT add a/calm")))
            .await
        );
        let lines = guest_logs().lines("spammer");
        let long: Vec<&String> = lines.iter().filter(|l| l.starts_with("xxx")).collect();
        assert!(
            (90..=200).contains(&long.len()),
            "{} of 600 flood lines logged",
            long.len()
        );
        // Lines through the log import are cut; stdout arrives in chunks of at most 8 KiB.
        assert!(long.iter().all(|l| l.len() < 8300));
        assert!(long.iter().any(|l| l.contains("[cut: 20000 bytes")));
        assert!(
            guest_logs()
                .host_lines("spammer")
                .iter()
                .any(|l| l.contains("log lines dropped")),
            "{:?}",
            guest_logs().host_lines("spammer")
        );
        h.stop(Duration::from_secs(5)).await;
    }

    #[test]
    fn restart_backoff_grows_and_is_capped() {
        assert_eq!(restart_backoff(1), Duration::from_millis(50));
        assert_eq!(restart_backoff(2), Duration::from_millis(100));
        assert_eq!(restart_backoff(100), Duration::from_secs(10));
    }
}
