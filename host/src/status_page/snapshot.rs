//! What the status page shows, read from the running host at one instant: the host's own
//! state, its informers, and one [`PluginView`] per loaded plugin.
//!
//! Every string in a [`PluginView`] that a guest chose (its declared name, its last error, its
//! webhooks) is hostile: the renderer escapes them, nothing here trusts them.

use std::time::Duration;

use crate::metrics::PluginCounts;
use kubewasm_runtime::{PluginState, PluginStatus};

/// The host at one instant.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub leader: LeaderView,
    /// `/readyz`'s answer: `Err` holds why the replica is not ready.
    pub ready: Result<(), String>,
    pub informers: Vec<InformerView>,
    pub plugins: Vec<PluginView>,
    /// Plugin files that did not load (or whose new version was refused), with why.
    pub files: Vec<FileView>,
}

impl Default for Snapshot {
    /// A replica with nothing loaded, not ready yet.
    fn default() -> Self {
        Snapshot {
            leader: LeaderView::default(),
            ready: Err("starting".to_owned()),
            informers: Vec::new(),
            plugins: Vec::new(),
            files: Vec::new(),
        }
    }
}

/// Whether this replica leads.
#[derive(Debug, Clone, Default)]
pub struct LeaderView {
    /// Whether leader election is on at all (off: this replica always leads).
    pub election: bool,
    pub leader: bool,
    pub identity: String,
    pub lease: String,
    pub shards: usize,
    pub led_shards: Vec<usize>,
}

/// One shared informer.
#[derive(Debug, Clone, Default)]
pub struct InformerView {
    /// `group/version/plural`.
    pub resource: String,
    /// Empty for all namespaces.
    pub namespace: String,
    /// Label and field selectors, `;`-joined; empty for none.
    pub selector: String,
    pub synced: bool,
    pub objects: u64,
    pub relists: u64,
    pub watch_restarts: u64,
    pub dead_connections: u64,
}

/// A plugin file the host could not load, or whose replacement it refused.
#[derive(Debug, Clone, Default)]
pub struct FileView {
    pub path: String,
    /// The plugin key its file name gives.
    pub key: String,
    pub error: String,
}

/// One loaded plugin.
#[derive(Debug, Clone)]
pub struct PluginView {
    /// Its key: the file name without `.wasm`.
    pub key: String,
    pub file: String,
    /// The name its `init` declared (guest text).
    pub name: String,
    /// Contract package and world.
    pub contract: String,
    pub state: PluginState,
    pub failed: bool,
    pub replay_done: bool,
    pub content_hash: String,
    /// Events handled by handler calls that returned.
    pub events: u64,
    pub handler_errors: u64,
    pub reconciles: u64,
    pub reconcile_errors: u64,
    /// Traps, timeouts and memory faults.
    pub faults: u64,
    pub restarts: u64,
    /// Events waiting for the guest plus a 0.2 plugin's ready keys.
    pub queue_depth: u64,
    pub workqueue: Option<QueueView>,
    pub retries: u64,
    pub writes_refused: u64,
    /// Seconds spent in its guest calls (reconciles' API waits included).
    pub call_seconds: f64,
    pub memory_bytes: u64,
    /// Guest text.
    pub last_error: Option<String>,
    pub subscriptions: Vec<String>,
    pub reads: Vec<String>,
    pub writes: Vec<String>,
    /// The webhooks it declared, as JSON (guest text).
    pub webhooks: Option<String>,
}

/// A 0.2 plugin's workqueue.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueView {
    pub depth: u64,
    pub waiting: u64,
    pub processing: u64,
    pub oldest_ready: Option<Duration>,
}

impl PluginView {
    /// The view of a plugin's status and the counts only its metrics hold.
    pub fn new(status: &PluginStatus, counts: PluginCounts) -> PluginView {
        PluginView {
            key: status.key.to_string(),
            file: status
                .source
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            name: status.name.clone(),
            contract: status.contract.to_string(),
            state: status.state,
            failed: status.failed,
            replay_done: status.replay_done,
            content_hash: status.content_hash.clone(),
            events: status.events_delivered,
            handler_errors: status.errors,
            reconciles: status.reconciles,
            reconcile_errors: status.reconcile_errors,
            faults: status.traps + status.timeouts + status.memory_faults,
            restarts: status.restarts,
            queue_depth: status.queue_depth as u64,
            workqueue: status.workqueue.as_ref().map(|q| QueueView {
                depth: q.depth as u64,
                waiting: q.waiting as u64,
                processing: q.processing as u64,
                oldest_ready: q.oldest_ready,
            }),
            retries: counts.retries,
            writes_refused: counts.writes_refused,
            call_seconds: counts.call_seconds,
            memory_bytes: status.memory_bytes as u64,
            last_error: status.last_error.clone(),
            subscriptions: status.subscriptions.clone(),
            reads: status.reads.clone(),
            writes: status.writes.clone(),
            webhooks: status
                .admission
                .as_ref()
                .and_then(|d| serde_json::to_string_pretty(d).ok()),
        }
    }

    /// Every error the plugin has had: handler and reconcile errors and faults.
    pub fn error_count(&self) -> u64 {
        self.handler_errors + self.reconcile_errors + self.faults
    }
}
