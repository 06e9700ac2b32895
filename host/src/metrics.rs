//! Prometheus metrics: what the plugins and informers did, in the text exposition format.
//!
//! Plugin counters are pushed as events happen; informer figures (objects cached, relists, watch
//! restarts) are read from the informers on each scrape through [`InformerSource`].

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

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
}

/// Reads the informers' figures at scrape time.
pub type InformerSource = Arc<dyn Fn() -> Vec<InformerSample> + Send + Sync>;

/// Every metric kubewasm exports.
pub struct Metrics {
    registry: Registry,
    events: Family<EventLabels, Counter>,
    handler_seconds: Family<PluginLabels, Histogram>,
    queue_depth: Family<PluginLabels, Gauge>,
    failures: Family<FailureLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    reload_seconds: Histogram,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Creates the metrics; `informers` is read on every scrape.
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
            "Time a plugin took to handle one event",
            handler_seconds.clone(),
        );
        let queue_depth = Family::<PluginLabels, Gauge>::default();
        registry.register(
            "plugin_queue_depth",
            "Events waiting in a plugin's queue",
            queue_depth.clone(),
        );
        let failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "plugin_failures",
            "Plugin instances replaced after a trap, a timeout or a memory blow-up",
            failures.clone(),
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
        registry.register_collector(Box::new(InformerCollector(informers)));
        Metrics {
            registry,
            events,
            handler_seconds,
            queue_depth,
            failures,
            reloads,
            reload_seconds,
        }
    }

    /// Records one handled event.
    pub fn event_handled(
        &self,
        plugin: &str,
        resource: &str,
        event: &str,
        elapsed: Duration,
        ok: bool,
    ) {
        self.events
            .get_or_create(&EventLabels {
                plugin: plugin.to_string(),
                resource: resource.to_string(),
                event: event.to_string(),
                outcome: if ok { "ok" } else { "error" }.to_string(),
            })
            .inc();
        self.handler_seconds
            .get_or_create(&PluginLabels {
                plugin: plugin.to_string(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Records that a plugin instance was replaced; `kind` is `trap`, `timeout` or `memory`.
    pub fn instance_failed(&self, plugin: &str, kind: &str) {
        self.failures
            .get_or_create(&FailureLabels {
                plugin: plugin.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    pub fn queue_depth(&self, plugin: &str, depth: usize) {
        self.queue_depth
            .get_or_create(&PluginLabels {
                plugin: plugin.to_string(),
            })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
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

    /// The metrics in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl crate::plugin::Observer for Metrics {
    fn event_handled(
        &self,
        plugin: &str,
        resource: &str,
        kind: crate::plugin::EventKind,
        elapsed: Duration,
        ok: bool,
    ) {
        Metrics::event_handled(self, plugin, resource, kind.as_str(), elapsed, ok);
    }

    fn instance_failed(&self, plugin: &str, failure: crate::plugin::FailureKind) {
        Metrics::instance_failed(self, plugin, failure.as_str());
    }

    fn queue_depth(&self, plugin: &str, depth: usize) {
        Metrics::queue_depth(self, plugin, depth);
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
        let counters: [CounterColumn; 2] = [
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_plugin_and_informer_metrics() {
        let metrics = Metrics::new(Arc::new(|| {
            vec![InformerSample {
                resource: "v1/configmaps".into(),
                objects: 7,
                relists: 2,
                ..Default::default()
            }]
        }));
        metrics.event_handled(
            "diff",
            "v1/configmaps",
            "add",
            Duration::from_micros(40),
            true,
        );
        metrics.event_handled(
            "diff",
            "v1/configmaps",
            "add",
            Duration::from_micros(40),
            true,
        );
        metrics.instance_failed("diff", "trap");
        metrics.reloaded("diff", false, Duration::ZERO);
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"kubewasm_plugin_events_total{plugin="diff",resource="v1/configmaps",event="add",outcome="ok"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"kubewasm_plugin_failures_total{plugin="diff",kind="trap"} 1"#));
        assert!(text.contains(r#"kubewasm_plugin_reloads_total{plugin="diff",result="failed"} 1"#));
        assert!(text.contains(
            r#"kubewasm_informer_objects{resource="v1/configmaps",namespace="",selector=""} 7"#
        ));
        assert!(text.contains(
            r#"kubewasm_informer_relists_total{resource="v1/configmaps",namespace="",selector=""} 2"#
        ));
    }
}
