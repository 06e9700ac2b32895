//! The plugin actor: one instance, one queue, guest calls one at a time and in order; on a
//! fault the instance is replaced by a fresh one that is replayed the cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::Gvk;
use super::cache_api::Access;
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
