//! The reflector: list (one LIST at any version, streaming or paginated), then watch from
//! there, into the DeltaFIFO.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backoff::{Backoff, BackoffOptions};
use crate::delta_fifo::DeltaFifo;
use crate::error::{Error, Result};
use crate::health::{Failing, HealthSignal};
use crate::key_hash::KeySet;
use crate::lister_watcher::{ListerWatcher, WatchEvent, WatchStream};
use crate::object::{Object, ObjectRef};
use crate::store::ByKey;

/// Rewrites an object before it is stored (after the managedFields strip, if on). Not applied
/// to tombstones, which come from the cache.
pub type TransformFunc = Arc<dyn Fn(Object) -> Result<Object> + Send + Sync>;

/// Called with every list or watch failure (after which the reflector backs off and retries).
pub type WatchErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// How the reflector lists: at start, and again after 410 Gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListStrategy {
    /// client-go's LIST when its WatchList gate is off: one LIST at `resourceVersion=0` with no
    /// limit, which the API server answers from its watch cache in one response (no etcd read,
    /// no paging), parsed as it arrives. The fastest initial sync for the client and the
    /// cheapest for the server (client-go, 100,000 ConfigMaps: 1.4 s against 2.3 s streaming).
    /// The answer may be a little stale; the watch from its resourceVersion brings the cache up
    /// to date, as client-go relies on. A relist after 410 Gone is a consistent paginated LIST,
    /// as in client-go, so the cache never goes back in time.
    #[default]
    AnyVersion,
    /// A streaming list (a watch with `sendInitialEvents`): consistent, and the server never
    /// holds the whole list; falls back to paginated LISTs when the server rejects it.
    Streaming,
    /// Consistent paginated LISTs (`limit` + `continue`, no resourceVersion): quorum reads
    /// from etcd, the slowest and the most costly for the server.
    Paginated,
}

impl ListStrategy {
    /// The names [`ListStrategy::from_str`](std::str::FromStr) accepts.
    pub const NAMES: [&'static str; 3] = ["any-version", "streaming", "paginated"];
}

impl std::str::FromStr for ListStrategy {
    type Err = String;

    /// `any-version` (resourceVersion=0), `streaming` or `paginated`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "any-version" => Ok(ListStrategy::AnyVersion),
            "streaming" => Ok(ListStrategy::Streaming),
            "paginated" => Ok(ListStrategy::Paginated),
            other => Err(format!(
                "unknown list strategy {other:?}; expected one of {}",
                ListStrategy::NAMES.join(", ")
            )),
        }
    }
}

/// How the reflector lists and retries.
#[derive(Debug, Clone)]
pub struct ReflectorOptions {
    /// How to list (see [`ListStrategy`]).
    pub list: ListStrategy,
    /// Retry spacing after failures.
    pub backoff: BackoffOptions,
    /// A watch that ends sooner than this without delivering anything counts as a failure
    /// (backoff), so a server that closes watches at once is not hammered.
    pub min_healthy_watch: Duration,
    /// Each watch asks the server to end it (`timeoutSeconds`) after a random time in
    /// `[min, 2 * min]`, whole seconds, as client-go does, so load spreads when many clients
    /// reconnect.
    pub min_watch_timeout: Duration,
    /// A watch that sends nothing (no event, no bookmark) for its timeout plus this margin is
    /// presumed dead (half-open TCP, a stopped server, a proxy that stopped forwarding) and
    /// treated as dropped: re-watched from the last resourceVersion. The same limit bounds the
    /// wait for a watch's response headers.
    pub watch_idle_margin: Duration,
    /// Once the server has sent this reflector a periodic bookmark (kube-apiserver sends one
    /// about every minute to a watch that asks for them), a watch that sends nothing for this
    /// long is presumed dead and re-watched, long before its own idle limit. A server that
    /// never sends bookmarks is held to the idle limit only.
    pub bookmark_idle_limit: Duration,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            list: ListStrategy::default(),
            backoff: BackoffOptions::default(),
            min_healthy_watch: Duration::from_secs(1),
            min_watch_timeout: Duration::from_secs(300),
            watch_idle_margin: Duration::from_secs(30),
            bookmark_idle_limit: Duration::from_secs(90),
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
    /// Periodic bookmarks received (not those that end a streaming list's initial events).
    pub(crate) bookmarks: AtomicU64,
    /// The server rejected a streaming list; paginated LISTs are used from then on.
    pub(crate) streaming_unsupported: AtomicBool,
    /// The failure streak since the last successful list or watch, if one is going on.
    pub(crate) failing: Mutex<Option<Failing>>,
    /// Watches and LISTs found dead: silent past their idle limit, or their connection gone
    /// under them (see [`Error::is_dead_connection`]).
    pub(crate) dead_connections: AtomicU64,
    /// Told when a streak starts or ends, or a connection is found dead.
    pub(crate) signal: Option<HealthSignal>,
}

impl ReflectorStatus {
    /// A failure: starts a streak, or adds to the one going on; the signal is raised when a
    /// streak starts or becomes unreachable, and on every dead connection.
    fn fail(&self, err: &Error) {
        let dead = err.is_dead_connection();
        if dead {
            self.dead_connections.fetch_add(1, Ordering::Relaxed);
        }
        let changed = {
            let mut failing = self.failing.lock();
            match failing.as_mut() {
                Some(f) => {
                    let became_unreachable = !f.unreachable && err.is_unreachable();
                    f.unreachable |= err.is_unreachable();
                    f.dead |= dead;
                    f.error = err.to_string();
                    became_unreachable
                }
                None => {
                    *failing = Some(Failing {
                        since: Instant::now(),
                        unreachable: err.is_unreachable(),
                        dead,
                        error: err.to_string(),
                    });
                    true
                }
            }
        };
        if (changed || dead)
            && let Some(signal) = &self.signal
        {
            signal.bump();
        }
    }

    /// A list or watch succeeded: the streak, if any, is over.
    fn succeeded(&self) {
        if self.failing.lock().take().is_some()
            && let Some(signal) = &self.signal
        {
            signal.bump();
        }
    }
}

/// The reflector's position in its loop.
enum State {
    /// No usable resourceVersion: list everything (first start, or after 410 Gone).
    NeedList,
    /// Watch from `resource_version`, on `stream` if a streaming list left one open.
    Watch {
        resource_version: String,
        stream: Option<OpenWatch>,
    },
    /// Wait out a backoff delay, then go on with `then`.
    Wait { delay: Duration, then: Box<State> },
}

/// A watch stream and how long it may stay silent before it is presumed dead.
struct OpenWatch {
    stream: WatchStream,
    idle_limit: Duration,
}

/// How a watch ended.
enum WatchOutcome {
    /// The server closed it (timeout, restart): re-watch from the last version.
    Ended { events: usize },
    /// Nothing arrived within the idle limit, or the bookmark idle limit: dropped, re-watch
    /// from the last version. Holds [`Error::WatchIdle`] or [`Error::BookmarksStopped`].
    Idle(Error),
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
    /// The last watch answered 410 Gone: the next list must be consistent, not "any version".
    expired: bool,
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
            expired: false,
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
                    self.status.succeeded();
                    self.expired = false;
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
                    None => match self.open_watch(resource_version.clone(), false).await {
                        Ok(stream) => {
                            self.status.succeeded();
                            stream
                        }
                        Err(err) => {
                            self.report(&err);
                            if err.is_expired() {
                                self.expired = true;
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
                    WatchOutcome::Idle(err) => {
                        self.report(&err);
                        again
                    }
                    WatchOutcome::Expired => {
                        tracing::info!("resourceVersion expired; relisting");
                        self.expired = true;
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
        self.options.list == ListStrategy::Streaming
            && !self.status.streaming_unsupported.load(Ordering::Relaxed)
    }

    /// Opens a watch with a fresh random server-side timeout; the idle limit is that timeout
    /// plus the margin, and bounds the wait for the response too (as does the bookmark idle
    /// limit, once the server is known to send bookmarks).
    async fn open_watch(
        &self,
        resource_version: String,
        send_initial_events: bool,
    ) -> Result<OpenWatch> {
        let min = self.options.min_watch_timeout.as_secs().max(1);
        let timeout = Duration::from_secs(rand::rng().random_range(min..=2 * min));
        let idle_limit = timeout + self.options.watch_idle_margin;
        let opening = self
            .lw
            .watch(resource_version, send_initial_events, timeout);
        let (limit, silent) = self.silence_limit(idle_limit);
        match tokio::time::timeout(limit, opening).await {
            Ok(stream) => Ok(OpenWatch {
                stream: stream?,
                idle_limit,
            }),
            Err(_) => Err(silent),
        }
    }

    /// How long a watch with `idle_limit` may stay silent, and the error that says so: the
    /// bookmark idle limit when it is shorter and this reflector's server sends bookmarks.
    fn silence_limit(&self, idle_limit: Duration) -> (Duration, Error) {
        let bookmark_limit = self.options.bookmark_idle_limit;
        if bookmark_limit < idle_limit && self.status.bookmarks.load(Ordering::Relaxed) > 0 {
            (bookmark_limit, Error::BookmarksStopped(bookmark_limit))
        } else {
            (idle_limit, Error::WatchIdle(idle_limit))
        }
    }

    /// Lists everything into the FIFO as one `replace`; returns the version to watch from and,
    /// after a streaming list, the watch that is already open.
    async fn list(&mut self) -> Result<(String, Option<OpenWatch>)> {
        if self.use_streaming() {
            let (rv, stream) = self.streaming_list().await?;
            Ok((rv, Some(stream)))
        } else {
            let any_version = self.options.list == ListStrategy::AnyVersion && !self.expired;
            Ok((self.paginated_list(any_version).await?, None))
        }
    }

    async fn streaming_list(&mut self) -> Result<(String, OpenWatch)> {
        let mut watch = self.open_watch(String::new(), true).await?;
        let mut objects: KeySet<ByKey> = KeySet::default();
        loop {
            let Ok(event) = tokio::time::timeout(watch.idle_limit, watch.stream.next()).await
            else {
                return Err(Error::WatchIdle(watch.idle_limit));
            };
            let Some(event) = event else { break };
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
                    return Ok((resource_version, watch));
                }
                WatchEvent::Bookmark { .. } => {
                    self.status.bookmarks.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Err(Error::Response(
            "watch ended before the initial-events-end bookmark".into(),
        ))
    }

    /// A LIST in pages; with `any_version`, the first request is the one-answer LIST at
    /// `resourceVersion=0` (followed by pages only if the server paginated it anyway).
    async fn paginated_list(&mut self, any_version: bool) -> Result<String> {
        let mut objects = Vec::new();
        let mut page = if any_version {
            self.lw.list_any().await?
        } else {
            self.lw.list(None).await?
        };
        loop {
            objects.extend(page.items.into_iter().filter_map(|o| self.transform(o)));
            match page.continue_token {
                Some(next) => page = self.lw.list(Some(next)).await?,
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

    async fn watch(&mut self, watch: OpenWatch, resource_version: &mut String) -> WatchOutcome {
        let outcome = self.watch_events(watch, resource_version).await;
        self.processing.flush();
        outcome
    }

    /// Feeds watch events into the FIFO and processes them at once. Handlers are woken when the
    /// stream has nothing more ready (or every `MAX_UNFLUSHED` events), so a burst costs one
    /// wake-up per handler, and a lone event is delivered without delay. Every event and
    /// bookmark restarts the idle limit.
    async fn watch_events(
        &mut self,
        watch: OpenWatch,
        resource_version: &mut String,
    ) -> WatchOutcome {
        let OpenWatch {
            mut stream,
            idle_limit,
        } = watch;
        let mut events = 0;
        let mut unflushed = 0;
        loop {
            let next = match stream.next().now_or_never() {
                Some(next) => next,
                None => {
                    if unflushed > 0 {
                        self.set_last_rv(resource_version);
                        self.processing.flush();
                        unflushed = 0;
                    }
                    let (limit, silent) = self.silence_limit(idle_limit);
                    match tokio::time::timeout(limit, stream.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            self.set_last_rv(resource_version);
                            return WatchOutcome::Idle(silent);
                        }
                    }
                }
            };
            let Some(event) = next else { break };
            let event = match event {
                Ok(event) => event,
                Err(err) => {
                    self.set_last_rv(resource_version);
                    if err.is_expired() {
                        return WatchOutcome::Expired;
                    }
                    return WatchOutcome::Failed(err);
                }
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
                    initial_events_end,
                } => {
                    if !initial_events_end {
                        self.status.bookmarks.fetch_add(1, Ordering::Relaxed);
                    }
                    set_string(resource_version, &rv);
                }
            }
            while self.processing.process_queued(1024) {
                tokio::task::yield_now().await;
            }
            unflushed += 1;
            if unflushed >= MAX_UNFLUSHED {
                self.set_last_rv(resource_version);
                self.processing.flush();
                unflushed = 0;
            }
        }
        self.set_last_rv(resource_version);
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

    /// Counts a failure and tells the error handler, or logs it with what this reflector
    /// lists and watches.
    fn report(&self, err: &Error) {
        self.status.errors.fetch_add(1, Ordering::Relaxed);
        self.status.fail(err);
        let handler = self.hooks.watch_error_handler.read().clone();
        match handler {
            Some(handler) => handler(err),
            None => {
                let target = self.lw.target();
                tracing::warn!(
                    resource = %target.resource,
                    kind = %target.kind,
                    namespace = %target.namespace,
                    label_selector = %target.label_selector,
                    field_selector = %target.field_selector,
                    error = %err,
                    "list/watch failed"
                )
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lister_watcher::ListPage;
    use crate::store::Store;
    use futures::future::BoxFuture;
    use futures::stream;
    use std::collections::VecDeque;

    /// Answers watches from a script (then watches forever without events) and records each
    /// call's time and resourceVersion.
    struct Scripted {
        watches: Mutex<VecDeque<Result<WatchStream>>>,
        calls: Mutex<Vec<(Instant, String)>>,
        lists: AtomicU64,
        /// Of `lists`, those made at any version (`list_any`).
        any_version_lists: AtomicU64,
    }

    fn obj(name: &str, rv: u64) -> Object {
        Object::from_json(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        ))
        .unwrap()
    }

    fn server_error(code: u16) -> Error {
        Error::Api {
            code,
            reason: "Test".into(),
            message: "scripted".into(),
        }
    }

    impl ListerWatcher for Scripted {
        fn list(&self, _: Option<String>) -> futures::future::BoxFuture<'_, Result<ListPage>> {
            let n = self.lists.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                Ok(ListPage {
                    items: vec![obj("a", 10 + n)],
                    resource_version: (10 + n).to_string(),
                    continue_token: None,
                })
            })
        }
        fn list_any(&self) -> BoxFuture<'_, Result<ListPage>> {
            self.any_version_lists.fetch_add(1, Ordering::Relaxed);
            self.list(None)
        }
        fn watch(&self, rv: String, _: bool, _: Duration) -> BoxFuture<'_, Result<WatchStream>> {
            self.calls.lock().push((Instant::now(), rv));
            let next = self.watches.lock().pop_front();
            Box::pin(async move { next.unwrap_or_else(|| Ok(Box::pin(stream::pending()))) })
        }
    }

    /// A watch that sends `events` at once, then ends.
    fn events(events: Vec<Result<WatchEvent>>) -> Result<WatchStream> {
        Ok(Box::pin(stream::iter(events)))
    }

    /// A watch that sends a bookmark at version 11, 12, ... every `every`, `count` times, then
    /// goes silent without ending.
    fn bookmarks_then_silence(every: Duration, count: u64) -> Result<WatchStream> {
        let marks = stream::iter(0..count).then(move |i| async move {
            tokio::time::sleep(every).await;
            Ok(WatchEvent::Bookmark {
                resource_version: (11 + i).to_string(),
                initial_events_end: false,
            })
        });
        Ok(Box::pin(marks.chain(stream::pending())))
    }

    /// Applies popped deltas straight to the store.
    struct Apply {
        fifo: Arc<DeltaFifo>,
        store: Arc<Store>,
    }

    impl DeltaProcessor for Apply {
        fn process_queued(&self, max: usize) -> bool {
            for _ in 0..max {
                let popped = self.fifo.pop_ready(|deltas, _| {
                    for d in deltas {
                        if d.kind == crate::delta_fifo::DeltaType::Deleted {
                            self.store.delete(d.object.key());
                        } else {
                            self.store.upsert(d.object);
                        }
                    }
                });
                if popped.is_none() {
                    return false;
                }
            }
            true
        }
        fn flush(&self) {}
    }

    fn run(script: Vec<Result<WatchStream>>) -> (Arc<Scripted>, Arc<Store>, CancellationToken) {
        run_listing(ListStrategy::Paginated, script)
    }

    fn run_listing(
        list: ListStrategy,
        script: Vec<Result<WatchStream>>,
    ) -> (Arc<Scripted>, Arc<Store>, CancellationToken) {
        run_with(list, Duration::from_secs(90), script)
    }

    fn run_with(
        list: ListStrategy,
        bookmark_idle_limit: Duration,
        script: Vec<Result<WatchStream>>,
    ) -> (Arc<Scripted>, Arc<Store>, CancellationToken) {
        let status = Arc::new(ReflectorStatus::default());
        run_reporting(list, bookmark_idle_limit, script, status)
    }

    fn run_reporting(
        list: ListStrategy,
        bookmark_idle_limit: Duration,
        script: Vec<Result<WatchStream>>,
        status: Arc<ReflectorStatus>,
    ) -> (Arc<Scripted>, Arc<Store>, CancellationToken) {
        let lw = Arc::new(Scripted {
            watches: Mutex::new(script.into()),
            calls: Mutex::new(Vec::new()),
            lists: AtomicU64::new(0),
            any_version_lists: AtomicU64::new(0),
        });
        let store = Arc::new(Store::new());
        let fifo = Arc::new(DeltaFifo::new(store.clone()));
        let reflector = Reflector::new(
            lw.clone(),
            fifo.clone(),
            Arc::new(Apply {
                fifo,
                store: store.clone(),
            }),
            Arc::new(Hooks::default()),
            status,
            ReflectorOptions {
                list,
                backoff: BackoffOptions {
                    jitter: 0.0,
                    ..BackoffOptions::default()
                },
                min_healthy_watch: Duration::ZERO,
                min_watch_timeout: Duration::from_secs(10),
                watch_idle_margin: Duration::from_secs(5),
                bookmark_idle_limit,
            },
        );
        let cancel = CancellationToken::new();
        tokio::spawn(reflector.run(cancel.clone()));
        (lw, store, cancel)
    }

    async fn wait_for_calls(lw: &Scripted, n: usize) {
        for _ in 0..10_000 {
            if lw.calls.lock().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fewer than {n} watch calls");
    }

    #[tokio::test(start_paused = true)]
    async fn failed_watches_back_off_exponentially_then_resume_from_the_last_version() {
        let (lw, store, cancel) = run(vec![
            Err(server_error(500)),
            Err(server_error(503)),
            events(vec![Ok(WatchEvent::Added(obj("b", 11)))]),
        ]);
        wait_for_calls(&lw, 4).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        let gaps: Vec<u128> = calls
            .windows(2)
            .map(|w| w[1].0.duration_since(w[0].0).as_millis())
            .collect();
        assert_eq!(
            gaps,
            vec![800, 1600, 0],
            "800 ms, then doubled; a clean end re-watches at once"
        );
        let versions: Vec<&str> = calls.iter().map(|(_, rv)| rv.as_str()).collect();
        assert_eq!(versions, vec!["10", "10", "10", "11"]);
        assert_eq!(
            lw.lists.load(Ordering::Relaxed),
            1,
            "errors other than 410 never relist"
        );
        assert!(store.get("ns/b").is_some());
    }

    /// A failure starts a streak (unreachable for a 5xx, or a watch found dead), a watch that
    /// opens ends it, and each change is signalled; a refusal (403) is not "unreachable".
    #[tokio::test(start_paused = true)]
    async fn failure_streaks_are_reported_and_end_when_a_watch_opens() {
        let signal = HealthSignal::default();
        let mut changes = signal.subscribe();
        let status = Arc::new(ReflectorStatus {
            signal: Some(signal),
            ..ReflectorStatus::default()
        });
        let (lw, _store, cancel) = run_reporting(
            ListStrategy::Paginated,
            Duration::from_secs(12),
            vec![
                Err(server_error(403)),
                Err(server_error(503)),
                bookmarks_then_silence(Duration::from_secs(8), 3),
                Err(server_error(403)),
            ],
            status.clone(),
        );
        let snapshot = || {
            let failing = status.failing.lock().clone();
            (
                failing.as_ref().map(|f| f.unreachable),
                status.dead_connections.load(Ordering::Relaxed),
            )
        };
        let mut seen = Vec::new();
        while seen.len() < 4 {
            tokio::time::timeout(Duration::from_secs(120), changes.changed())
                .await
                .expect("a health change")
                .expect("the signal lives");
            seen.push(snapshot());
        }
        assert_eq!(
            seen,
            vec![
                (Some(false), 0),
                (Some(true), 0),
                (None, 0),
                (Some(true), 1),
            ],
            "a 403 starts a streak that a 503 makes unreachable; the bookmark watch ends it; \
             its silence is a dead connection"
        );
        tokio::time::timeout(Duration::from_secs(120), changes.changed())
            .await
            .expect("the streak ends")
            .expect("the signal lives");
        assert_eq!(snapshot(), (None, 1), "the watch after the 403 opened");
        assert_eq!(lw.calls.lock().len(), 5);
        cancel.cancel();
    }

    /// A watch whose connection dies under it (kube's client reports the transport's failure
    /// while the stream is read) counts as a dead connection, and the streak says so until a
    /// watch opens again, through failed attempts to open one.
    #[tokio::test(start_paused = true)]
    async fn a_watch_whose_connection_dies_is_a_dead_connection_until_a_watch_opens() {
        let signal = HealthSignal::default();
        let mut changes = signal.subscribe();
        let status = Arc::new(ReflectorStatus {
            signal: Some(signal),
            ..ReflectorStatus::default()
        });
        let died = Error::ConnectionDied {
            what: "watch stream",
            cause: "stream closed because of a broken pipe".into(),
            source: std::io::Error::other(kube::Error::Service(Box::new(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stream closed because of a broken pipe",
            )))),
        };
        let (lw, _store, cancel) = run_reporting(
            ListStrategy::Paginated,
            Duration::from_secs(90),
            vec![
                events(vec![Err(died)]),
                Err(server_error(503)),
                Err(server_error(503)),
            ],
            status.clone(),
        );
        let snapshot = || {
            let failing = status.failing.lock().clone();
            (
                failing.as_ref().map(|f| (f.unreachable, f.dead)),
                status.dead_connections.load(Ordering::Relaxed),
            )
        };
        tokio::time::timeout(Duration::from_secs(120), changes.changed())
            .await
            .expect("a health change")
            .expect("the signal lives");
        assert_eq!(snapshot(), (Some((true, true)), 1), "dead at once");
        wait_for_calls(&lw, 3).await;
        assert_eq!(
            snapshot(),
            (Some((true, true)), 1),
            "still dead while watches fail to open"
        );
        tokio::time::timeout(Duration::from_secs(120), changes.changed())
            .await
            .expect("the streak ends")
            .expect("the signal lives");
        assert_eq!(snapshot(), (None, 1), "a watch opened");
        assert_eq!(lw.calls.lock().len(), 4);
        cancel.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_version_relists_at_once() {
        let (lw, store, cancel) = run(vec![events(vec![Err(server_error(410))])]);
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        assert_eq!(calls[1].0.duration_since(calls[0].0), Duration::ZERO);
        assert_eq!(calls[1].1, "11", "watches from the relist's version");
        assert_eq!(lw.lists.load(Ordering::Relaxed), 2);
        assert_eq!(store.get("ns/a").unwrap().resource_version(), "11");
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_watch_is_dropped_after_its_timeout_plus_margin_and_resumed() {
        // Bookmarks every 8 s keep the watch alive past its limit (10 to 20 s + 5 s); then it
        // goes silent and is dropped within the limit, re-watched from the last bookmark.
        let (lw, store, cancel) = run(vec![bookmarks_then_silence(Duration::from_secs(8), 5)]);
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        let gap = calls[1].0.duration_since(calls[0].0);
        let silent = gap - Duration::from_secs(40);
        assert!(
            (Duration::from_secs(15)..=Duration::from_secs(25)).contains(&silent),
            "dropped after {silent:?} of silence"
        );
        assert_eq!(calls[1].1, "15", "resumes from the last bookmark");
        assert_eq!(lw.lists.load(Ordering::Relaxed), 1, "no relist");
        assert!(store.get("ns/a").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_whose_bookmarks_stop_is_dropped_at_the_bookmark_idle_limit() {
        // Bookmarks every 8 s, three times, then silence: with a 12 s bookmark idle limit the
        // watch is dropped 12 s after the last one, long before its own limit (15 to 25 s).
        let (lw, _store, cancel) = run_with(
            ListStrategy::Paginated,
            Duration::from_secs(12),
            vec![bookmarks_then_silence(Duration::from_secs(8), 3)],
        );
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        assert_eq!(
            calls[1].0.duration_since(calls[0].0),
            Duration::from_secs(24 + 12)
        );
        assert_eq!(calls[1].1, "13", "resumes from the last bookmark");
        assert_eq!(lw.lists.load(Ordering::Relaxed), 1, "no relist");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_sent_a_bookmark_is_held_to_the_idle_limit_only() {
        // A silent watch from a server that has sent no bookmark (one that does not do them)
        // is not cut at the bookmark idle limit: only at its timeout plus margin.
        let (lw, _store, cancel) = run_with(
            ListStrategy::Paginated,
            Duration::from_secs(2),
            vec![Ok(Box::pin(stream::pending()))],
        );
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        let gap = calls[1].0.duration_since(calls[0].0);
        assert!(
            (Duration::from_secs(15)..=Duration::from_secs(25)).contains(&gap),
            "dropped after {gap:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_list_is_at_any_version_and_a_relist_after_410_is_consistent() {
        let (lw, store, cancel) = run_listing(
            ListStrategy::AnyVersion,
            vec![events(vec![Err(server_error(410))])],
        );
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        assert_eq!(lw.lists.load(Ordering::Relaxed), 2);
        assert_eq!(
            lw.any_version_lists.load(Ordering::Relaxed),
            1,
            "only the first list may be stale; the relist must not go back in time"
        );
        assert_eq!(
            lw.calls.lock()[0].1,
            "10",
            "watches from the list's version"
        );
        assert_eq!(store.get("ns/a").unwrap().resource_version(), "11");
    }

    #[test]
    fn list_strategies_parse_from_their_names() {
        for name in ListStrategy::NAMES {
            assert!(name.parse::<ListStrategy>().is_ok(), "{name}");
        }
        assert_eq!("any-version".parse(), Ok(ListStrategy::AnyVersion));
        assert!(
            "rv0"
                .parse::<ListStrategy>()
                .unwrap_err()
                .contains("any-version")
        );
    }
}
