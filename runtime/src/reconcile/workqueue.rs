//! The workqueue that drives a plugin's `reconcile`: client-go's rate-limited workqueue, owned
//! by the host so that it outlives the plugin's instances (reloads and fault restarts).
//!
//! Guarantees (client-go's `util/workqueue`):
//! - a key added many times before a worker takes it is handed out once (dedupe);
//! - a key is never held by two workers at once, however many call [`WorkQueue::get`];
//! - a key added while a worker holds it is handed out again after that worker is done;
//! - ready keys are handed out in the order they were first added;
//! - a failed key is retried after a per-key exponential backoff (5 ms doubling, capped at
//!   1000 s by default) and no sooner than an overall token bucket allows (10 retries a second,
//!   burst 100); both are [`QueueOptions`].
//!
//! What a guest asks of the queue is bounded ([`WorkQueue::try_add`],
//! [`WorkQueue::try_add_after`]): the keys the queue holds (ready or waiting) are capped at
//! [`QueueOptions::max_keys`], and a delay at [`QueueOptions::max_add_after`]; past either the
//! add is refused (a [`QueueRefusal`]), counted, and the queue is unchanged. Adds the host makes
//! from the informers ([`WorkQueue::add`]) are not capped: the cache bounds them.
//!
//! A key a worker cannot work here now (its shard is led by another replica) is parked
//! ([`Completion::Park`]): it stays in the queue, counted in its depth, is not handed out until
//! [`WorkQueue::unpark`] releases it (leadership came), and is freed with the queue on
//! [`WorkQueue::shut_down`] (the plugin is unloaded).
//!
//! A worker's hold on a key is a [`Processing`] guard: [`Processing::complete`] says how the work
//! ended; dropping the guard without completing it (the instance faulted, the plugin is being
//! replaced) puts the key back, so no work is lost.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::reconcile::rate_limit::TokenBucket;

/// How a queue retries failed keys.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueOptions {
    /// Delay before the first retry of a failing key; it doubles with each further failure
    /// until the key is forgotten (client-go: 5 ms).
    pub base_delay: Duration,
    /// The most a key's retry delay grows to (client-go: 1000 s).
    pub max_delay: Duration,
    /// Retries per second the whole queue allows, whatever the keys (client-go: 10).
    pub retry_qps: f64,
    /// Retries allowed at once above that rate (client-go: 100).
    pub retry_burst: u32,
    /// Up to this fraction of a retry's backoff is added at random (0.1: up to 10 % more), so
    /// that keys failing together (a server that was down) are not retried in lockstep.
    /// client-go adds none; 0 turns it off.
    pub retry_jitter: f64,
    /// The most keys the queue holds (ready or waiting for a delay) before a guest's adds of
    /// new keys are refused as [`QueueRefusal::Full`].
    pub max_keys: usize,
    /// The longest key (namespace and name, in bytes) a guest may queue
    /// ([`QueueRefusal::KeyTooLong`]); checked where the guest's key enters the host.
    pub max_key_bytes: usize,
    /// The longest delay a guest's `add-after` may ask for ([`QueueRefusal::DelayTooLong`]); a
    /// longer `requeue-after` is shortened to it.
    pub max_add_after: Duration,
}

/// Why a guest's add was refused (the queue is unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueRefusal {
    /// The queue holds [`QueueOptions::max_keys`] keys already.
    Full,
    /// The key is longer than [`QueueOptions::max_key_bytes`].
    KeyTooLong,
    /// The delay is longer than [`QueueOptions::max_add_after`].
    DelayTooLong,
    /// The key's namespace is not a DNS-1123 label, or its name not a name of its resource
    /// (the API server's rules, as for the writes).
    InvalidKey,
}

impl QueueRefusal {
    /// Every refusal, for making metric series up front.
    pub const ALL: [QueueRefusal; 4] = [
        QueueRefusal::Full,
        QueueRefusal::KeyTooLong,
        QueueRefusal::DelayTooLong,
        QueueRefusal::InvalidKey,
    ];

    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueRefusal::Full => "full",
            QueueRefusal::KeyTooLong => "key-too-long",
            QueueRefusal::DelayTooLong => "delay-too-long",
            QueueRefusal::InvalidKey => "invalid-key",
        }
    }
}

/// How one reconcile of a key from the queue ended (the `result` of
/// `kubewasm_plugin_reconcile_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconcileResult {
    /// Done: nothing until the key is queued again.
    Ok,
    /// Done, and asked to run again after a delay.
    Requeue,
    /// The guest returned an error: retried after the key's backoff.
    Error,
    /// The guest returned an error after the host refused one of its writes (not granted, not
    /// the leader, rate-limited, invalid): retried after the key's backoff.
    Refused,
    /// The instance trapped, ran past its deadline or its memory: a fresh one takes over.
    Fault,
}

impl ReconcileResult {
    /// Every result, for making metric series up front.
    pub const ALL: [ReconcileResult; 5] = [
        ReconcileResult::Ok,
        ReconcileResult::Requeue,
        ReconcileResult::Error,
        ReconcileResult::Refused,
        ReconcileResult::Fault,
    ];

    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Ok => "ok",
            ReconcileResult::Requeue => "requeue",
            ReconcileResult::Error => "error",
            ReconcileResult::Refused => "refused",
            ReconcileResult::Fault => "fault",
        }
    }
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            retry_qps: 10.0,
            retry_burst: 100,
            retry_jitter: 0.1,
            max_keys: 100_000,
            max_key_bytes: 512,
            max_add_after: Duration::from_secs(24 * 3600),
        }
    }
}

impl QueueOptions {
    /// Checks the values make sense; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.base_delay.is_zero() || self.base_delay > self.max_delay {
            return Err(format!(
                "the base retry delay ({:?}) must be positive and at most the maximum ({:?})",
                self.base_delay, self.max_delay
            ));
        }
        if !(self.retry_qps.is_finite() && self.retry_qps > 0.0) {
            return Err(format!(
                "retries per second must be positive, got {}",
                self.retry_qps
            ));
        }
        if self.retry_burst == 0 {
            return Err("the retry burst must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.retry_jitter) {
            return Err(format!(
                "the retry jitter must be between 0 and 1, got {}",
                self.retry_jitter
            ));
        }
        if self.max_keys == 0 || self.max_key_bytes == 0 || self.max_add_after.is_zero() {
            return Err(
                "the queue's key cap, key length cap and longest delay must be positive".into(),
            );
        }
        Ok(())
    }

    /// The per-key backoff after `failures` earlier failures.
    fn backoff(&self, failures: u32) -> Duration {
        let factor = 2u32.checked_pow(failures).unwrap_or(u32::MAX);
        self.base_delay
            .checked_mul(factor)
            .map_or(self.max_delay, |d| d.min(self.max_delay))
    }

    /// `backoff` with up to [`retry_jitter`](Self::retry_jitter) of it added, `draw` in 0..=1
    /// choosing how much.
    fn jittered(&self, backoff: Duration, draw: f64) -> Duration {
        backoff + backoff.mul_f64(self.retry_jitter * draw.clamp(0.0, 1.0))
    }
}

/// Measurements pushed as they happen, named as client-go's workqueue metrics. Calls are made
/// under the queue's lock: implementations must be cheap and must not block. The gauges that
/// are read rather than pushed (unfinished work, longest running) are in [`QueueStats`].
pub trait QueueMetrics: Send + Sync {
    /// A key was added that was not already waiting to be handed out (`adds_total`).
    fn add(&self) {}
    /// Keys waiting to be handed out: ready, or parked until this replica leads their shard
    /// (`depth`).
    fn depth(&self, _depth: usize) {}
    /// How long a key was ready before a worker took it (`queue_duration_seconds`).
    fn queue_latency(&self, _waited: Duration) {}
    /// How long a worker held a key (`work_duration_seconds`).
    fn work_duration(&self, _worked: Duration) {}
    /// A failed key was scheduled for a retry with backoff (`retries_total`).
    fn retry(&self) {}
    /// A guest's add was refused, for `reason`.
    fn refused(&self, _reason: QueueRefusal) {}
    /// A reconcile of a key from this queue returned an error.
    fn reconcile_error(&self) {}
    /// A reconcile of a key from this queue ended with `result` after `took`.
    fn reconciled(&self, _result: ReconcileResult, _took: Duration) {}
}

/// Metrics that go nowhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoQueueMetrics;

impl QueueMetrics for NoQueueMetrics {}

/// The queue's state at one moment, for gauges and `/plugins`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueStats {
    /// Keys waiting to be handed out: ready ones, and the [`parked`](Self::parked) ones.
    pub depth: usize,
    /// Keys of shards another replica leads, held until this one does (part of `depth`).
    pub parked: usize,
    /// Keys waiting for a delay (requeue-after or retry backoff) to pass.
    pub waiting: usize,
    /// Keys held by workers.
    pub processing: usize,
    /// How long the ready key added first has been waiting.
    pub oldest_ready: Option<Duration>,
    /// The sum of how long each held key has been held (`unfinished_work_seconds`).
    pub unfinished_work: Duration,
    /// How long the key held longest has been held (`longest_running_processor_seconds`).
    pub longest_running: Duration,
}

/// How a worker's hold on a key ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The work succeeded: the key's backoff is forgotten.
    Done,
    /// The work succeeded and asks to run again after this long, even if nothing changes
    /// (kube-runtime's `Action::requeue`); the key's backoff is forgotten.
    RequeueAfter(Duration),
    /// The work failed: the key is retried after its backoff.
    Retry,
    /// The key cannot be worked here now (another replica leads its shard): it is held,
    /// counted in the depth and not handed out, until [`WorkQueue::unpark`] releases it. Adds
    /// of it meanwhile change nothing; its backoff is kept.
    Park,
}

/// A per-plugin workqueue of keys. Cheap to clone: clones share the queue.
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<K> {
    options: QueueOptions,
    metrics: Arc<dyn QueueMetrics>,
    state: Mutex<State<K>>,
    /// Wakes workers blocked in `get`: one per ready key, all on shutdown or a new timer.
    wake: Notify,
}

/// The queue's maps and sets hash with foldhash, as the informer's do: std's SipHash of a key's
/// four strings showed in the profile of a no-op reconcile. Each map draws its own seed, so
/// keys chosen to collide cannot be precomputed.
type KeyMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type KeySet<K> = HashSet<K, foldhash::fast::RandomState>;

struct State<K> {
    /// Ready keys, in order. A key is here iff it is in `dirty` and not in `processing`.
    queue: VecDeque<K>,
    /// Keys that need work, with when each was added: the ready ones, and the held ones that
    /// were added again while held.
    dirty: KeyMap<K, Instant>,
    /// Keys held by workers, with when each was taken.
    processing: KeyMap<K, Instant>,
    /// Delayed keys by when they become ready (and a sequence number to keep entries apart).
    /// `timers` and `ready_at` always hold the same keys.
    timers: BTreeMap<(Instant, u64), K>,
    ready_at: KeyMap<K, (Instant, u64)>,
    next_timer_id: u64,
    /// Failures of each key since it was last forgotten.
    failures: KeyMap<K, u32>,
    /// Keys parked until this replica leads their shard; never in `queue`, `dirty` or
    /// `processing` at the same time.
    parked: KeySet<K>,
    retries: TokenBucket,
    shutting_down: bool,
}

impl<K> WorkQueue<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// An empty queue. `options` should have passed [`QueueOptions::validate`].
    pub fn new(options: QueueOptions, metrics: Arc<dyn QueueMetrics>) -> Self {
        let retries = TokenBucket::new(options.retry_qps, options.retry_burst);
        WorkQueue {
            inner: Arc::new(Inner {
                options,
                metrics,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    dirty: KeyMap::default(),
                    processing: KeyMap::default(),
                    timers: BTreeMap::new(),
                    ready_at: KeyMap::default(),
                    next_timer_id: 0,
                    failures: KeyMap::default(),
                    parked: KeySet::default(),
                    retries,
                    shutting_down: false,
                }),
                wake: Notify::new(),
            }),
        }
    }

    /// Queues `key` now (a no-op if it is already waiting to be handed out, or after
    /// shutdown).
    pub fn add(&self, key: K) {
        let mut state = self.inner.state.lock();
        self.insert(&mut state, key, Instant::now());
    }

    /// Queues `key` once `delay` has passed. If the key is already waiting for a delay, the
    /// sooner of the two times is kept.
    pub fn add_after(&self, key: K, delay: Duration) {
        let mut state = self.inner.state.lock();
        self.insert_after(&mut state, key, delay);
    }

    /// [`WorkQueue::add`] for a key a guest asked for: refused (and counted) if it would be a
    /// new key past [`QueueOptions::max_keys`].
    pub fn try_add(&self, key: K) -> Result<(), QueueRefusal> {
        let mut state = self.inner.state.lock();
        if !state.dirty.contains_key(&key) && !state.parked.contains(&key) {
            self.check_room(&state)?;
        }
        self.insert(&mut state, key, Instant::now());
        Ok(())
    }

    /// [`WorkQueue::add_after`] for a key a guest asked for: refused (and counted) past
    /// [`QueueOptions::max_add_after`], or if it would be a new key past
    /// [`QueueOptions::max_keys`].
    pub fn try_add_after(&self, key: K, delay: Duration) -> Result<(), QueueRefusal> {
        if delay > self.inner.options.max_add_after {
            self.inner.metrics.refused(QueueRefusal::DelayTooLong);
            return Err(QueueRefusal::DelayTooLong);
        }
        let mut state = self.inner.state.lock();
        if !state.dirty.contains_key(&key)
            && !state.ready_at.contains_key(&key)
            && !state.parked.contains(&key)
        {
            self.check_room(&state)?;
        }
        self.insert_after(&mut state, key, delay);
        Ok(())
    }

    /// Refuses a new key when the queue holds its cap of keys, ready or waiting.
    fn check_room(&self, state: &State<K>) -> Result<(), QueueRefusal> {
        if state.dirty.len() + state.ready_at.len() + state.parked.len()
            >= self.inner.options.max_keys
        {
            self.inner.metrics.refused(QueueRefusal::Full);
            return Err(QueueRefusal::Full);
        }
        Ok(())
    }

    /// The options the queue was made with.
    pub fn options(&self) -> &QueueOptions {
        &self.inner.options
    }

    /// Counts a guest's add refused before it reached the queue (its key was too long).
    pub fn count_refusal(&self, reason: QueueRefusal) {
        self.inner.metrics.refused(reason);
    }

    /// Reports a failed reconcile of one of this queue's keys to the queue's metrics.
    pub fn reconcile_failed(&self) {
        self.inner.metrics.reconcile_error();
    }

    /// Reports how a reconcile of one of this queue's keys ended, and how long it took.
    pub fn reconciled(&self, result: ReconcileResult, took: Duration) {
        self.inner.metrics.reconciled(result, took);
    }

    /// Queues a failed `key` after its backoff: the longer of its own exponential delay and
    /// the overall token bucket's wait.
    pub fn add_rate_limited(&self, key: K) {
        let mut state = self.inner.state.lock();
        self.retry(&mut state, key);
    }

    /// Forgets `key`'s failures: its next retry starts again from the base delay.
    pub fn forget(&self, key: &K) {
        self.inner.state.lock().failures.remove(key);
    }

    /// How many times `key` has failed since it was last forgotten.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.inner
            .state
            .lock()
            .failures
            .get(key)
            .copied()
            .unwrap_or(0)
    }

    /// Waits for a ready key and holds it for the caller until the returned guard is completed
    /// or dropped. Answers `None` once the queue is shut down and no ready key is left.
    pub async fn get(&self) -> Option<Processing<K>> {
        loop {
            let woken = self.inner.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let next_timer = {
                let mut state = self.inner.state.lock();
                let now = Instant::now();
                self.promote_due(&mut state, now);
                if let Some(key) = state.queue.pop_front() {
                    if let Some(added) = state.dirty.remove(&key) {
                        self.inner.metrics.queue_latency(now - added);
                    }
                    state.processing.insert(key.clone(), now);
                    self.report_depth(&state);
                    if !state.queue.is_empty() {
                        self.inner.wake.notify_one();
                    }
                    return Some(Processing {
                        queue: self.clone(),
                        key: Some(key),
                    });
                }
                if state.shutting_down {
                    return None;
                }
                state.timers.keys().next().map(|(at, _)| *at)
            };
            match next_timer {
                Some(at) => {
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => woken.await,
            }
        }
    }

    /// Stops the queue: later adds are ignored, delayed and parked keys are dropped, and
    /// [`WorkQueue::get`] hands out the keys already ready, then answers `None` to every caller.
    pub fn shut_down(&self) {
        let mut state = self.inner.state.lock();
        state.shutting_down = true;
        state.timers.clear();
        state.ready_at.clear();
        state.parked = KeySet::default();
        self.report_depth(&state);
        self.inner.wake.notify_waiters();
    }

    /// Makes the parked keys for which `release` answers true ready (this replica now leads
    /// their shard); answers how many.
    pub fn unpark(&self, mut release: impl FnMut(&K) -> bool) -> usize {
        let mut state = self.inner.state.lock();
        if state.parked.is_empty() {
            return 0;
        }
        let released: Vec<K> = state
            .parked
            .iter()
            .filter(|k| release(k))
            .cloned()
            .collect();
        let now = Instant::now();
        for key in &released {
            state.parked.remove(key);
            self.insert(&mut state, key.clone(), now);
        }
        released.len()
    }

    /// Reports the keys waiting to be handed out, parked ones included.
    fn report_depth(&self, state: &State<K>) {
        self.inner
            .metrics
            .depth(state.queue.len() + state.parked.len());
    }

    /// Whether [`WorkQueue::shut_down`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.state.lock().shutting_down
    }

    /// The queue's state now. Delayed keys whose time has come count as ready.
    pub fn stats(&self) -> QueueStats {
        let mut state = self.inner.state.lock();
        let now = Instant::now();
        self.promote_due(&mut state, now);
        let held = state.processing.values().map(|taken| now - *taken);
        let (unfinished_work, longest_running) = held
            .fold((Duration::ZERO, Duration::ZERO), |(sum, longest), held| {
                (sum + held, longest.max(held))
            });
        QueueStats {
            depth: state.queue.len() + state.parked.len(),
            parked: state.parked.len(),
            waiting: state.timers.len(),
            processing: state.processing.len(),
            oldest_ready: state
                .queue
                .iter()
                .filter_map(|key| state.dirty.get(key))
                .min()
                .map(|added| now - *added),
            unfinished_work,
            longest_running,
        }
    }

    fn insert(&self, state: &mut State<K>, key: K, now: Instant) {
        if state.shutting_down || state.dirty.contains_key(&key) || state.parked.contains(&key) {
            return;
        }
        self.inner.metrics.add();
        let held = state.processing.contains_key(&key);
        state.dirty.insert(key.clone(), now);
        if !held {
            state.queue.push_back(key);
            self.report_depth(state);
            self.inner.wake.notify_one();
        }
    }

    fn insert_after(&self, state: &mut State<K>, key: K, delay: Duration) {
        if state.shutting_down {
            return;
        }
        let now = Instant::now();
        if delay.is_zero() {
            self.insert(state, key, now);
            return;
        }
        let at = now + delay;
        if let Some(&(current, id)) = state.ready_at.get(&key) {
            if current <= at {
                return;
            }
            state.timers.remove(&(current, id));
        }
        let id = state.next_timer_id;
        state.next_timer_id += 1;
        state.timers.insert((at, id), key.clone());
        state.ready_at.insert(key, (at, id));
        // Sleeping workers must look again at when the next timer is due.
        self.inner.wake.notify_waiters();
    }

    fn retry(&self, state: &mut State<K>, key: K) {
        let failures = state.failures.entry(key.clone()).or_insert(0);
        let options = &self.inner.options;
        let backoff = options.backoff(*failures);
        let backoff = if options.retry_jitter > 0.0 {
            options.jittered(backoff, rand::random::<f64>())
        } else {
            backoff
        };
        *failures = failures.saturating_add(1);
        let bucket = state.retries.reserve(Instant::now());
        self.inner.metrics.retry();
        self.insert_after(state, key, backoff.max(bucket));
    }

    /// Moves the delayed keys whose time has come into the queue.
    fn promote_due(&self, state: &mut State<K>, now: Instant) {
        while let Some(entry) = state.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            state.ready_at.remove(&key);
            self.insert(state, key, now);
        }
    }

    /// Ends a worker's hold on `key`; `then` runs first, under the same lock (so the key
    /// cannot be handed out in between).
    fn release(&self, key: K, then: impl FnOnce(&Self, &mut State<K>, &K)) {
        let mut state = self.inner.state.lock();
        then(self, &mut state, &key);
        if let Some(taken) = state.processing.remove(&key) {
            self.inner.metrics.work_duration(Instant::now() - taken);
        }
        if state.dirty.contains_key(&key) {
            state.queue.push_back(key);
            self.report_depth(&state);
            self.inner.wake.notify_one();
        }
    }
}

/// A worker's hold on one key. While it lives, no other worker gets the key; adds of the key
/// are remembered and handed out once the hold ends.
#[must_use = "dropping the guard without completing it puts the key back"]
pub struct Processing<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    queue: WorkQueue<K>,
    /// `None` once completed.
    key: Option<K>,
}

impl<K> Processing<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// The key held.
    pub fn key(&self) -> &K {
        match &self.key {
            Some(key) => key,
            None => unreachable!("the key is only taken by complete(self) and drop"),
        }
    }

    /// Ends the hold: forgets the key's backoff and requeues it after a delay, or schedules a
    /// retry after its backoff.
    pub fn complete(mut self, completion: Completion) {
        let Some(key) = self.key.take() else { return };
        self.queue
            .release(key, |queue, state, key| match completion {
                Completion::Done => {
                    state.failures.remove(key);
                }
                Completion::RequeueAfter(delay) => {
                    state.failures.remove(key);
                    let delay = delay.min(queue.inner.options.max_add_after);
                    queue.insert_after(state, key.clone(), delay);
                }
                Completion::Retry => queue.retry(state, key.clone()),
                Completion::Park => {
                    // An add while held is covered: the parked key is worked once released.
                    state.dirty.remove(key);
                    if !state.shutting_down {
                        state.parked.insert(key.clone());
                    }
                    queue.report_depth(state);
                }
            });
    }
}

impl<K> Drop for Processing<K>
where
    K: Clone + Eq + Hash + Send + Sync + 'static,
{
    /// The work did not finish (the worker faulted or was stopped): the key is queued again.
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.queue.release(key, |queue, state, key| {
                queue.insert(state, key.clone(), Instant::now());
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Default options without jitter: retry times are exact.
    fn exact() -> QueueOptions {
        QueueOptions {
            retry_jitter: 0.0,
            ..QueueOptions::default()
        }
    }

    fn queue() -> WorkQueue<&'static str> {
        WorkQueue::new(exact(), Arc::new(NoQueueMetrics))
    }

    /// The next key, or `None` if none becomes ready within `within` (of paused time).
    async fn next(
        q: &WorkQueue<&'static str>,
        within: Duration,
    ) -> Option<Processing<&'static str>> {
        tokio::time::timeout(within, q.get()).await.ok().flatten()
    }

    const SOON: Duration = Duration::from_millis(1);

    #[tokio::test(start_paused = true)]
    async fn a_key_added_many_times_is_handed_out_once() {
        let q = queue();
        for _ in 0..3 {
            q.add("a");
        }
        q.add("b");
        let a = next(&q, SOON).await.unwrap();
        assert_eq!(*a.key(), "a");
        a.complete(Completion::Done);
        let b = next(&q, SOON).await.unwrap();
        assert_eq!(*b.key(), "b");
        b.complete(Completion::Done);
        assert!(next(&q, Duration::from_secs(3600)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn ready_keys_come_out_in_the_order_first_added() {
        let q = queue();
        for key in ["c", "a", "b", "a", "c"] {
            q.add(key);
        }
        let mut order = Vec::new();
        while let Some(item) = next(&q, SOON).await {
            order.push(*item.key());
            item.complete(Completion::Done);
        }
        assert_eq!(order, ["c", "a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_held_key_is_not_handed_out_again_until_done_and_then_once() {
        let q = queue();
        q.add("a");
        let held = next(&q, SOON).await.unwrap();
        for _ in 0..5 {
            q.add("a");
        }
        assert_eq!(q.stats().depth, 0, "the key waits for its holder");
        assert!(next(&q, Duration::from_secs(60)).await.is_none());
        held.complete(Completion::Done);
        let again = next(&q, SOON)
            .await
            .expect("added while held: handed out again");
        assert_eq!(*again.key(), "a");
        again.complete(Completion::Done);
        assert!(next(&q, Duration::from_secs(60)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_not_added_while_held_is_not_handed_out_again() {
        let q = queue();
        q.add("a");
        next(&q, SOON).await.unwrap().complete(Completion::Done);
        assert!(next(&q, Duration::from_secs(60)).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn failures_back_off_exponentially_from_the_base_delay() {
        let q = queue();
        q.add("a");
        let mut item = next(&q, SOON).await.unwrap();
        let mut delays = Vec::new();
        for _ in 0..5 {
            let failed_at = Instant::now();
            item.complete(Completion::Retry);
            item = next(&q, Duration::from_secs(60)).await.unwrap();
            delays.push(failed_at.elapsed());
        }
        let ms = Duration::from_millis;
        assert_eq!(delays, [ms(5), ms(10), ms(20), ms(40), ms(80)]);
        assert_eq!(q.num_requeues(&"a"), 5);
        item.complete(Completion::Done);
        assert_eq!(q.num_requeues(&"a"), 0, "success forgets the failures");
    }

    #[tokio::test(start_paused = true)]
    async fn the_backoff_is_capped() {
        let options = QueueOptions {
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(4),
            ..exact()
        };
        let q = WorkQueue::new(options.clone(), Arc::new(NoQueueMetrics));
        q.add("a");
        let mut item = next(&q, SOON).await.unwrap();
        let mut delays = Vec::new();
        for _ in 0..5 {
            let failed_at = Instant::now();
            item.complete(Completion::Retry);
            item = next(&q, Duration::from_secs(60)).await.unwrap();
            delays.push(failed_at.elapsed().as_secs());
        }
        assert_eq!(delays, [1, 2, 4, 4, 4]);
        // client-go's defaults reach their 1000 s cap after 18 failures and never overflow.
        let defaults = QueueOptions::default();
        assert_eq!(defaults.backoff(17), Duration::from_millis(655_360));
        assert_eq!(defaults.backoff(18), Duration::from_secs(1000));
        assert_eq!(defaults.backoff(u32::MAX), Duration::from_secs(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn forget_restarts_the_backoff_from_the_base_delay() {
        let q = queue();
        for _ in 0..4 {
            q.add_rate_limited("a");
        }
        assert_eq!(q.num_requeues(&"a"), 4);
        q.forget(&"a");
        assert_eq!(q.num_requeues(&"a"), 0);
        let q = queue();
        q.add("a");
        let item = next(&q, SOON).await.unwrap();
        item.complete(Completion::Retry);
        let item = next(&q, Duration::from_secs(1)).await.unwrap();
        item.complete(Completion::RequeueAfter(Duration::from_secs(2)));
        let item = next(&q, Duration::from_secs(3)).await.unwrap();
        let failed_at = Instant::now();
        item.complete(Completion::Retry);
        let _item = next(&q, Duration::from_secs(1)).await.unwrap();
        assert_eq!(failed_at.elapsed(), Duration::from_millis(5));
    }

    #[tokio::test(start_paused = true)]
    async fn the_token_bucket_limits_retries_across_keys() {
        let options = QueueOptions {
            retry_qps: 10.0,
            retry_burst: 2,
            ..exact()
        };
        let q = WorkQueue::new(options, Arc::new(NoQueueMetrics));
        let start = Instant::now();
        for key in ["a", "b", "c", "d"] {
            q.add_rate_limited(key);
        }
        let mut ready = Vec::new();
        while let Some(item) = next(&q, Duration::from_secs(1)).await {
            ready.push((*item.key(), start.elapsed().as_millis()));
            item.complete(Completion::Done);
        }
        // The first two within the burst wait only their own 5 ms; then one per 100 ms.
        assert_eq!(ready, [("a", 5), ("b", 5), ("c", 100), ("d", 200)]);
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_makes_a_key_ready_after_the_delay_and_the_sooner_time_wins() {
        let q = queue();
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(3));
        q.add_after("a", Duration::from_secs(20));
        assert_eq!(q.stats().waiting, 1);
        let item = next(&q, Duration::from_secs(60)).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        item.complete(Completion::Done);
        assert!(
            next(&q, Duration::from_secs(60)).await.is_none(),
            "once only"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_delay_adds_at_once() {
        let q = queue();
        q.add_after("a", Duration::ZERO);
        assert_eq!(q.stats().depth, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_key_wakes_a_worker_already_waiting() {
        let q = queue();
        let worker = tokio::spawn({
            let q = q.clone();
            async move {
                let item = q.get().await.unwrap();
                (*item.key(), Instant::now())
            }
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        q.add_after("a", Duration::from_secs(7));
        let (key, at) = worker.await.unwrap();
        assert_eq!((key, at - start), ("a", Duration::from_secs(7)));
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_runs_the_key_again_after_the_delay() {
        let q = queue();
        q.add("a");
        let item = next(&q, SOON).await.unwrap();
        let done_at = Instant::now();
        item.complete(Completion::RequeueAfter(Duration::from_secs(30)));
        assert!(next(&q, Duration::from_secs(29)).await.is_none());
        let item = next(&q, Duration::from_secs(2)).await.unwrap();
        assert_eq!(done_at.elapsed(), Duration::from_secs(30));
        assert_eq!(*item.key(), "a");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_an_unfinished_hold_puts_the_key_back() {
        let q = queue();
        q.add("a");
        drop(next(&q, SOON).await.unwrap());
        let item = next(&q, SOON).await.expect("the key is ready again");
        assert_eq!(*item.key(), "a");
        assert_eq!(q.num_requeues(&"a"), 0, "not counted as a failure");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_hands_out_the_ready_keys_then_ends_every_worker() {
        let q = queue();
        q.add("b");
        q.add_after("c", Duration::from_secs(1));
        q.shut_down();
        q.add("d");
        q.add_after("e", Duration::ZERO);
        let mut after = Vec::new();
        while let Some(item) = q.get().await {
            after.push(*item.key());
            item.complete(Completion::Done);
        }
        assert_eq!(
            after,
            ["b"],
            "ready keys only; delayed and later adds are dropped"
        );
        assert!(q.is_shutting_down());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_a_blocked_worker() {
        let q = queue();
        let worker = tokio::spawn({
            let q = q.clone();
            async move { q.get().await.is_none() }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert!(worker.await.unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn workers_never_hold_the_same_key_at_once_and_every_add_is_worked_after() {
        let q = queue();
        let in_flight = Arc::new(Mutex::new(HashSet::new()));
        let last_add = Arc::new(Mutex::new(HashMap::<&'static str, Instant>::new()));
        let last_start = Arc::new(Mutex::new(HashMap::<&'static str, Instant>::new()));
        let overlaps = Arc::new(AtomicUsize::new(0));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (q, in_flight, last_start, overlaps) = (
                q.clone(),
                in_flight.clone(),
                last_start.clone(),
                overlaps.clone(),
            );
            workers.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    let key = *item.key();
                    if !in_flight.lock().insert(key) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    last_start.lock().insert(key, Instant::now());
                    tokio::time::sleep(Duration::from_millis(7)).await;
                    in_flight.lock().remove(key);
                    item.complete(Completion::Done);
                }
            }));
        }
        let keys = ["a", "b", "c"];
        for round in 0..200u64 {
            let key = keys[(round % 3) as usize];
            last_add.lock().insert(key, Instant::now());
            q.add(key);
            tokio::time::sleep(Duration::from_millis(round % 5)).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.shut_down();
        for worker in workers {
            worker.await.unwrap();
        }
        assert_eq!(overlaps.load(Ordering::Relaxed), 0);
        for key in keys {
            let added = last_add.lock()[key];
            let started = last_start.lock()[key];
            assert!(started >= added, "{key} was not worked after its last add");
        }
    }

    #[derive(Default)]
    struct Recorded {
        adds: AtomicUsize,
        retries: AtomicUsize,
        depth: AtomicUsize,
        latencies: Mutex<Vec<Duration>>,
        durations: Mutex<Vec<Duration>>,
    }

    impl QueueMetrics for Recorded {
        fn add(&self) {
            self.adds.fetch_add(1, Ordering::Relaxed);
        }
        fn depth(&self, depth: usize) {
            self.depth.store(depth, Ordering::Relaxed);
        }
        fn queue_latency(&self, waited: Duration) {
            self.latencies.lock().push(waited);
        }
        fn work_duration(&self, worked: Duration) {
            self.durations.lock().push(worked);
        }
        fn retry(&self) {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_report_adds_depth_latency_work_retries_and_held_time() {
        let metrics = Arc::new(Recorded::default());
        let q = WorkQueue::new(QueueOptions::default(), metrics.clone());
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(
            metrics.adds.load(Ordering::Relaxed),
            2,
            "duplicates are not adds"
        );
        assert_eq!(metrics.depth.load(Ordering::Relaxed), 2);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(q.stats().oldest_ready, Some(Duration::from_secs(2)));
        let a = next(&q, SOON).await.unwrap();
        tokio::time::advance(Duration::from_secs(3)).await;
        let b = next(&q, SOON).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let stats = q.stats();
        assert_eq!(stats.processing, 2);
        assert_eq!(stats.depth, 0);
        assert_eq!(stats.unfinished_work, Duration::from_secs(4 + 1));
        assert_eq!(stats.longest_running, Duration::from_secs(4));
        assert_eq!(
            *metrics.latencies.lock(),
            [Duration::from_secs(2), Duration::from_secs(5)]
        );
        a.complete(Completion::Retry);
        b.complete(Completion::Done);
        assert_eq!(metrics.retries.load(Ordering::Relaxed), 1);
        assert_eq!(
            *metrics.durations.lock(),
            [Duration::from_secs(4), Duration::from_secs(1)]
        );
        assert_eq!(q.stats().waiting, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_key_counts_in_the_depth_until_released_and_is_freed_at_shutdown() {
        let metrics = Arc::new(Recorded::default());
        let q = WorkQueue::new(QueueOptions::default(), metrics.clone());
        let key = Arc::new("a".to_owned());
        q.add(key.clone());
        q.add(Arc::new("b".to_owned()));
        let held = tokio::time::timeout(SOON, q.get()).await.unwrap().unwrap();
        q.add(key.clone());
        held.complete(Completion::Park);
        let stats = q.stats();
        assert_eq!((stats.depth, stats.parked), (2, 1), "{stats:?}");
        assert_eq!(
            metrics.depth.load(Ordering::Relaxed),
            2,
            "the depth gauge counts it"
        );
        q.add(key.clone());
        let b = tokio::time::timeout(SOON, q.get()).await.unwrap().unwrap();
        assert_eq!(**b.key(), "b");
        b.complete(Completion::Done);
        assert!(
            tokio::time::timeout(Duration::from_secs(60), q.get())
                .await
                .is_err(),
            "a parked key is not handed out, even added again"
        );
        assert_eq!(q.unpark(|k| **k == "other"), 0);
        assert_eq!(q.unpark(|k| **k == "a"), 1);
        let a = tokio::time::timeout(SOON, q.get()).await.unwrap().unwrap();
        assert_eq!(**a.key(), "a");
        a.complete(Completion::Park);
        assert_eq!(q.stats().parked, 1);
        assert_eq!(Arc::strong_count(&key), 2, "the queue holds the parked key");
        q.shut_down();
        assert_eq!(q.stats(), QueueStats::default());
        assert_eq!(metrics.depth.load(Ordering::Relaxed), 0);
        assert_eq!(Arc::strong_count(&key), 1, "shutdown frees it");
    }

    #[tokio::test(start_paused = true)]
    async fn parked_keys_count_toward_the_key_cap() {
        let options = QueueOptions {
            max_keys: 1,
            ..QueueOptions::default()
        };
        let q = WorkQueue::new(options, Arc::new(NoQueueMetrics));
        q.add("a");
        next(&q, SOON).await.unwrap().complete(Completion::Park);
        assert_eq!(q.try_add("b"), Err(QueueRefusal::Full));
        assert_eq!(q.try_add("a"), Ok(()), "the parked key is no new key");
    }

    #[derive(Default)]
    struct Refusals(Mutex<Vec<QueueRefusal>>);

    impl QueueMetrics for Refusals {
        fn refused(&self, reason: QueueRefusal) {
            self.0.lock().push(reason);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_guests_adds_past_the_key_cap_are_refused_and_counted_and_change_nothing() {
        let refusals = Arc::new(Refusals::default());
        let options = QueueOptions {
            max_keys: 3,
            ..QueueOptions::default()
        };
        let q = WorkQueue::new(options, refusals.clone());
        let keys: Vec<String> = (0..1_000_000).map(|i| format!("k{i}")).collect();
        let accepted = keys
            .iter()
            .filter(|k| q.try_add((*k).clone()).is_ok())
            .count();
        assert_eq!(accepted, 3);
        assert_eq!(refusals.0.lock().len(), 1_000_000 - 3);
        assert!(refusals.0.lock().iter().all(|r| *r == QueueRefusal::Full));
        // A key the queue already holds is no new key: adding it again is fine.
        assert_eq!(q.try_add("k1".to_owned()), Ok(()));
        assert_eq!(
            q.try_add_after("new".to_owned(), Duration::from_secs(1)),
            Err(QueueRefusal::Full)
        );
        assert_eq!(q.stats().depth, 3);
        // The host's own adds (from the informers) are not capped.
        q.add("from-informer".to_owned());
        assert_eq!(q.stats().depth, 4);
        // Room again once keys are handed out and done.
        for _ in 0..4 {
            next_owned(&q).await.complete(Completion::Done);
        }
        assert_eq!(q.try_add("later".to_owned()), Ok(()));
    }

    async fn next_owned(q: &WorkQueue<String>) -> Processing<String> {
        tokio::time::timeout(SOON, q.get()).await.unwrap().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_delay_past_the_longest_is_refused_and_a_longer_requeue_is_shortened() {
        let refusals = Arc::new(Refusals::default());
        let options = QueueOptions {
            max_add_after: Duration::from_secs(60),
            ..QueueOptions::default()
        };
        let q = WorkQueue::new(options, refusals.clone());
        assert_eq!(
            q.try_add_after("a", Duration::from_millis(u32::MAX.into())),
            Err(QueueRefusal::DelayTooLong)
        );
        assert_eq!(*refusals.0.lock(), [QueueRefusal::DelayTooLong]);
        assert_eq!(q.stats().waiting, 0);
        assert_eq!(q.try_add_after("a", Duration::from_secs(60)), Ok(()));
        let item = next(&q, Duration::from_secs(61)).await.unwrap();
        let done_at = Instant::now();
        item.complete(Completion::RequeueAfter(Duration::from_millis(
            u32::MAX.into(),
        )));
        let _again = next(&q, Duration::from_secs(61)).await.unwrap();
        assert_eq!(done_at.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_jittered_within_the_fraction_and_spread() {
        let options = QueueOptions {
            base_delay: Duration::from_secs(1),
            retry_jitter: 0.5,
            ..QueueOptions::default()
        };
        assert_eq!(
            options.jittered(Duration::from_secs(2), 0.0),
            Duration::from_secs(2)
        );
        assert_eq!(
            options.jittered(Duration::from_secs(2), 1.0),
            Duration::from_secs(3)
        );
        let q = WorkQueue::new(options, Arc::new(NoQueueMetrics));
        let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
        let start = Instant::now();
        for key in &keys {
            q.add_rate_limited(key.clone());
        }
        let mut ready_at = Vec::new();
        for _ in &keys {
            let item = tokio::time::timeout(Duration::from_secs(2), q.get())
                .await
                .expect("retried within base delay plus jitter")
                .expect("a key");
            ready_at.push(start.elapsed());
            item.complete(Completion::Done);
        }
        assert!(
            ready_at
                .iter()
                .all(|d| *d >= Duration::from_secs(1) && *d <= Duration::from_millis(1500)),
            "{ready_at:?}"
        );
        ready_at.dedup();
        assert!(ready_at.len() > 1, "keys failing together are spread out");
    }

    #[test]
    fn options_are_validated() {
        assert!(QueueOptions::default().validate().is_ok());
        let bad = [
            QueueOptions {
                base_delay: Duration::ZERO,
                ..QueueOptions::default()
            },
            QueueOptions {
                base_delay: Duration::from_secs(2000),
                ..QueueOptions::default()
            },
            QueueOptions {
                retry_qps: 0.0,
                ..QueueOptions::default()
            },
            QueueOptions {
                retry_qps: f64::NAN,
                ..QueueOptions::default()
            },
            QueueOptions {
                retry_burst: 0,
                ..QueueOptions::default()
            },
            QueueOptions {
                max_keys: 0,
                ..QueueOptions::default()
            },
            QueueOptions {
                retry_jitter: 1.5,
                ..QueueOptions::default()
            },
            QueueOptions {
                retry_jitter: f64::NAN,
                ..QueueOptions::default()
            },
            QueueOptions {
                max_add_after: Duration::ZERO,
                ..QueueOptions::default()
            },
        ];
        for options in bad {
            assert!(options.validate().is_err(), "{options:?}");
        }
    }
}
