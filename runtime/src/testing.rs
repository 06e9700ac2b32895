//! Test support: objects served by an in-memory lister-watcher to a real informer (the host's
//! own subscriber and cache paths run on it), and a helper that starts the probe guest as a
//! plugin actor subscribed to ConfigMaps on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kubewasm_informer::testing::FakeListerWatcher;
use kubewasm_informer::{InformerOptions, Object, ObjectRef, SharedIndexInformer};

use crate::cache::access::{Access, ResourceAccess};
use crate::events::event_loop::{ActorConfig, ActorHandle, RestartPolicy};
use crate::events::informers::{EventSource, InformerCache, InformerSubscriber, ensure_index};
use crate::guest::calls::Outcome;
use crate::guest::instance::{Declaration, Instance, Recipe};
use crate::guest::log_gate::{LogGate, LogLimits};
use crate::model::declared::Gvk;
use crate::model::grants::{Grants, Limits, same_type};
use crate::observer::{NoopObserver, PluginObserver};
use crate::wasm::engine::{EngineOptions, PluginEngine};

pub(crate) fn config_map_gvk() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

fn config_map_value(ns: &str, name: &str, labels: &[(&str, &str)]) -> serde_json::Value {
    let labels: BTreeMap<_, _> = labels.iter().copied().collect();
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "data": {"k": "v"}
    })
}

/// A ConfigMap's JSON (the server stamps its resourceVersion).
pub(crate) fn config_map_json(ns: &str, name: &str, labels: &[(&str, &str)]) -> String {
    config_map_value(ns, name, labels).to_string()
}

/// A ConfigMap at resourceVersion `rv` as the cache holds it, for tests without an informer.
pub(crate) fn config_map(ns: &str, name: &str, rv: u64, labels: &[(&str, &str)]) -> ObjectRef {
    let mut json = config_map_value(ns, name, labels);
    json["metadata"]["resourceVersion"] = rv.to_string().into();
    Arc::new(Object::from_json(&json.to_string()).expect("a ConfigMap"))
}

/// A collection in an in-memory lister-watcher and the real informer over it: what the host's
/// informer of a subscription is, without an API server.
pub(crate) struct TestInformer {
    server: Arc<FakeListerWatcher>,
    pub(crate) informer: SharedIndexInformer,
}

impl TestInformer {
    /// An empty collection; the informer starts with [`start`](Self::start).
    pub(crate) fn new() -> Arc<Self> {
        let server = Arc::new(FakeListerWatcher::new());
        let informer = SharedIndexInformer::new(server.clone(), InformerOptions::default());
        Arc::new(TestInformer { server, informer })
    }

    /// Creates or replaces an object (its JSON); before [`start`](Self::start) it is part of
    /// the initial list. Returns the resourceVersion it got.
    pub(crate) fn upsert(&self, json: String) -> u64 {
        self.server.upsert(&json).expect("a named object")
    }

    /// Deletes the object with store key `key` (`namespace/name`).
    pub(crate) fn delete(&self, key: &str) {
        self.server.delete(key).expect("the object exists");
    }

    /// Starts the informer (once) and waits until it has synced.
    pub(crate) async fn start(&self) {
        self.informer.start();
        assert!(self.informer.wait_synced().await, "the informer synced");
    }

    /// The plugin's cache view, as the host builds it.
    pub(crate) fn cache(&self) -> Arc<InformerCache> {
        Arc::new(InformerCache {
            informer: self.informer.clone(),
            indexer: self.informer.indexer(),
        })
    }

    /// The plugin's handlers' registration, as the host builds it (subscription 0).
    pub(crate) fn subscriber(&self) -> InformerSubscriber {
        InformerSubscriber {
            sources: vec![EventSource {
                subscription: 0,
                informer: self.informer.clone(),
                resync: None,
            }],
        }
    }
}

/// The shared engine of the unit tests (one per test process, as in the host).
pub(crate) fn engine() -> PluginEngine {
    static ENGINE: std::sync::OnceLock<PluginEngine> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| PluginEngine::new(EngineOptions::default()).expect("engine"))
        .clone()
}

/// Starts the probe as plugin `name` subscribed to the ConfigMaps of `feed` (the informer
/// started first), with `extra` merged into its config (e.g. `{"mode": "trap"}`). The probe's
/// index declarations become indexes of the informer, as the host adds them.
pub(crate) async fn spawn_probe(
    name: &str,
    extra: serde_json::Value,
    limits: Limits,
    grants: Grants,
    feed: Arc<TestInformer>,
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
    feed: Arc<TestInformer>,
    options: ProbeOptions,
) -> ActorHandle {
    let ProbeOptions {
        restart,
        logs,
        observer,
    } = options;
    kubewasm_tests::guest_logs();
    feed.start().await;
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
    for decl in info
        .indexes
        .iter()
        .filter(|d| same_type(&d.gvk, &config_map_gvk()))
    {
        let shared = ensure_index(
            &feed.informer,
            &decl.source,
            &crate::model::grants::DeclarationLimits::default(),
        )
        .expect("index");
        indexes.insert(decl.name.clone(), shared);
    }
    let access = Arc::new(Access {
        grants,
        resources: vec![ResourceAccess {
            resource: config_map_gvk(),
            cache: feed.cache(),
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
            subscriber: Box::new(feed.subscriber()),
            observer,
            restart,
        },
        instance,
    )
}
