//! A 0.2 plugin's context, which outlives its instances and versions: its workqueue, write
//! client, event recorder, reconcile rate and counters ([`Context`]); and one instance's side
//! of it ([`InstanceImports`]): the type of each of its subscription handles and the time its
//! call in progress has waited for the API server. Contract-free: the 0.2 imports act on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client::events::EventRecorder;
use crate::client::{Refusal, WriteClient, WriteError};
use crate::guest::calls::CallCounters;
use crate::guest::escape::escaped;
use crate::guest::notices::Notices;
use crate::manager::policy::ReconcileSettings;
use crate::model::declared::Gvk;
use crate::reconcile::keys::ObjectKey;
use crate::reconcile::rate_limit::TokenBucket;
use crate::reconcile::workqueue::{QueueMetrics, QueueRefusal, WorkQueue};

/// What the `client` and `queue` imports of one 0.2 plugin act on. Shared by its instances and
/// handed from version to version on reload (the queue, the client and the recorder belong to
/// the plugin, not to one instance).
pub(crate) struct Context {
    pub(crate) client: Arc<WriteClient>,
    pub(crate) recorder: Arc<EventRecorder>,
    pub(crate) queue: WorkQueue<ObjectKey>,
    /// What the plugin's guest calls did, for its status.
    pub(crate) calls: Arc<CallCounters>,
    /// The plugin's reconcile rate, shared by its workers and versions.
    pub(crate) reconciles: Mutex<TokenBucket>,
    /// The shortest `requeue-after` honoured.
    pub(crate) min_requeue: Duration,
    /// Fresh instances started after one faulted (reconcile workers and handlers).
    pub(crate) restarts: Arc<AtomicU64>,
    /// The last failed reconcile or handler call, or fault.
    pub(crate) last_error: Arc<Mutex<Option<String>>>,
    /// Which refused queue adds reach the log.
    pub(crate) queue_notices: Notices,
}

impl Context {
    /// The context of a plugin writing through `client` and `recorder`, with its queue and
    /// reconcile rate set by `settings`.
    pub(crate) fn new(
        client: Arc<WriteClient>,
        recorder: Arc<EventRecorder>,
        settings: &ReconcileSettings,
        metrics: Arc<dyn QueueMetrics>,
    ) -> Self {
        Context {
            client,
            recorder,
            queue: WorkQueue::new(settings.queue.clone(), metrics),
            calls: Default::default(),
            reconciles: Mutex::new(TokenBucket::new(
                settings.reconciles_per_second,
                settings.reconcile_burst,
            )),
            min_requeue: settings.min_requeue_delay,
            restarts: Arc::default(),
            last_error: Arc::default(),
            queue_notices: Notices::default(),
        }
    }

    /// Records the plugin's last error, for its status.
    pub(crate) fn record_error(&self, error: String) {
        *self.last_error.lock() = Some(error);
    }

    /// The error a guest's refused queue add answers (the queue has counted it), logged at
    /// most once a second. `key` names the key (for an invalid key: why it is invalid).
    pub(crate) fn queue_refused(&self, reason: QueueRefusal, key: &str) -> String {
        let message = match reason {
            QueueRefusal::Full => format!(
                "the workqueue is full ({} keys): {key} not queued",
                self.queue.options().max_keys
            ),
            QueueRefusal::KeyTooLong => format!(
                "the key is longer than {} bytes: not queued",
                self.queue.options().max_key_bytes
            ),
            QueueRefusal::DelayTooLong => format!(
                "the delay is longer than {:?}: {key} not queued",
                self.queue.options().max_add_after
            ),
            QueueRefusal::InvalidKey => format!("the key is invalid: {key}: not queued"),
        };
        if let Some(unlogged) = self.queue_notices.admit(tokio::time::Instant::now()) {
            tracing::warn!(
                plugin = self.client.plugin(),
                reason = reason.as_str(),
                unlogged,
                "queue add refused: {}",
                escaped(&message)
            );
        }
        message
    }
}

/// One instance's side of the 0.2 imports: the plugin's [`Context`], the type of each of this
/// instance's subscription handles, and how long the call in progress has waited for the API
/// server (which does not count toward its deadline, nor its wall limit).
pub(crate) struct InstanceImports {
    pub(crate) plugin: Arc<Context>,
    pub(crate) subscriptions: Vec<Gvk>,
    waits: Mutex<ApiWaits>,
    /// Whether `waits` may hold anything since its last reset: most guest calls make no API
    /// call, and their reset then costs a load instead of the lock. Set and cleared on the
    /// instance's own task (a guest call and the reset before the next one never overlap).
    touched: AtomicBool,
}

/// The time the call in progress has spent waiting for the API server.
#[derive(Debug, Default)]
struct ApiWaits {
    /// The waits of API calls that have returned.
    done: Duration,
    /// When the API call in progress started (a guest call makes one at a time).
    since: Option<Instant>,
    /// The last write of the call the host refused, and why.
    refused: Option<Refusal>,
}

impl InstanceImports {
    pub(crate) fn new(plugin: Arc<Context>, subscriptions: Vec<Gvk>) -> Self {
        InstanceImports {
            plugin,
            subscriptions,
            waits: Mutex::new(ApiWaits::default()),
            touched: AtomicBool::new(false),
        }
    }

    /// Starts counting the waits of a new guest call from zero.
    pub(crate) fn reset_waited(&self) {
        if self.touched.load(Ordering::Relaxed) {
            *self.waits.lock() = ApiWaits::default();
            self.touched.store(false, Ordering::Relaxed);
        }
    }

    /// Time the call in progress has spent waiting for the API server so far, the API call
    /// in progress included: the wall limit excuses a wait while it happens, so a hanging API
    /// call ends at its own timeout.
    pub(crate) fn waited(&self) -> Duration {
        let waits = self.waits.lock();
        waits.done + waits.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Runs one write, counting the time it waits as excused from the guest's deadline and
    /// remembering a refusal for the call's result.
    pub(crate) async fn api<T>(
        &self,
        call: impl Future<Output = Result<T, WriteError>>,
    ) -> Result<T, WriteError> {
        /// Folds the wait into `done` however the call ends (also when it is dropped).
        struct Waiting<'a>(&'a Mutex<ApiWaits>);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                let mut waits = self.0.lock();
                if let Some(since) = waits.since.take() {
                    waits.done += since.elapsed();
                }
            }
        }
        self.touched.store(true, Ordering::Relaxed);
        self.waits.lock().since = Some(Instant::now());
        let waiting = Waiting(&self.waits);
        let result = call.await;
        drop(waiting);
        if let Some(refusal) = result.as_ref().err().and_then(WriteError::refusal) {
            self.waits.lock().refused = Some(refusal);
        }
        result
    }

    /// Why the host refused the last write it refused since the guest call began, if it did.
    pub(crate) fn refused(&self) -> Option<Refusal> {
        self.waits.lock().refused
    }

    pub(crate) fn client(&self) -> &WriteClient {
        &self.plugin.client
    }

    pub(crate) fn gvk(&self, handle: u32) -> Option<&Gvk> {
        usize::try_from(handle)
            .ok()
            .and_then(|h| self.subscriptions.get(h))
    }
}
