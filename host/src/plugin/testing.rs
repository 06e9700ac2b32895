//! Test support: an in-memory cache and event feed standing in for the informers, and a
//! helper that starts the probe guest as a plugin actor on them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::access::{Access, NAMESPACE_INDEX, ResourceAccess, ResourceCache, SharedDocument};
use super::actor::{ActorConfig, ActorHandle, RestartPolicy};
use super::calls::Outcome;
use super::engine::{EngineOptions, PluginEngine};
use super::grants::{Grants, Limits};
use super::inbox::Event;
use super::inbox::{EventSink, Subscribed, Subscriber};
use super::instance::{Declaration, Instance, Recipe};
use super::log_gate::{LogGate, LogLimits};
use super::observer::{NoopObserver, PluginObserver};
use super::{Gvk, IndexSource};

pub(crate) fn config_map_gvk() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

/// A ConfigMap's JSON.
pub(crate) fn config_map(ns: &str, name: &str, rv: u64, labels: &[(&str, &str)]) -> SharedDocument {
    let labels: BTreeMap<_, _> = labels.iter().copied().collect();
    Arc::new(
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": ns, "name": name, "resourceVersion": rv.to_string(),
                         "labels": labels},
            "data": {"k": "v"}
        })
        .to_string(),
    )
}

#[derive(serde::Deserialize)]
struct Meta {
    metadata: MetaInner,
}
#[derive(serde::Deserialize)]
struct MetaInner {
    namespace: Option<String>,
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

fn meta(doc: &SharedDocument) -> MetaInner {
    serde_json::from_str::<Meta>(doc.json())
        .expect("test objects have metadata")
        .metadata
}

/// An in-memory cache and event source for one resource: the informer's role in unit tests.
#[derive(Default)]
pub(crate) struct FakeFeed {
    objects: Mutex<BTreeMap<String, SharedDocument>>,
    sinks: Mutex<Vec<(EventSink, Arc<AtomicBool>)>>,
    /// Label indexes by cache index name.
    label_indexes: Mutex<HashMap<String, String>>,
}

impl FakeFeed {
    fn key(doc: &SharedDocument) -> String {
        let m = meta(doc);
        format!("{}/{}", m.namespace.unwrap_or_default(), m.name)
    }

    /// Adds an object before any handler is registered (part of the replay).
    pub(crate) fn seed(&self, doc: SharedDocument) {
        self.objects.lock().insert(Self::key(&doc), doc);
    }

    pub(crate) fn add_label_index(&self, name: &str, label: &str) {
        self.label_indexes.lock().insert(name.into(), label.into());
    }

    fn live_sinks(&self) -> Vec<EventSink> {
        self.sinks
            .lock()
            .iter()
            .filter(|(_, alive)| alive.load(Ordering::Acquire))
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// Stores the object and tells every registered handler (add or update).
    pub(crate) fn upsert(&self, doc: SharedDocument) {
        let old = self.objects.lock().insert(Self::key(&doc), doc.clone());
        for sink in self.live_sinks() {
            sink.push(match &old {
                Some(old) => Event::Update {
                    old: old.clone(),
                    new: doc.clone(),
                },
                None => Event::Add {
                    object: doc.clone(),
                    in_initial_list: false,
                },
            });
            sink.flush();
        }
    }

    pub(crate) fn delete(&self, doc: &SharedDocument) {
        if let Some(old) = self.objects.lock().remove(&Self::key(doc)) {
            for sink in self.live_sinks() {
                sink.push(Event::Delete {
                    object: old.clone(),
                    final_state_unknown: false,
                });
                sink.flush();
            }
        }
    }
}

struct FakeRegistration(Arc<AtomicBool>);

impl Drop for FakeRegistration {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Subscribed for FakeRegistration {
    fn synced(&self) -> bool {
        true
    }
}

impl Subscriber for Arc<FakeFeed> {
    fn subscribe(&self, sink: &EventSink) -> Box<dyn Subscribed> {
        let alive = Arc::new(AtomicBool::new(true));
        // Hold the object lock while replaying and registering: nothing lost or doubled.
        let objects = self.objects.lock();
        for doc in objects.values() {
            sink.push(Event::Add {
                object: doc.clone(),
                in_initial_list: true,
            });
        }
        sink.flush();
        self.sinks.lock().push((sink.clone(), alive.clone()));
        drop(objects);
        Box::new(FakeRegistration(alive))
    }
}

impl ResourceCache for FakeFeed {
    fn get(&self, namespace: Option<&str>, name: &str) -> Option<SharedDocument> {
        self.objects
            .lock()
            .get(&format!("{}/{name}", namespace.unwrap_or_default()))
            .cloned()
    }

    fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<SharedDocument>, String> {
        let wanted = match label_selector {
            Some(s) => Some(s.split_once('=').ok_or("only k=v selectors here")?),
            None => None,
        };
        Ok(self
            .objects
            .lock()
            .values()
            .filter(|d| {
                let m = meta(d);
                namespace.is_none_or(|ns| m.namespace.as_deref() == Some(ns))
                    && wanted.is_none_or(|(k, v)| m.labels.get(k).map(String::as_str) == Some(v))
            })
            .cloned()
            .collect())
    }

    fn by_index(&self, index: &str, value: &str) -> Result<Vec<SharedDocument>, String> {
        let label = if index == NAMESPACE_INDEX {
            None
        } else {
            Some(
                self.label_indexes
                    .lock()
                    .get(index)
                    .cloned()
                    .ok_or_else(|| format!("no index {index}"))?,
            )
        };
        Ok(self
            .objects
            .lock()
            .values()
            .filter(|d| {
                let m = meta(d);
                match &label {
                    None => m.namespace.as_deref() == Some(value),
                    Some(l) => m.labels.get(l).map(String::as_str) == Some(value),
                }
            })
            .cloned()
            .collect())
    }

    fn index_values(&self, index: &str) -> Result<Vec<String>, String> {
        let label = self
            .label_indexes
            .lock()
            .get(index)
            .cloned()
            .ok_or_else(|| format!("no index {index}"))?;
        let mut values: Vec<String> = self
            .objects
            .lock()
            .values()
            .filter_map(|d| meta(d).labels.get(&label).cloned())
            .collect();
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn has_synced(&self) -> bool {
        true
    }
}

/// The shared engine of the unit tests (one per test process, as in the host).
pub(crate) fn engine() -> PluginEngine {
    static ENGINE: std::sync::OnceLock<PluginEngine> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| PluginEngine::new(EngineOptions::default()).expect("engine"))
        .clone()
}

/// Starts the probe as plugin `name` subscribed to ConfigMaps on `feed`, with `extra` merged
/// into its config (e.g. `{"mode": "trap"}`). Index declarations of the probe named
/// `by-<label>` become label indexes of the feed.
pub(crate) async fn spawn_probe(
    name: &str,
    extra: serde_json::Value,
    limits: Limits,
    grants: Grants,
    feed: Arc<FakeFeed>,
) -> ActorHandle {
    spawn_probe_with(name, extra, limits, grants, feed, ProbeOptions::default()).await
}

/// What [`spawn_probe_with`] sets besides [`spawn_probe`]'s arguments.
pub(crate) struct ProbeOptions {
    pub(crate) restart: RestartPolicy,
    pub(crate) logs: LogLimits,
    pub(crate) observer: Arc<dyn PluginObserver>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            restart: RestartPolicy::default(),
            logs: LogLimits::default(),
            observer: Arc::new(NoopObserver),
        }
    }
}

/// [`spawn_probe`] with a restart policy, log limits and an observer.
pub(crate) async fn spawn_probe_with(
    name: &str,
    extra: serde_json::Value,
    limits: Limits,
    grants: Grants,
    feed: Arc<FakeFeed>,
    options: ProbeOptions,
) -> ActorHandle {
    let ProbeOptions {
        restart,
        logs,
        observer,
    } = options;
    kubewasm_tests::guest_logs();
    let compiled = engine()
        .compile(
            std::path::Path::new("probe.wasm"),
            kubewasm_tests::guest_bytes("probe"),
        )
        .await
        .expect("probe compiles");
    let mut config = serde_json::json!({
        "name": name,
        "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let config = config.to_string();
    let label: Arc<str> = name.into();
    let log_gate = Arc::new(LogGate::new(logs));
    let mut instance = Instance::new(
        &compiled,
        label.clone(),
        limits,
        Arc::new(Access::empty(grants.clone())),
        log_gate.clone(),
    )
    .await
    .expect("probe instantiates");
    let info = match instance.init(&config).await {
        Outcome::Ok(Declaration::V0_1(info)) => info,
        other => panic!("probe init: {other:?}"),
    };
    let mut indexes = HashMap::new();
    for decl in &info.indexes {
        if let IndexSource::Label(l) = &decl.source {
            let cache_name = format!("label:{l}");
            feed.add_label_index(&cache_name, l);
            indexes.insert(decl.name.clone(), cache_name);
        }
    }
    let access = Arc::new(Access {
        grants,
        resources: vec![ResourceAccess {
            resource: config_map_gvk(),
            cache: feed.clone(),
            indexes,
        }],
    });
    instance.set_access(access.clone());
    ActorHandle::spawn(
        ActorConfig {
            recipe: Recipe {
                compiled,
                name: label,
                config,
                limits,
                access,
                log_gate,
                memory: instance.memory_use(),
                context: None,
            },
            resources: vec![config_map_gvk()],
            subscriber: Box::new(feed),
            observer,
            restart,
        },
        instance,
    )
}
