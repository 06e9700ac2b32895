//! The reflector: list (streaming or paginated), then watch from there, into the DeltaFIFO.

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
use crate::key_hash::KeySet;
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
        let mut objects: KeySet<ByKey> = KeySet::default();
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
                        self.set_last_rv(resource_version);
                        self.processing.flush();
                        unflushed = 0;
                    }
                    stream.next().await
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
                    ..
                } => set_string(resource_version, &rv),
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
        watches: Mutex<VecDeque<Result<Vec<Result<WatchEvent>>>>>,
        calls: Mutex<Vec<(Instant, String)>>,
        lists: AtomicU64,
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
        fn watch(&self, rv: String, _: bool) -> BoxFuture<'_, Result<WatchStream>> {
            self.calls.lock().push((Instant::now(), rv));
            let next = self.watches.lock().pop_front();
            Box::pin(async move {
                let stream: WatchStream = match next {
                    Some(Err(err)) => return Err(err),
                    Some(Ok(events)) => Box::pin(stream::iter(events)),
                    None => Box::pin(stream::pending()),
                };
                Ok(stream)
            })
        }
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

    fn run(
        script: Vec<Result<Vec<Result<WatchEvent>>>>,
    ) -> (Arc<Scripted>, Arc<Store>, CancellationToken) {
        let lw = Arc::new(Scripted {
            watches: Mutex::new(script.into()),
            calls: Mutex::new(Vec::new()),
            lists: AtomicU64::new(0),
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
            Arc::new(ReflectorStatus::default()),
            ReflectorOptions {
                streaming_list: false,
                backoff: BackoffOptions {
                    jitter: 0.0,
                    ..BackoffOptions::default()
                },
                min_healthy_watch: Duration::ZERO,
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
            Ok(vec![Ok(WatchEvent::Added(obj("b", 11)))]),
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

    #[tokio::test(start_paused = true)]
    async fn an_expired_version_relists_at_once() {
        let (lw, store, cancel) = run(vec![Ok(vec![Err(server_error(410))])]);
        wait_for_calls(&lw, 2).await;
        cancel.cancel();
        let calls = lw.calls.lock().clone();
        assert_eq!(calls[1].0.duration_since(calls[0].0), Duration::ZERO);
        assert_eq!(calls[1].1, "11", "watches from the relist's version");
        assert_eq!(lw.lists.load(Ordering::Relaxed), 2);
        assert_eq!(store.get("ns/a").unwrap().resource_version(), "11");
    }
}
