//! Prometheus metrics: what the plugins and informers did, in the text exposition format.
//!
//! Plugin counters are pushed as events happen, through handles made once per plugin version
//! ([`PluginMetrics`]: no label strings on the hot path); a plugin's queue depth and whether it
//! has failed, and the informer figures (objects cached, relists, watch restarts), are read live
//! on each scrape through [`PluginSource`] and [`InformerSource`]. The series of a plugin that is
//! unloaded are removed.
//!
//! The workqueue of each 0.2 plugin reports client-go's workqueue metrics under their own names
//! (`workqueue_depth`, `workqueue_adds_total`, ... with label `name` = the plugin), unprefixed
//! as client-go and controller-runtime expose them, so existing dashboards work unchanged.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;

use kubewasm_informer::WireCounters;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use kubewasm_runtime::{
    DropReason, EventKind, FailureKind, Observer, Origin, PluginObserver, QueueMetrics,
    QueueRefusal, QueueStats, ReconcileResult, Refusal, WriteObserver, WriteVerb,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    plugin: String,
    resource: String,
    event: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

/// client-go's workqueue label: the queue's name, here the plugin's.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    plugin: String,
    verb: String,
    resource: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    plugin: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueRefusalLabels {
    plugin: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    plugin: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabels {
    plugin: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadLabels {
    plugin: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabels {
    origin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusedLabels {
    plugin: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    plugin: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LeaseLabels {
    lease: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabels {
    resource: String,
    namespace: String,
    selector: String,
}

/// What one informer reports on a scrape.
#[derive(Debug, Clone, Default)]
pub struct InformerSample {
    /// `group/version/plural`.
    pub resource: String,
    /// Empty for all namespaces.
    pub namespace: String,
    /// Label and field selectors, `;`-joined; empty for none.
    pub selector: String,
    pub objects: u64,
    pub relists: u64,
    pub watch_restarts: u64,
    /// Periodic bookmarks received: a watch that stops getting them is soon presumed dead.
    pub bookmarks: u64,
    /// Watches and LISTs found dead (silent past their idle limit).
    pub dead_connections: u64,
    /// Whether its first LIST has been delivered to its cache.
    pub synced: bool,
}

/// Reads the informers' figures at scrape time.
pub type InformerSource = Arc<dyn Fn() -> Vec<InformerSample> + Send + Sync>;

/// What one loaded plugin reports on a scrape.
#[derive(Debug, Clone, Default)]
pub struct PluginSample {
    pub plugin: String,
    /// Events queued and not yet handed to the guest, now.
    pub queue_depth: u64,
    /// Resyncs declined while the previous one was still queued, since the plugin loaded.
    pub resyncs_skipped: u64,
    /// Whether the plugin is in the failed state.
    pub failed: bool,
    /// A 0.2 plugin's workqueue, now.
    pub workqueue: Option<QueueStats>,
    /// The linear memory its instances hold, now.
    pub memory_bytes: u64,
}

/// What a plugin's metrics count that its status does not: the status page reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PluginCounts {
    /// Keys its workqueue retried with backoff (`workqueue_retries_total`).
    pub retries: u64,
    /// Writes the host refused without sending (`kubewasm_plugin_writes_refused_total`).
    pub writes_refused: u64,
    /// Seconds spent in its handler calls and reconciles, API waits of reconciles included, as
    /// `kubewasm_plugin_handler_duration_seconds` and `..._reconcile_duration_seconds` observe
    /// them.
    pub call_seconds: f64,
}

/// Reads the plugins' live figures at scrape time.
pub type PluginSource = Arc<dyn Fn() -> Vec<PluginSample> + Send + Sync>;

/// Every metric kubewasm exports.
pub struct Metrics {
    /// The webhook server's reviews.
    admission: crate::admission::AdmissionMetrics,
    registry: Registry,
    events: Family<EventLabels, Counter>,
    handler_seconds: Family<PluginLabels, Histogram>,
    failures: Family<FailureLabels, Counter>,
    dropped: Family<DropLabels, Counter>,
    log_dropped: Family<PluginLabels, Counter>,
    errors_unlogged: Family<PluginLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    reload_seconds: Histogram,
    /// Registry checks of plugins configured by `source = "oci://..."`.
    oci_pulls: Family<ReloadLabels, Counter>,
    /// Plugin versions' compiled code, by where it came from.
    code_loads: Family<OriginLabels, Counter>,
    /// Precompiled code refused (the component compiled instead), by plugin and reason.
    precompiled_refused: Family<RefusedLabels, Counter>,
    leader: Family<LeaseLabels, Gauge>,
    /// What the status page's history holds (see [`crate::status_page`]).
    status_page_bytes: Gauge,
    plugins: Arc<OnceLock<PluginSource>>,
    /// The event label sets made for each plugin name, to remove them with the plugin.
    series: Mutex<HashMap<String, Vec<EventLabels>>>,
    /// Nanoseconds each plugin spent in handler calls and reconciles, shared by its versions'
    /// handles (the status page reads them; the histograms' sums are not readable).
    busy: Mutex<HashMap<String, Arc<AtomicU64>>>,
    /// client-go's workqueue metrics, without the `kubewasm_` prefix.
    workqueue_registry: Registry,
    workqueue: WorkqueueFamilies,
    writes: WriteFamilies,
}

/// The pushed workqueue metrics, by plugin.
#[derive(Clone)]
struct WorkqueueFamilies {
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Family<QueueLabels, Histogram>,
    work_duration: Family<QueueLabels, Histogram>,
    retries: Family<QueueLabels, Counter>,
    /// The guest's queue adds refused, by plugin and reason (kubewasm's, prefixed).
    refused: Family<QueueRefusalLabels, Counter>,
    /// Reconciles that returned an error, by plugin (kubewasm's, prefixed).
    reconcile_errors: Family<PluginLabels, Counter>,
    /// Reconciles by plugin and result (kubewasm's, prefixed).
    reconciles: Family<ReconcileLabels, Counter>,
    /// How long reconciles took, by plugin (kubewasm's, prefixed).
    reconcile_seconds: Family<PluginLabels, Histogram>,
}

/// The write client's and Event recorder's metrics, by plugin.
#[derive(Clone)]
struct WriteFamilies {
    calls: Family<WriteLabels, Counter>,
    refused: Family<RefusalLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    /// The write-call label sets made for each loaded plugin name, to remove them with the
    /// plugin. A name absent here is unloaded: a write of its that ends later (the Event
    /// recorder writes in the background) makes no series that nothing would remove.
    series: Arc<Mutex<HashMap<String, HashSet<WriteLabels>>>>,
}

/// One 0.2 plugin's workqueue handles.
pub struct QueueHandles {
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    retries: Counter,
    refused: [Counter; QueueRefusal::ALL.len()],
    reconcile_errors: Counter,
    reconciles: [Counter; ReconcileResult::ALL.len()],
    reconcile_seconds: Histogram,
    busy: Arc<AtomicU64>,
}

impl QueueMetrics for QueueHandles {
    fn add(&self) {
        self.adds.inc();
    }

    fn depth(&self, depth: usize) {
        self.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    fn queue_latency(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    fn work_duration(&self, worked: Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }

    fn retry(&self) {
        self.retries.inc();
    }

    fn refused(&self, reason: QueueRefusal) {
        self.refused[reason as usize].inc();
    }

    fn reconcile_error(&self) {
        self.reconcile_errors.inc();
    }

    fn reconciled(&self, result: ReconcileResult, took: Duration) {
        self.reconciles[result as usize].inc();
        self.reconcile_seconds.observe(took.as_secs_f64());
        add_nanos(&self.busy, took);
    }
}

/// One 0.2 plugin's write handles: the call counts are made as verbs, kinds and codes occur.
pub struct WriteHandles {
    families: WriteFamilies,
    refused: [Counter; Refusal::ALL.len()],
    events_dropped: Counter,
}

impl WriteObserver for WriteHandles {
    fn write_call(&self, plugin: &str, verb: WriteVerb, kind: &str, code: &str) {
        let labels = WriteLabels {
            plugin: plugin.to_owned(),
            verb: verb.as_str().to_owned(),
            resource: kind.to_owned(),
            code: code.to_owned(),
        };
        let mut series = self.families.series.lock();
        let Some(made) = series.get_mut(plugin) else {
            return;
        };
        self.families.calls.get_or_create(&labels).inc();
        made.insert(labels);
    }

    fn refused(&self, _plugin: &str, refusal: Refusal) {
        self.refused[refusal as usize].inc();
    }

    fn event_dropped(&self, _plugin: &str) {
        self.events_dropped.inc();
    }
}

const EVENT_KINDS: [EventKind; 3] = [EventKind::Add, EventKind::Update, EventKind::Delete];
const FAILURES: [FailureKind; 3] = [FailureKind::Trap, FailureKind::Timeout, FailureKind::Memory];

/// One plugin version's metric handles: every series it can touch, made when it loads.
pub struct PluginMetrics {
    /// Per subscription, per event kind, per outcome (ok, error).
    events: Vec<[[Counter; 2]; 3]>,
    handler_seconds: Histogram,
    failures: [Counter; 3],
    dropped: [Counter; DropReason::ALL.len()],
    log_dropped: Counter,
    errors_unlogged: Counter,
    busy: Arc<AtomicU64>,
}

fn add_nanos(total: &AtomicU64, took: Duration) {
    total.fetch_add(
        u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

impl PluginObserver for PluginMetrics {
    fn event_handled(&self, resource: usize, kind: EventKind, ok: bool) {
        if let Some(by_kind) = self.events.get(resource) {
            by_kind[kind as usize][usize::from(!ok)].inc();
        }
    }

    fn handler_called(&self, elapsed: Duration) {
        self.handler_seconds.observe(elapsed.as_secs_f64());
        add_nanos(&self.busy, elapsed);
    }

    fn instance_failed(&self, failure: FailureKind) {
        self.failures[failure as usize].inc();
    }

    fn events_dropped(&self, reason: DropReason, n: u64) {
        self.dropped[reason as usize].inc_by(n);
    }

    fn log_dropped(&self, n: u64) {
        self.log_dropped.inc_by(n);
    }

    fn errors_unlogged(&self, n: u64) {
        self.errors_unlogged.inc_by(n);
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Creates the metrics; `informers` is read on every scrape.
    /// Adds the counts of the wires the informers' lists and watches were answered in.
    pub fn with_wire(mut self, wire: WireCounters) -> Metrics {
        self.registry
            .register_collector(Box::new(WireCollector(wire)));
        self
    }

    pub fn new(informers: InformerSource) -> Metrics {
        let mut registry = Registry::with_prefix("kubewasm");
        let events = Family::<EventLabels, Counter>::default();
        registry.register(
            "plugin_events",
            "Events delivered to plugins, by plugin, resource, event kind and outcome",
            events.clone(),
        );
        let handler_seconds = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 4.0, 10))
        });
        registry.register(
            "plugin_handler_duration_seconds",
            "Time one handler call of a plugin took: one event, or one batch for a plugin of \
             the 0.2.1 batch-handler",
            handler_seconds.clone(),
        );
        let failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "plugin_failures",
            "Plugin instances replaced after a trap, a timeout or a memory blow-up",
            failures.clone(),
        );
        let dropped = Family::<DropLabels, Counter>::default();
        registry.register(
            "plugin_events_dropped",
            "Events a plugin did not receive: the one it faulted on, those queued for an instance \
             replaced after a fault (the fresh one is replayed the cache instead), quarantined \
             object versions, and those queued for an instance that faulted as the plugin \
             became failed",
            dropped.clone(),
        );
        let log_dropped = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_log_lines_dropped",
            "Guest log lines dropped over the plugin's rate limit or cut at the length limit",
            log_dropped.clone(),
        );
        let errors_unlogged = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_error_lines_suppressed",
            "Handler and reconcile error lines of a plugin kept out of the log (one a second is \
             logged, with how many were not); every error is still counted and the last one \
             shown in the plugin's status",
            errors_unlogged.clone(),
        );
        let reloads = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "plugin_reloads",
            "Plugin loads and reloads from the plugins directory, by result",
            reloads.clone(),
        );
        let reload_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "plugin_reload_duration_seconds",
            "Time from noticing a changed file to the new version running",
            reload_seconds.clone(),
        );
        let oci_pulls = Family::<ReloadLabels, Counter>::default();
        registry.register(
            "plugin_oci_pulls",
            "Registry checks and pulls of plugins configured by OCI reference, by result (ok, \
             error); the error itself is in the log and /plugins",
            oci_pulls.clone(),
        );
        let code_loads = Family::<OriginLabels, Counter>::default();
        registry.register(
            "plugin_code_loads",
            "Plugin versions loaded, by where their compiled code came from: compiled (a \
             compile ran), cache (the host's compile cache), precompiled (verified precompiled \
             code shipped with the component), memory (a copy already loaded)",
            code_loads.clone(),
        );
        // Every origin from the start: `compiled 0` says no compile ran.
        for origin in [
            Origin::Compiled,
            Origin::DiskCache,
            Origin::Precompiled,
            Origin::Memory,
        ] {
            drop(code_loads.get_or_create(&OriginLabels {
                origin: origin.as_str().to_owned(),
            }));
        }
        let precompiled_refused = Family::<RefusedLabels, Counter>::default();
        registry.register(
            "plugin_precompiled_refused",
            "Precompiled code of OCI sources refused, by plugin and reason (other-engine, \
             other-component, malformed, fetch, io): the component was compiled instead; the \
             reason in full is in the log and /plugins",
            precompiled_refused.clone(),
        );
        let leader = Family::<LeaseLabels, Gauge>::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader election Lease, else 0 (only with \
             --leader-elect)",
            leader.clone(),
        );
        let status_page_bytes = Gauge::default();
        registry.register(
            "status_page_history_bytes",
            "Memory the status page's history holds: each plugin's ring of rate samples and its \
             recent log lines",
            status_page_bytes.clone(),
        );
        registry.register_collector(Box::new(crate::process_memory::ProcessMemory));
        registry.register_collector(Box::new(InformerCollector(informers)));
        let plugins: Arc<OnceLock<PluginSource>> = Arc::default();
        registry.register_collector(Box::new(PluginCollector(plugins.clone())));
        let writes = WriteFamilies {
            calls: Family::default(),
            refused: Family::default(),
            events_dropped: Family::default(),
            series: Arc::default(),
        };
        registry.register(
            "plugin_write_calls",
            "Writes by 0.2 plugins, by plugin, verb, resource (kind) and code: 2xx, the server's \
             HTTP code, or what stopped the write before an answer (not-granted, not-leader, \
             rate-limited, timeout, unreachable, invalid)",
            writes.calls.clone(),
        );
        registry.register(
            "plugin_writes_refused",
            "Writes the host refused without sending: not granted, this replica is not the \
             leader, or the plugin's write rate limit is exhausted",
            writes.refused.clone(),
        );
        registry.register(
            "plugin_recorded_events_dropped",
            "Kubernetes Events a plugin recorded that its Event recorder dropped: the object's \
             event budget was spent",
            writes.events_dropped.clone(),
        );
        let admission = crate::admission::AdmissionMetrics::default();
        admission.register(&mut registry);
        let (workqueue_registry, workqueue) = workqueue_metrics(plugins.clone());
        registry.register(
            "plugin_queue_adds_refused",
            "Keys a 0.2 plugin's guest asked to queue that were refused, by reason: the queue \
             was full, the key too long, or the delay too long",
            workqueue.refused.clone(),
        );
        registry.register(
            "plugin_reconcile_errors",
            "Reconciles of a 0.2 plugin that returned an error (the key is retried with \
             backoff); faults are counted in plugin_failures",
            workqueue.reconcile_errors.clone(),
        );
        registry.register(
            "plugin_reconcile",
            "Reconciles of a 0.2 plugin by result: ok, requeue (done, run again after a delay), \
             error (retried with backoff), refused (an error after the host refused a write: \
             not granted, not the leader, rate-limited, invalid), fault (trap, timeout, memory)",
            workqueue.reconciles.clone(),
        );
        registry.register(
            "plugin_reconcile_duration_seconds",
            "Time one reconcile of a 0.2 plugin took, waits for the API server included",
            workqueue.reconcile_seconds.clone(),
        );
        Metrics {
            registry,
            events,
            handler_seconds,
            failures,
            dropped,
            log_dropped,
            errors_unlogged,
            reloads,
            reload_seconds,
            oci_pulls,
            code_loads,
            precompiled_refused,
            leader,
            status_page_bytes,
            plugins,
            series: Mutex::new(HashMap::new()),
            busy: Mutex::default(),
            workqueue_registry,
            workqueue,
            writes,
            admission,
        }
    }

    /// The workqueue handles of plugin `name`.
    pub fn queue_metrics(&self, name: &str) -> QueueHandles {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        let wq = &self.workqueue;
        QueueHandles {
            depth: wq.depth.get_or_create_owned(&labels),
            adds: wq.adds.get_or_create_owned(&labels),
            queue_duration: wq.queue_duration.get_or_create_owned(&labels),
            work_duration: wq.work_duration.get_or_create_owned(&labels),
            retries: wq.retries.get_or_create_owned(&labels),
            refused: QueueRefusal::ALL.map(|reason| {
                wq.refused.get_or_create_owned(&QueueRefusalLabels {
                    plugin: name.to_owned(),
                    reason: reason.as_str().to_owned(),
                })
            }),
            reconcile_errors: wq.reconcile_errors.get_or_create_owned(&PluginLabels {
                plugin: name.to_owned(),
            }),
            reconciles: ReconcileResult::ALL.map(|result| {
                wq.reconciles.get_or_create_owned(&ReconcileLabels {
                    plugin: name.to_owned(),
                    result: result.as_str().to_owned(),
                })
            }),
            reconcile_seconds: wq.reconcile_seconds.get_or_create_owned(&PluginLabels {
                plugin: name.to_owned(),
            }),
            busy: self.busy_of(name),
        }
    }

    /// The write handles of plugin `name`.
    pub fn write_metrics(&self, name: &str) -> WriteHandles {
        let plugin = PluginLabels {
            plugin: name.to_owned(),
        };
        let w = &self.writes;
        w.series.lock().entry(name.to_owned()).or_default();
        WriteHandles {
            families: w.clone(),
            refused: Refusal::ALL.map(|r| {
                w.refused.get_or_create_owned(&RefusalLabels {
                    plugin: name.to_owned(),
                    reason: r.as_str().to_owned(),
                })
            }),
            events_dropped: w.events_dropped.get_or_create_owned(&plugin),
        }
    }

    /// What the webhook server counts.
    pub fn admission(&self) -> &crate::admission::AdmissionMetrics {
        &self.admission
    }

    /// Where the live plugin figures are read from on each scrape (set once; the plugin host
    /// is made after the metrics it reports to).
    pub fn set_plugin_source(&self, source: PluginSource) {
        let _ = self.plugins.set(source);
    }

    /// The handles of one plugin version.
    pub fn plugin_metrics(&self, plugin: &str, resources: &[String]) -> PluginMetrics {
        let mut made = Vec::new();
        let events = resources
            .iter()
            .map(|resource| {
                EVENT_KINDS.map(|kind| {
                    ["ok", "error"].map(|outcome| {
                        let labels = EventLabels {
                            plugin: plugin.to_owned(),
                            resource: resource.clone(),
                            event: kind.as_str().to_owned(),
                            outcome: outcome.to_owned(),
                        };
                        let counter = self.events.get_or_create_owned(&labels);
                        made.push(labels);
                        counter
                    })
                })
            })
            .collect();
        let mut series = self.series.lock();
        let known = series.entry(plugin.to_owned()).or_default();
        for labels in made {
            if !known.contains(&labels) {
                known.push(labels);
            }
        }
        PluginMetrics {
            events,
            handler_seconds: self.handler_seconds.get_or_create_owned(&PluginLabels {
                plugin: plugin.to_owned(),
            }),
            failures: FAILURES.map(|f| {
                self.failures.get_or_create_owned(&FailureLabels {
                    plugin: plugin.to_owned(),
                    kind: f.as_str().to_owned(),
                })
            }),
            dropped: DropReason::ALL.map(|r| {
                self.dropped.get_or_create_owned(&DropLabels {
                    plugin: plugin.to_owned(),
                    reason: r.as_str().to_owned(),
                })
            }),
            log_dropped: self.log_dropped.get_or_create_owned(&PluginLabels {
                plugin: plugin.to_owned(),
            }),
            errors_unlogged: self.errors_unlogged.get_or_create_owned(&PluginLabels {
                plugin: plugin.to_owned(),
            }),
            busy: self.busy_of(plugin),
        }
    }

    /// The time-in-calls total of `plugin`, made on first use.
    fn busy_of(&self, plugin: &str) -> Arc<AtomicU64> {
        self.busy
            .lock()
            .entry(plugin.to_owned())
            .or_default()
            .clone()
    }

    /// Removes every series of `plugin`.
    pub fn remove_plugin(&self, plugin: &str) {
        self.busy.lock().remove(plugin);
        for labels in self.series.lock().remove(plugin).unwrap_or_default() {
            self.events.remove(&labels);
        }
        let p = PluginLabels {
            plugin: plugin.to_owned(),
        };
        self.handler_seconds.remove(&p);
        self.log_dropped.remove(&p);
        self.errors_unlogged.remove(&p);
        self.writes.events_dropped.remove(&p);
        for labels in self.writes.series.lock().remove(plugin).unwrap_or_default() {
            self.writes.calls.remove(&labels);
        }
        for r in Refusal::ALL {
            self.writes.refused.remove(&RefusalLabels {
                plugin: plugin.to_owned(),
                reason: r.as_str().to_owned(),
            });
        }
        let q = QueueLabels {
            name: plugin.to_owned(),
        };
        let wq = &self.workqueue;
        wq.depth.remove(&q);
        wq.adds.remove(&q);
        wq.queue_duration.remove(&q);
        wq.work_duration.remove(&q);
        wq.retries.remove(&q);
        wq.reconcile_errors.remove(&p);
        wq.reconcile_seconds.remove(&p);
        for result in ReconcileResult::ALL {
            wq.reconciles.remove(&ReconcileLabels {
                plugin: plugin.to_owned(),
                result: result.as_str().to_owned(),
            });
        }
        for reason in QueueRefusal::ALL {
            wq.refused.remove(&QueueRefusalLabels {
                plugin: plugin.to_owned(),
                reason: reason.as_str().to_owned(),
            });
        }
        for f in FAILURES {
            self.failures.remove(&FailureLabels {
                plugin: plugin.to_owned(),
                kind: f.as_str().to_owned(),
            });
        }
        for r in DropReason::ALL {
            self.dropped.remove(&DropLabels {
                plugin: plugin.to_owned(),
                reason: r.as_str().to_owned(),
            });
        }
        for result in ["ok", "failed"] {
            self.reloads.remove(&ReloadLabels {
                plugin: plugin.to_owned(),
                result: result.to_owned(),
            });
        }
    }

    /// Records a load or reload of a plugin file; `elapsed` is only observed for successes.
    pub fn reloaded(&self, plugin: &str, ok: bool, elapsed: Duration) {
        self.reloads
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_string(),
                result: if ok { "ok" } else { "failed" }.to_string(),
            })
            .inc();
        if ok {
            self.reload_seconds.observe(elapsed.as_secs_f64());
        }
    }

    /// Records one registry check of an OCI source.
    pub fn oci_pulled(&self, plugin: &str, ok: bool) {
        self.oci_pulls
            .get_or_create(&ReloadLabels {
                plugin: plugin.to_owned(),
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }

    /// Records whether this replica leads on `lease`.
    pub fn set_leader(&self, lease: &str, leader: bool) {
        self.leader
            .get_or_create(&LeaseLabels {
                lease: lease.to_owned(),
            })
            .set(i64::from(leader));
    }

    /// Records the bytes the status page's history holds now.
    pub fn set_status_page_bytes(&self, bytes: usize) {
        self.status_page_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The counts of `plugin` that only its metrics hold (its status has the rest).
    pub fn plugin_counts(&self, plugin: &str) -> PluginCounts {
        let retries = self
            .workqueue
            .retries
            .get(&QueueLabels {
                name: plugin.to_owned(),
            })
            .map_or(0, |c| c.get());
        let writes_refused = Refusal::ALL
            .iter()
            .filter_map(|r| {
                self.writes.refused.get(&RefusalLabels {
                    plugin: plugin.to_owned(),
                    reason: r.as_str().to_owned(),
                })
            })
            .map(|c| c.get())
            .sum();
        let call_seconds = self
            .busy
            .lock()
            .get(plugin)
            .map_or(0.0, |nanos| nanos.load(Ordering::Relaxed) as f64 / 1e9);
        PluginCounts {
            retries,
            writes_refused,
            call_seconds,
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text::{encode_eof, encode_registry};
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry)
            .and_then(|()| encode_registry(&mut out, &self.workqueue_registry))
            .and_then(|()| encode_eof(&mut out));
        out
    }
}

impl Observer for Metrics {
    fn plugin(&self, name: &str, resources: &[String]) -> Arc<dyn PluginObserver> {
        Arc::new(self.plugin_metrics(name, resources))
    }

    fn queue(&self, name: &str) -> Arc<dyn QueueMetrics> {
        Arc::new(self.queue_metrics(name))
    }

    fn writes(&self, name: &str) -> Arc<dyn WriteObserver> {
        Arc::new(self.write_metrics(name))
    }

    fn plugin_removed(&self, name: &str) {
        self.remove_plugin(name);
    }

    fn code_loaded(&self, origin: Origin) {
        self.code_loads
            .get_or_create(&OriginLabels {
                origin: origin.as_str().to_owned(),
            })
            .inc();
    }
}

/// client-go's workqueue metrics in a registry of their own (no prefix): the pushed families,
/// and a collector for the gauges read from each queue when scraped.
fn workqueue_metrics(plugins: Arc<OnceLock<PluginSource>>) -> (Registry, WorkqueueFamilies) {
    // client-go's buckets for both durations: 10 ns to 10 s.
    let durations = || Histogram::new(exponential_buckets(1e-8, 10.0, 10));
    let families = WorkqueueFamilies {
        depth: Family::default(),
        adds: Family::default(),
        queue_duration: Family::new_with_constructor(durations),
        work_duration: Family::new_with_constructor(durations),
        retries: Family::default(),
        refused: Family::default(),
        reconcile_errors: Family::default(),
        reconciles: Family::default(),
        // 10 µs to about 2.6 s, by fours, as the handler calls.
        reconcile_seconds: Family::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 4.0, 10))
        }),
    };
    let mut registry = Registry::default();
    registry.register(
        "workqueue_depth",
        "Current depth of workqueue",
        families.depth.clone(),
    );
    registry.register(
        "workqueue_adds",
        "Total number of adds handled by workqueue",
        families.adds.clone(),
    );
    registry.register(
        "workqueue_queue_duration_seconds",
        "How long in seconds an item stays in workqueue before being requested",
        families.queue_duration.clone(),
    );
    registry.register(
        "workqueue_work_duration_seconds",
        "How long in seconds processing an item from workqueue takes",
        families.work_duration.clone(),
    );
    registry.register(
        "workqueue_retries",
        "Total number of retries handled by workqueue",
        families.retries.clone(),
    );
    registry.register_collector(Box::new(WorkqueueCollector(plugins)));
    (registry, families)
}

/// The workqueue gauges client-go computes from the items in progress.
struct WorkqueueCollector(Arc<OnceLock<PluginSource>>);

impl std::fmt::Debug for WorkqueueCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkqueueCollector")
    }
}

/// A workqueue gauge read from each queue: name, help, value.
type QueueColumn = (&'static str, &'static str, fn(&QueueStats) -> f64);

impl prometheus_client::collector::Collector for WorkqueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = self.0.get().map(|source| source()).unwrap_or_default();
        let gauges: [QueueColumn; 2] = [
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been \
                 observed by work_duration. Large values indicate stuck threads. One can deduce \
                 the number of stuck threads by observing the rate at which this increases.",
                |q| q.unfinished_work.as_secs_f64(),
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                |q| q.longest_running.as_secs_f64(),
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for s in &samples {
                let Some(queue) = &s.workqueue else { continue };
                let labels = QueueLabels {
                    name: s.plugin.clone(),
                };
                ConstGauge::new(value(queue)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

struct PluginCollector(Arc<OnceLock<PluginSource>>);

/// A gauge read from each plugin sample: name, help, value (`None`: no series for this plugin).
type GaugeColumn = (&'static str, &'static str, fn(&PluginSample) -> Option<i64>);

impl std::fmt::Debug for PluginCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginCollector")
    }
}

impl prometheus_client::collector::Collector for PluginCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = self.0.get().map(|source| source()).unwrap_or_default();
        let gauges: [GaugeColumn; 4] = [
            (
                "plugin_queue_depth",
                "Events waiting in a plugin's queue, read when scraped",
                |s| Some(i64::try_from(s.queue_depth).unwrap_or(i64::MAX)),
            ),
            (
                "plugin_workqueue_waiting",
                "Keys in a 0.2 plugin's workqueue waiting for a delay (requeue-after, add-after or \
                 retry backoff) to pass, read when scraped; they are not in workqueue_depth, \
                 which counts the keys ready to be handed out, as client-go's does",
                |s| {
                    s.workqueue
                        .as_ref()
                        .map(|q| i64::try_from(q.waiting).unwrap_or(i64::MAX))
                },
            ),
            (
                "plugin_failed",
                "1 while a plugin is in the failed state (restarts kept failing; retried rarely)",
                |s| Some(i64::from(s.failed)),
            ),
            (
                "plugin_memory_bytes",
                "Linear memory a plugin's live instances hold (handler and reconcile workers), \
                 read when scraped; host-side memory such as the cache is not in it",
                |s| Some(i64::try_from(s.memory_bytes).unwrap_or(i64::MAX)),
            ),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for s in &samples {
                let Some(value) = value(s) else { continue };
                let labels = PluginLabels {
                    plugin: s.plugin.clone(),
                };
                ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "plugin_resyncs_skipped",
            "Resyncs a plugin's subscriptions declined because their previous resync was still \
             queued (a guest slower than its resync period), since it loaded",
            None,
            MetricType::Counter,
        )?;
        for s in &samples {
            let labels = PluginLabels {
                plugin: s.plugin.clone(),
            };
            ConstCounter::new(s.resyncs_skipped).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

struct InformerCollector(InformerSource);

/// A counter read from each informer sample: name, help, value.
type CounterColumn = (&'static str, &'static str, fn(&InformerSample) -> u64);

impl std::fmt::Debug for InformerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InformerCollector")
    }
}

impl prometheus_client::collector::Collector for InformerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let samples = (self.0)();
        let labels = |s: &InformerSample| InformerLabels {
            resource: s.resource.clone(),
            namespace: s.namespace.clone(),
            selector: s.selector.clone(),
        };
        let mut family = encoder.encode_descriptor(
            "informer_objects",
            "Objects in an informer's cache",
            None,
            MetricType::Gauge,
        )?;
        for s in &samples {
            ConstGauge::new(i64::try_from(s.objects).unwrap_or(i64::MAX))
                .encode(family.encode_family(&labels(s))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "informer_synced",
            "1 once an informer's first LIST is in its cache, else 0",
            None,
            MetricType::Gauge,
        )?;
        for s in &samples {
            ConstGauge::new(i64::from(s.synced)).encode(family.encode_family(&labels(s))?)?;
        }
        let counters: [CounterColumn; 4] = [
            (
                "informer_relists",
                "Full lists an informer made (the first, then one per 410 Gone)",
                |s| s.relists,
            ),
            (
                "informer_watch_restarts",
                "Watches an informer re-opened from its last resourceVersion",
                |s| s.watch_restarts,
            ),
            (
                "informer_bookmarks",
                "Periodic bookmarks an informer's watches received",
                |s| s.bookmarks,
            ),
            (
                "informer_dead_connections",
                "Watches and LISTs an informer found dead (silent past their idle limit)",
                |s| s.dead_connections,
            ),
        ];
        for (name, help, value) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for s in &samples {
                ConstCounter::new(value(s)).encode(family.encode_family(&labels(s))?)?;
            }
        }
        Ok(())
    }
}

/// The wires the informers' lists and watches were answered in, and the fallbacks to JSON.
struct WireCollector(WireCounters);

impl std::fmt::Debug for WireCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WireCollector")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WireLabels {
    request: &'static str,
    wire: &'static str,
}

impl prometheus_client::collector::Collector for WireCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.0.snapshot();
        let mut family = encoder.encode_descriptor(
            "informer_answers",
            "LIST answers and watch streams the informers read, by request and wire (protobuf \
             for the built-in kinds that have it, JSON otherwise)",
            None,
            MetricType::Counter,
        )?;
        for (request, wire, value) in [
            ("list", "protobuf", stats.protobuf_lists),
            ("list", "json", stats.json_lists),
            ("watch", "protobuf", stats.protobuf_watches),
            ("watch", "json", stats.json_watches),
        ] {
            ConstCounter::new(value)
                .encode(family.encode_family(&WireLabels { request, wire })?)?;
        }
        let family = encoder.encode_descriptor(
            "informer_protobuf_fallbacks",
            "Resources read as JSON since a protobuf answer of theirs did not decode",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(stats.fallbacks).encode(family)?;
        let family = encoder.encode_descriptor(
            "informer_gzip_lists",
            "LIST answers that arrived gzipped",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(stats.gzip_lists).encode(family)?;
        let family = encoder.encode_descriptor(
            "informer_gzip_failures",
            "Gzipped LIST answers that did not decompress (each LIST failed and was retried)",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(stats.gzip_failures).encode(family)?;
        let mut family = encoder.encode_descriptor(
            "informer_list_bytes",
            "Bytes of LIST bodies: as they came over the wire (compressed, when gzipped) and as \
             the decoders read them",
            None,
            MetricType::Counter,
        )?;
        for (stage, value) in [
            ("wire", stats.list_wire_bytes),
            ("decoded", stats.list_body_bytes),
        ] {
            ConstCounter::new(value).encode(family.encode_family(&StageLabels { stage })?)?;
        }
        Ok(())
    }
}

impl crate::oci::PullObserver for Metrics {
    fn pulled(&self, plugin: &str, ok: bool) {
        self.oci_pulled(plugin, ok);
    }

    fn precompiled_refused(&self, plugin: &str, reason: &str) {
        self.precompiled_refused
            .get_or_create(&RefusedLabels {
                plugin: plugin.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_the_informers_wires() {
        let wire = kubewasm_informer::WireCounters::default();
        let metrics = Metrics::new(Arc::new(Vec::new)).with_wire(wire);
        let text = metrics.encode();
        for line in [
            r#"kubewasm_informer_answers_total{request="list",wire="protobuf"} 0"#,
            r#"kubewasm_informer_answers_total{request="watch",wire="json"} 0"#,
            "kubewasm_informer_protobuf_fallbacks_total 0",
            "kubewasm_informer_gzip_lists_total 0",
            "kubewasm_informer_gzip_failures_total 0",
            r#"kubewasm_informer_list_bytes_total{stage="wire"} 0"#,
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn encodes_plugin_and_informer_metrics() {
        let metrics = Metrics::new(Arc::new(|| {
            vec![InformerSample {
                resource: "v1/configmaps".into(),
                objects: 7,
                relists: 2,
                bookmarks: 4,
                dead_connections: 1,
                synced: true,
                ..Default::default()
            }]
        }));
        metrics.set_plugin_source(Arc::new(|| {
            vec![PluginSample {
                plugin: "diff".into(),
                queue_depth: 3,
                resyncs_skipped: 4,
                failed: true,
                workqueue: None,
                memory_bytes: 1 << 20,
            }]
        }));
        let diff = metrics.plugin_metrics("diff", &["ConfigMap".to_owned()]);
        diff.event_handled(0, EventKind::Add, true);
        diff.handler_called(Duration::from_micros(40));
        diff.event_handled(0, EventKind::Add, true);
        diff.handler_called(Duration::from_micros(40));
        diff.instance_failed(FailureKind::Trap);
        diff.events_dropped(DropReason::Replaced, 5);
        metrics.reloaded("diff", false, Duration::ZERO);
        metrics.set_leader("kubewasm", true);
        metrics.set_leader("kubewasm", false);
        let text = metrics.encode();
        for line in [
            r#"kubewasm_plugin_events_total{plugin="diff",resource="ConfigMap",event="add",outcome="ok"} 2"#,
            r#"kubewasm_plugin_failures_total{plugin="diff",kind="trap"} 1"#,
            r#"kubewasm_plugin_events_dropped_total{plugin="diff",reason="replaced"} 5"#,
            r#"kubewasm_plugin_reloads_total{plugin="diff",result="failed"} 1"#,
            r#"kubewasm_plugin_queue_depth{plugin="diff"} 3"#,
            r#"kubewasm_plugin_failed{plugin="diff"} 1"#,
            r#"kubewasm_plugin_memory_bytes{plugin="diff"} 1048576"#,
            r#"kubewasm_plugin_resyncs_skipped_total{plugin="diff"} 4"#,
            r#"kubewasm_leader{lease="kubewasm"} 0"#,
            r#"kubewasm_informer_objects{resource="v1/configmaps",namespace="",selector=""} 7"#,
            r#"kubewasm_informer_synced{resource="v1/configmaps",namespace="",selector=""} 1"#,
            r#"kubewasm_informer_relists_total{resource="v1/configmaps",namespace="",selector=""} 2"#,
            r#"kubewasm_informer_bookmarks_total{resource="v1/configmaps",namespace="",selector=""} 4"#,
            r#"kubewasm_informer_dead_connections_total{resource="v1/configmaps",namespace="",selector=""} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn workqueue_and_write_metrics_are_named_as_client_gos_and_removed_with_the_plugin() {
        let metrics = Metrics::new(Arc::new(Vec::new));
        let loaded = Arc::new(Mutex::new(vec![PluginSample {
            plugin: "ctl".into(),
            workqueue: Some(QueueStats {
                processing: 1,
                waiting: 100_000,
                unfinished_work: Duration::from_millis(1500),
                longest_running: Duration::from_millis(1500),
                ..QueueStats::default()
            }),
            ..PluginSample::default()
        }]));
        let source = loaded.clone();
        metrics.set_plugin_source(Arc::new(move || source.lock().clone()));
        let queue = metrics.queue_metrics("ctl");
        queue.add();
        queue.add();
        queue.depth(2);
        queue.queue_latency(Duration::from_millis(3));
        queue.work_duration(Duration::from_millis(4));
        queue.retry();
        let writes = metrics.write_metrics("ctl");
        writes.write_call("ctl", WriteVerb::Create, "Deployment", "2xx");
        writes.write_call("ctl", WriteVerb::Create, "Deployment", "2xx");
        writes.write_call("ctl", WriteVerb::Patch, "Foo", "409");
        queue.refused(QueueRefusal::Full);
        queue.refused(QueueRefusal::Full);
        queue.reconcile_error();
        queue.reconciled(ReconcileResult::Ok, Duration::from_micros(30));
        queue.reconciled(ReconcileResult::Ok, Duration::from_micros(30));
        queue.reconciled(ReconcileResult::Refused, Duration::from_millis(2));
        assert_eq!(metrics.plugin_counts("ctl").call_seconds, 0.00206);
        writes.refused("ctl", Refusal::NotLeader);
        writes.event_dropped("ctl");
        let text = metrics.encode();
        for line in [
            r#"workqueue_depth{name="ctl"} 2"#,
            r#"workqueue_adds_total{name="ctl"} 2"#,
            r#"workqueue_retries_total{name="ctl"} 1"#,
            r#"workqueue_queue_duration_seconds_count{name="ctl"} 1"#,
            r#"workqueue_work_duration_seconds_bucket{le="0.01",name="ctl"} 1"#,
            r#"workqueue_unfinished_work_seconds{name="ctl"} 1.5"#,
            r#"workqueue_longest_running_processor_seconds{name="ctl"} 1.5"#,
            r#"kubewasm_plugin_workqueue_waiting{plugin="ctl"} 100000"#,
            r#"kubewasm_plugin_write_calls_total{plugin="ctl",verb="create",resource="Deployment",code="2xx"} 2"#,
            r#"kubewasm_plugin_write_calls_total{plugin="ctl",verb="patch",resource="Foo",code="409"} 1"#,
            r#"kubewasm_plugin_queue_adds_refused_total{plugin="ctl",reason="full"} 2"#,
            r#"kubewasm_plugin_queue_adds_refused_total{plugin="ctl",reason="key-too-long"} 0"#,
            r#"kubewasm_plugin_reconcile_errors_total{plugin="ctl"} 1"#,
            r#"kubewasm_plugin_reconcile_total{plugin="ctl",result="ok"} 2"#,
            r#"kubewasm_plugin_reconcile_total{plugin="ctl",result="refused"} 1"#,
            r#"kubewasm_plugin_reconcile_total{plugin="ctl",result="fault"} 0"#,
            r#"kubewasm_plugin_reconcile_duration_seconds_count{plugin="ctl"} 3"#,
            r#"kubewasm_plugin_reconcile_duration_seconds_bucket{le="0.00004",plugin="ctl"} 2"#,
            r#"kubewasm_plugin_writes_refused_total{plugin="ctl",reason="not-leader"} 1"#,
            r#"kubewasm_plugin_writes_refused_total{plugin="ctl",reason="not-granted"} 0"#,
            r#"kubewasm_plugin_recorded_events_dropped_total{plugin="ctl"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        assert_eq!(text.matches("# EOF").count(), 1, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        loaded.lock().clear();
        metrics.remove_plugin("ctl");
        // A write of the unloaded plugin that ends late makes no series.
        writes.write_call("ctl", WriteVerb::Create, "Event", "2xx");
        let text = metrics.encode();
        assert!(!text.contains(r#""ctl""#), "{text}");
    }

    #[test]
    fn a_removed_plugin_leaves_no_series_and_a_reload_shares_them() {
        let metrics = Metrics::new(Arc::new(Vec::new));
        let v1 = metrics.plugin_metrics("gone", &["Pod".to_owned()]);
        let v2 = metrics.plugin_metrics("gone", &["Pod".to_owned()]);
        v1.event_handled(0, EventKind::Update, false);
        v2.event_handled(0, EventKind::Update, false);
        metrics.plugin_metrics("stays", &["Pod".to_owned()]);
        metrics.reloaded("gone", true, Duration::ZERO);
        let text = metrics.encode();
        assert!(text.contains(
            r#"kubewasm_plugin_events_total{plugin="gone",resource="Pod",event="update",outcome="error"} 2"#
        ), "{text}");
        metrics.remove_plugin("gone");
        let text = metrics.encode();
        assert!(!text.contains(r#"plugin="gone""#), "{text}");
        assert!(text.contains(r#"plugin="stays""#), "{text}");
    }
}
