//! The reflector: list (streaming or paginated), then watch from there, into the DeltaFIFO.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use parking_lot::{Mutex, RwLock};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::{Backoff, BackoffOptions};
use crate::delta_fifo::DeltaFifo;
use crate::error::{Error, Result};
use crate::lister_watcher::{ListerWatcher, WatchEvent, WatchStream};
use crate::object::{Object, ObjectRef};
use crate::store::ByKey;

/// Rewrites an object before it is stored (after the managedFields strip, if on). Not applied
/// to tombstones, which come from the cache.
pub type TransformFunc = Arc<dyn Fn(Object) -> Result<Object> + Send + Sync>;

/// Called with every list or watch failure (after which the reflector backs off and retries).
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// How the reflector lists and retries.
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    /// Try a streaming list (watch with sendInitialEvents) first; fall back to a paginated
    /// LIST when the server rejects it.
    pub streaming_list: bool,
    /// Retry spacing after failures.
    pub backoff: BackoffOptions,
    /// A watch that ends sooner than this without delivering anything counts as a failure
    /// (backoff), so a server that closes watches at once is not hammered.
    pub min_healthy_watch: Duration,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            streaming_list: true,
            backoff: BackoffOptions::default(),
            min_healthy_watch: Duration::from_secs(1),
        }
    }
}

/// What happens to deltas once the reflector has queued them: the informer's processing.
pub(crate) trait DeltaProcessor: Send + Sync {
    /// Applies up to `max` queued keys to the store and hands them to the handlers' buffers;
    /// returns whether more keys are queued.
    fn process_queued(&self, max: usize) -> bool;
    /// Wakes handlers that sleep while notifications wait for them.
    fn flush(&self);
}

/// Events processed before handlers are woken, at most, while a watch has more ready.
const MAX_UNFLUSHED: usize = 256;

/// Hooks the informer can change while the reflector runs.
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) transform: RwLock<Option<TransformFunc>>,
    pub(crate) watch_error_handler: RwLock<Option<WatchErrorHandler>>,
}

/// What the reflector reports about itself.
#[derive(Default)]
pub(crate) struct ReflectorStatus {
    pub(crate) last_sync_resource_version: Mutex<Option<String>>,
    /// Completed lists, the first included.
    pub(crate) lists: AtomicU64,
    /// Watches that ended and were reopened.
    pub(crate) watch_restarts: AtomicU64,
    /// List or watch failures.
    pub(crate) errors: AtomicU64,
    /// The server rejected a streaming list; paginated LISTs are used from then on.
    pub(crate) streaming_unsupported: AtomicBool,
}

/// The reflector's position in its loop.
enum State {
    /// No usable resourceVersion: list everything (first start, or after 410 Gone).
    NeedList,
    /// Watch from `resource_version`, on `stream` if a streaming list left one open.
    Watch {
        resource_version: String,
        stream: Option<WatchStream>,
    },
    /// Wait out a backoff delay, then go on with `then`.
    Wait { delay: Duration, then: Box<State> },
}

/// How a watch ended.
enum WatchOutcome {
    /// The server closed it (timeout, restart): re-watch from the last version.
    Ended { events: usize },
    /// The version is too old: relist.
    Expired,
    /// Anything else: back off, then re-watch from the last version.
    Failed(Error),
}

pub(crate) struct Reflector {
    lw: Arc<dyn ListerWatcher>,
    fifo: Arc<DeltaFifo>,
    processing: Arc<dyn DeltaProcessor>,
    hooks: Arc<Hooks>,
    status: Arc<ReflectorStatus>,
    options: ReflectorOptions,
    backoff: Backoff,
}

impl Reflector {
    pub(crate) fn new(
        lw: Arc<dyn ListerWatcher>,
        fifo: Arc<DeltaFifo>,
        processing: Arc<dyn DeltaProcessor>,
        hooks: Arc<Hooks>,
        status: Arc<ReflectorStatus>,
        options: ReflectorOptions,
    ) -> Reflector {
        Reflector {
            backoff: Backoff::new(options.backoff.clone()),
            lw,
            fifo,
            processing,
            hooks,
            status,
            options,
        }
    }

    /// Lists and watches until `cancel` fires.
    pub(crate) async fn run(mut self, cancel: CancellationToken) {
        let mut state = State::NeedList;
        loop {
            state = tokio::select! {
                _ = cancel.cancelled() => return,
                next = self.step(state) => next,
            };
        }
    }

    async fn step(&mut self, state: State) -> State {
        match state {
            State::NeedList => match self.list().await {
                Ok((resource_version, stream)) => {
                    self.status.lists.fetch_add(1, Ordering::Relaxed);
                    self.set_last_rv(&resource_version);
                    State::Watch {
                        resource_version,
                        stream,
                    }
                }
                Err(err) => {
                    self.report(&err);
                    if self.use_streaming() && rejects_streaming(&err) {
                        tracing::info!(error = %err, "server rejected a streaming list; using paginated LISTs");
                        self.status
                            .streaming_unsupported
                            .store(true, Ordering::Relaxed);
                        return State::NeedList;
                    }
                    self.wait(State::NeedList)
                }
            },
            State::Watch {
                resource_version,
                stream,
            } => {
                let stream = match stream {
                    Some(stream) => stream,
                    None => match self.lw.watch(resource_version.clone(), false).await {
                        Ok(stream) => stream,
                        Err(err) => {
                            self.report(&err);
                            if err.is_expired() {
                                return State::NeedList;
                            }
                            return self.wait(State::Watch {
                                resource_version,
                                stream: None,
                            });
                        }
                    },
                };
                let started = Instant::now();
                let mut resource_version = resource_version;
                let outcome = self.watch(stream, &mut resource_version).await;
                self.status.watch_restarts.fetch_add(1, Ordering::Relaxed);
                let again = State::Watch {
                    resource_version,
                    stream: None,
                };
                match outcome {
                    WatchOutcome::Ended { events } => {
                        if events == 0 && started.elapsed() < self.options.min_healthy_watch {
                            tracing::debug!("watch closed at once; backing off");
                            self.wait(again)
                        } else {
                            again
                        }
                    }
                    WatchOutcome::Expired => {
                        tracing::info!("resourceVersion expired; relisting");
                        State::NeedList
                    }
                    WatchOutcome::Failed(err) => {
                        self.report(&err);
                        self.wait(again)
                    }
                }
            }
            State::Wait { delay, then } => {
                tokio::time::sleep(delay).await;
                *then
            }
        }
    }

    fn wait(&mut self, then: State) -> State {
        State::Wait {
            delay: self.backoff.next_delay(),
            then: Box::new(then),
        }
    }

    fn use_streaming(&self) -> bool {
        self.options.streaming_list && !self.status.streaming_unsupported.load(Ordering::Relaxed)
    }

    /// Lists everything into the FIFO as one `replace`; returns the version to watch from and,
    /// after a streaming list, the watch that is already open.
    async fn list(&mut self) -> Result<(String, Option<WatchStream>)> {
        if self.use_streaming() {
            let (rv, stream) = self.streaming_list().await?;
            Ok((rv, Some(stream)))
        } else {
            Ok((self.paginated_list().await?, None))
        }
    }

    async fn streaming_list(&mut self) -> Result<(String, WatchStream)> {
        let mut stream = self.lw.watch(String::new(), true).await?;
        let mut objects: HashSet<ByKey> = HashSet::new();
        while let Some(event) = stream.next().await {
            match event? {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                    if let Some(o) = self.transform(o) {
                        objects.replace(ByKey(o));
                    }
                }
                WatchEvent::Deleted(o) => {
                    objects.remove(o.key());
                }
                WatchEvent::Bookmark {
                    resource_version,
                    initial_events_end: true,
                } => {
                    self.fifo
                        .replace(objects.into_iter().map(|b| b.0).collect());
                    self.drain().await;
                    return Ok((resource_version, stream));
                }
                WatchEvent::Bookmark { .. } => {}
            }
        }
        Err(Error::Response(
            "watch ended before the initial-events-end bookmark".into(),
        ))
    }

    async fn paginated_list(&mut self) -> Result<String> {
        let mut objects = Vec::new();
        let mut token = None;
        loop {
            let page = self.lw.list(token.take()).await?;
            objects.extend(page.items.into_iter().filter_map(|o| self.transform(o)));
            match page.continue_token {
                Some(next) => token = Some(next),
                None => {
                    self.fifo.replace(objects);
                    self.drain().await;
                    return Ok(page.resource_version);
                }
            }
        }
    }

    /// Processes everything queued, yielding now and then so a big list does not hog a worker;
    /// then wakes the handlers.
    async fn drain(&self) {
        while self.processing.process_queued(1024) {
            tokio::task::yield_now().await;
        }
        self.processing.flush();
    }

    async fn watch(&mut self, stream: WatchStream, resource_version: &mut String) -> WatchOutcome {
        let outcome = self.watch_events(stream, resource_version).await;
        self.processing.flush();
        outcome
    }

    /// Feeds watch events into the FIFO and processes them at once. Handlers are woken when the
    /// stream has nothing more ready (or every `MAX_UNFLUSHED` events), so a burst costs one
    /// wake-up per handler, and a lone event is delivered without delay.
    async fn watch_events(
        &mut self,
        mut stream: WatchStream,
        resource_version: &mut String,
    ) -> WatchOutcome {
        let mut events = 0;
        let mut unflushed = 0;
        loop {
            let next = match stream.next().now_or_never() {
                Some(next) => next,
                None => {
                    if unflushed > 0 {
                        self.processing.flush();
                        unflushed = 0;
                    }
                    stream.next().await
                }
            };
            let Some(event) = next else { break };
            let event = match event {
                Ok(event) => event,
                Err(err) if err.is_expired() => return WatchOutcome::Expired,
                Err(err) => return WatchOutcome::Failed(err),
            };
            events += 1;
            match event {
                WatchEvent::Added(o) => {
                    set_string(resource_version, o.resource_version());
                    if let Some(o) = self.transform(o) {
                        self.fifo.add(o);
                    }
                }
                WatchEvent::Modified(o) => {
                    set_string(resource_version, o.resource_version());
                    if let Some(o) = self.transform(o) {
                        self.fifo.update(o);
                    }
                }
                WatchEvent::Deleted(o) => {
                    set_string(resource_version, o.resource_version());
                    if let Some(o) = self.transform(o) {
                        self.fifo.delete(o);
                    }
                }
                WatchEvent::Bookmark {
                    resource_version: rv,
                    ..
                } => set_string(resource_version, &rv),
            }
            self.set_last_rv(resource_version);
            while self.processing.process_queued(1024) {
                tokio::task::yield_now().await;
            }
            unflushed += 1;
            if unflushed >= MAX_UNFLUSHED {
                self.processing.flush();
                unflushed = 0;
            }
        }
        WatchOutcome::Ended { events }
    }

    fn transform(&self, object: Object) -> Option<ObjectRef> {
        let transform = self.hooks.transform.read().clone();
        match transform {
            None => Some(Arc::new(object)),
            Some(f) => {
                let key = object.key().to_string();
                match f(object) {
                    Ok(o) => Some(Arc::new(o)),
                    Err(err) => {
                        tracing::error!(key, error = %err, "transform failed; object skipped");
                        None
                    }
                }
            }
        }
    }

    fn set_last_rv(&self, resource_version: &str) {
        let mut last = self.status.last_sync_resource_version.lock();
        match last.as_mut() {
            Some(s) => set_string(s, resource_version),
            None => *last = Some(resource_version.to_string()),
        }
    }

    fn report(&self, err: &Error) {
        self.status.errors.fetch_add(1, Ordering::Relaxed);
        let handler = self.hooks.watch_error_handler.read().clone();
        match handler {
            Some(handler) => handler(err),
            None => tracing::warn!(error = %err, "list/watch failed"),
        }
    }
}

/// Overwrites `target` with `value`, reusing its allocation.
fn set_string(target: &mut String, value: &str) {
    target.clear();
    target.push_str(value);
}

/// Whether `err` says the server does not do streaming lists (as opposed to a passing failure).
fn rejects_streaming(err: &Error) -> bool {
    matches!(err.status_code(), Some(400 | 405 | 415 | 422 | 501))
}
