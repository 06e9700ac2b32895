//! End-to-end test of the configmap-propagator examples (contract 0.2) in JavaScript and in C,
//! as `cargo xtask build-guests` builds them into `target/plugins/`. Each runs in a `PluginHost`
//! over the shared informers on one development API server (one language after the other, with
//! its own namespaces and ConfigMaps) and must keep a copy of every ConfigMap labelled
//! `kubewasm.io/propagate=true` in every other namespace: through updates, new namespaces,
//! copies deleted or edited by hand, injected 409 / 500 / 429 write answers and a reload in the
//! middle of a burst of changes, and remove the copies when the source loses its label or is
//! deleted. Every check reads the cluster's objects; the guest's log only counts reconciles. The
//! same scenario, without the injected errors and the reload, runs on a real kube-apiserver
//! (`real::`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kubewasm::config::Config;
use kubewasm_devserver::{DevServer, Verb};
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{HostOptions, PluginHost, PluginPolicy};
use kubewasm_tests::server::TestServer;
use kubewasm_tests::{guest_logs, guest_path, variant, wait_until, workspace_root};
use serde_json::{Value, json};

use crate::fixture::{self, plugin_host, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(60);

const PROPAGATE: &str = "kubewasm.io/propagate";
const COPY_LABEL: &str = "kubewasm.io/propagated";
const SOURCE_ANNOTATION: &str = "kubewasm.io/propagated-from";

/// The component `configmap-propagator-LANG` (see [`kubewasm_tests::guest_path`]), with its
/// bytes.
fn example(language: &str) -> (PathBuf, Vec<u8>) {
    let path = guest_path(&format!("configmap-propagator-{language}"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"));
    (path, bytes)
}

/// The policy `cargo xtask dev` gives the plugin: its entry in `examples/kubewasm-dev.toml`
/// (write grants for ConfigMaps and Events, and a write rate for one write per namespace).
fn policy(plugin: &str) -> PluginPolicy {
    let path = workspace_root().join("examples/kubewasm-dev.toml");
    let config = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let policy = config.policy_for(plugin);
    assert!(
        !policy.writes.is_empty(),
        "{} grants {plugin} no writes",
        path.display()
    );
    policy
}

/// One language's propagator loaded on the shared server.
struct Case<'a> {
    language: &'static str,
    plugin: String,
    server: &'a TestServer,
    client: Client,
    factory: SharedInformerFactory,
    host: PluginHost,
}

impl Case<'_> {
    async fn start<'a>(server: &'a TestServer, language: &'static str) -> Case<'a> {
        let client = server.client();
        let plugin = format!("configmap-propagator-{language}");
        let policy = policy(&plugin);
        let (factory, host) = plugin_host(
            &client,
            HostOptions {
                cache_dir: fixture::shared_compile_cache(),
                ..policy_by_file(move |_: &Path| policy.clone())
            },
        );
        Case {
            language,
            plugin,
            server,
            client,
            factory,
            host,
        }
    }

    /// A name of this case's own (namespaces and ConfigMaps), so the cases never meet.
    fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.language)
    }

    fn config_maps(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn create_namespace(&self, name: &str) {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
    }

    /// Creates ConfigMap `namespace/name`, labelled as a source when `source`.
    async fn create(&self, namespace: &str, name: &str, source: bool, data: Value) {
        let labels = if source {
            json!({PROPAGATE: "true"})
        } else {
            json!({})
        };
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "data": data,
        }))
        .expect("ConfigMap");
        self.config_maps(namespace)
            .create(&PostParams::default(), &cm)
            .await
            .expect("create ConfigMap");
    }

    /// A merge patch (the test's own writes are PATCHes, the propagators' are creates and
    /// updates, so injected faults on those verbs only hit the propagator).
    async fn patch(&self, namespace: &str, name: &str, patch: Value) {
        self.config_maps(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("patch ConfigMap");
    }

    async fn delete(&self, namespace: &str, name: &str) {
        self.config_maps(namespace)
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete ConfigMap");
    }

    /// Every namespace that should hold a copy of a source in `source_namespace`.
    async fn other_namespaces(&self, source_namespace: &str) -> Vec<String> {
        Api::<Namespace>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("list namespaces")
            .items
            .into_iter()
            .filter_map(|ns| ns.metadata.name)
            .filter(|ns| ns != source_namespace)
            .collect()
    }

    /// Every ConfigMap named `name`, by namespace.
    async fn named(&self, name: &str) -> BTreeMap<String, ConfigMap> {
        Api::<ConfigMap>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .expect("list ConfigMaps")
            .items
            .into_iter()
            .filter(|cm| cm.metadata.name.as_deref() == Some(name))
            .filter_map(|cm| Some((cm.metadata.namespace.clone()?, cm)))
            .collect()
    }

    /// `Ok` when every namespace but the source's (and those in `except`) holds an exact copy of
    /// `source_namespace/name` with `data`; else what is wrong.
    async fn copies_are(
        &self,
        source_namespace: &str,
        name: &str,
        data: &Value,
        except: &[&str],
    ) -> Result<(), String> {
        let source_ref = format!("{source_namespace}/{name}");
        let found = self.named(name).await;
        for namespace in self.other_namespaces(source_namespace).await {
            if except.contains(&namespace.as_str()) {
                continue;
            }
            let Some(copy) = found.get(&namespace) else {
                return Err(format!("no copy of {source_ref} in {namespace}"));
            };
            let meta = &copy.metadata;
            let annotation = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(SOURCE_ANNOTATION));
            let labels = meta.labels.clone().unwrap_or_default();
            let copy_data = serde_json::to_value(&copy.data).expect("data");
            if annotation != Some(&source_ref)
                || labels.get(COPY_LABEL).map(String::as_str) != Some("true")
                || labels.contains_key(PROPAGATE)
                || meta
                    .owner_references
                    .as_ref()
                    .is_some_and(|o| !o.is_empty())
                || &copy_data != data
            {
                return Err(format!(
                    "the copy in {namespace} is not a copy of {source_ref} with {data}: \
                     data {copy_data}, labels {labels:?}, annotation {annotation:?}, owners {:?}",
                    meta.owner_references
                ));
            }
        }
        Ok(())
    }

    /// `Ok` when no copy of `source_namespace/name` is left anywhere.
    async fn no_copies(&self, source_namespace: &str, name: &str) -> Result<(), String> {
        let source_ref = format!("{source_namespace}/{name}");
        let left: Vec<String> = self
            .named(name)
            .await
            .into_iter()
            .filter(|(_, cm)| {
                cm.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SOURCE_ANNOTATION))
                    == Some(&source_ref)
            })
            .map(|(namespace, _)| namespace)
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("copies of {source_ref} left in {left:?}"))
        }
    }

    /// Waits until `check` answers `Ok`; panics with its last answer and the plugin's state.
    async fn converge<F>(&self, what: &str, mut check: impl FnMut() -> F)
    where
        F: std::future::Future<Output = Result<(), String>>,
    {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let mut last = check().await;
        while last.is_err() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
            last = check().await;
        }
        if let Err(wrong) = last {
            panic!(
                "{}: {what}: {wrong}\nguest log: {:#?}\nhost: {:#?}\nstatus: {:#?}",
                self.plugin,
                guest_logs().lines(&self.plugin),
                guest_logs().host_lines(&self.plugin),
                self.host.plugins()
            );
        }
    }

    /// How many reconciles of the source `namespace/name` the guest has logged.
    fn reconciles(&self, namespace: &str, name: &str) -> usize {
        let prefix = format!("reconciled {namespace}/{name}:");
        guest_logs()
            .lines(&self.plugin)
            .iter()
            .filter(|line| line.starts_with(&prefix))
            .count()
    }

    /// Whether the guest's last reconcile of `namespace/name` found nothing to write.
    fn settled(&self, namespace: &str, name: &str) -> bool {
        let prefix = format!("reconciled {namespace}/{name}:");
        guest_logs()
            .lines(&self.plugin)
            .iter()
            .rev()
            .find(|line| line.starts_with(&prefix))
            .is_some_and(|line| line.contains(" 0 written, 0 failed,"))
    }

    /// The dev server, with its fault injection and request log; `None` on a real one.
    fn dev(&self) -> Option<&DevServer> {
        match self.server {
            TestServer::Dev(dev) => Some(dev),
            TestServer::Real(_) => None,
        }
    }

    /// The creates and updates of ConfigMaps the dev server answered or refused since the last
    /// `clear_requests`: the propagator's writes (the test itself only patches and deletes).
    fn propagator_writes(dev: &DevServer) -> usize {
        dev.requests()
            .iter()
            .filter(|r| r.resource == "configmaps" && matches!(r.verb, Verb::Create | Verb::Update))
            .count()
    }

    async fn stop(self) {
        self.host.shutdown(Duration::from_secs(5)).await;
        self.factory.shutdown().await;
    }
}

/// The whole scenario for one language.
async fn propagates(server: &TestServer, language: &'static str) {
    let case = Case::start(server, language).await;
    let (home, other) = (case.name("home"), case.name("other"));
    case.create_namespace(&home).await;
    case.create_namespace(&other).await;

    // A source that exists before the plugin loads: the replay of the initial list queues it.
    let early = case.name("early");
    case.create(&home, &early, true, json!({"k": "early"}))
        .await;
    // An unlabelled ConfigMap is never copied.
    let plain = case.name("plain");
    case.create(&home, &plain, false, json!({"k": "plain"}))
        .await;

    let (path, bytes) = example(language);
    let id = case
        .host
        .load(&path, bytes.clone())
        .await
        .unwrap_or_else(|e| panic!("loading {}: {e}", case.plugin));
    assert!(
        wait_until(PATIENCE, || case.host.ready()).await,
        "{} never finished its replay: {:?}",
        case.plugin,
        case.host.plugins()
    );
    let early_data = json!({"k": "early"});
    case.converge("the early source is copied", || {
        case.copies_are(&home, &early, &early_data, &[])
    })
    .await;

    // A labelled ConfigMap created now is copied into every other namespace.
    let settings = case.name("settings");
    case.create(&home, &settings, true, json!({"k": "v1"}))
        .await;
    let v1 = json!({"k": "v1"});
    case.converge("copies created", || {
        case.copies_are(&home, &settings, &v1, &[])
    })
    .await;
    assert!(case.no_copies(&home, &plain).await.is_ok());
    assert_eq!(case.named(&plain).await.len(), 1, "the plain one is alone");

    // The source changes: every copy follows (a key removed, another added).
    case.patch(&home, &settings, json!({"data": {"k": null, "k2": "v2"}}))
        .await;
    let v2 = json!({"k2": "v2"});
    case.converge("copies updated", || {
        case.copies_are(&home, &settings, &v2, &[])
    })
    .await;

    // A new namespace gets its copy.
    let new_namespace = case.name("new");
    case.create_namespace(&new_namespace).await;
    case.converge("a new namespace gets copies", || {
        case.copies_are(&home, &settings, &v2, &[])
    })
    .await;
    assert!(case.named(&settings).await.contains_key(&new_namespace));

    // A copy deleted by hand comes back; one edited by hand is put back.
    case.delete(&other, &settings).await;
    case.patch("default", &settings, json!({"data": {"k2": "tampered"}}))
        .await;
    case.converge("hand edits undone", || {
        case.copies_are(&home, &settings, &v2, &[])
    })
    .await;

    // A settled source costs no write: a change to it that its copies do not carry (an
    // annotation) is reconciled without writing anything.
    assert!(
        wait_until(PATIENCE, || case.settled(&home, &settings)).await,
        "{}: reconciles of a settled source keep writing: {:#?}",
        case.plugin,
        guest_logs().lines(&case.plugin)
    );
    if let Some(dev) = case.dev() {
        dev.clear_requests();
    }
    let before = case.reconciles(&home, &settings);
    case.patch(
        &home,
        &settings,
        json!({"metadata": {"annotations": {"touched": "yes"}}}),
    )
    .await;
    assert!(wait_until(PATIENCE, || case.reconciles(&home, &settings) > before).await);
    if let Some(dev) = case.dev() {
        let writes = Case::propagator_writes(dev);
        assert_eq!(writes, 0, "{}: writes for nothing", case.plugin);
    }

    // A namespace already holding someone else's ConfigMap of that name keeps it.
    let blocked = case.name("blocked");
    case.create(&other, &blocked, false, json!({"mine": "yes"}))
        .await;
    case.create(&home, &blocked, true, json!({"k": "b"})).await;
    let (blocked_data, foreign_namespace) = (json!({"k": "b"}), [other.as_str()]);
    case.converge("copies beside a foreign ConfigMap", || {
        case.copies_are(&home, &blocked, &blocked_data, &foreign_namespace)
    })
    .await;
    let foreign = &case.named(&blocked).await[&other];
    assert_eq!(
        serde_json::to_value(&foreign.data).expect("data"),
        json!({"mine": "yes"}),
        "the foreign ConfigMap is left alone"
    );

    // Injected write errors: each refused write is retried with the host's backoff, and the
    // copies converge with a bounded number of reconciles and writes (no hot loop).
    // The dev server injects them; a real one cannot.
    if let Some(dev) = case.dev() {
        let namespaces = case.other_namespaces(&home).await.len();
        // One write per copy, the two refused ones again, and a few more for copies the cache
        // showed stale (their update answers 409 and is retried).
        let bound = 2 * namespaces + 8;
        for (step, (verb, code)) in [
            (Verb::Update, 409),
            (Verb::Update, 500),
            (Verb::Create, 429),
        ]
        .into_iter()
        .enumerate()
        {
            dev.clear_requests();
            let before = case.reconciles(&home, &settings);
            let value = json!({"k2": format!("fault-{step}")});
            dev.fail_next(verb, 2, code);
            if verb == Verb::Create {
                // Copies to create: two deleted by hand.
                case.delete(&other, &settings).await;
                case.delete(&new_namespace, &settings).await;
                case.converge("copies recreated after 429s", || {
                    case.copies_are(&home, &settings, &v2, &[])
                })
                .await;
            } else {
                case.patch(&home, &settings, json!({"data": value.clone()}))
                    .await;
                case.converge(&format!("copies updated after {code}s"), || {
                    case.copies_are(&home, &settings, &value, &[])
                })
                .await;
                // The source's value for the next steps.
                if step == 1 {
                    case.patch(&home, &settings, json!({"data": {"k2": "v2"}}))
                        .await;
                    case.converge("copies back to v2", || {
                        case.copies_are(&home, &settings, &v2, &[])
                    })
                    .await;
                }
            }
            dev.fail_next(verb, 0, code);
            let reconciles = case.reconciles(&home, &settings) - before;
            let writes = Case::propagator_writes(dev);
            assert!(
                reconciles <= bound && writes <= bound,
                "{}: after {code}s: {reconciles} reconciles and {writes} writes for {namespaces} \
                 namespaces (bound {bound})",
                case.plugin
            );
        }
    }

    // A reload in the middle of a burst: the source changes continuously and new sources
    // appear while the plugin is replaced; every last value reaches every namespace. The new
    // version is compiled first (into the compile cache), so the burst spans the swap of
    // instances rather than a compile of many seconds. The reload is the host's, the same on
    // both servers: on a real one the burst runs without it (one compile less).
    let new_version = match case.dev() {
        Some(_) => {
            let new_version = variant(&bytes, 1);
            case.host
                .engine()
                .compile(&path, new_version.clone())
                .await
                .expect("compiling the new version");
            Some(new_version)
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let rounds_done = Arc::new(AtomicU32::new(0));
    let burst = {
        let (stop, rounds_done) = (stop.clone(), rounds_done.clone());
        let config_maps = case.config_maps(&home);
        let language = case.language;
        tokio::spawn(async move {
            let mut round = 0u32;
            let mut after_stop = 0;
            while after_stop < 10 {
                if stop.load(Ordering::Acquire) {
                    after_stop += 1;
                }
                round += 1;
                let patch = json!({"data": {"k2": format!("burst-{round}")}});
                config_maps
                    .patch(
                        &format!("{language}-settings"),
                        &PatchParams::default(),
                        &Patch::Merge(patch),
                    )
                    .await
                    .expect("patch in the burst");
                if round.is_multiple_of(5) {
                    let cm: ConfigMap = serde_json::from_value(json!({
                        "metadata": {
                            "name": format!("{language}-burst-{round}"),
                            "labels": {PROPAGATE: "true"},
                        },
                        "data": {"round": round.to_string()},
                    }))
                    .expect("ConfigMap");
                    config_maps
                        .create(&PostParams::default(), &cm)
                        .await
                        .expect("create in the burst");
                }
                rounds_done.store(round, Ordering::Release);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            round
        })
    };
    assert!(wait_until(PATIENCE, || rounds_done.load(Ordering::Acquire) >= 10).await);
    if let Some(new_version) = new_version {
        case.host
            .replace(id, new_version)
            .await
            .unwrap_or_else(|e| panic!("replacing {}: {e}", case.plugin));
    }
    stop.store(true, Ordering::Release);
    let rounds = burst.await.expect("burst");
    let last = json!({"k2": format!("burst-{rounds}")});
    case.converge("the burst's last value everywhere", || {
        case.copies_are(&home, &settings, &last, &[])
    })
    .await;
    for round in (5..=rounds).step_by(5) {
        let (name, data) = (
            case.name(&format!("burst-{round}")),
            json!({"round": round.to_string()}),
        );
        case.converge("each source of the burst copied", || {
            case.copies_are(&home, &name, &data, &[])
        })
        .await;
    }

    // The label removed: the copies go. The source deleted: its copies go.
    case.patch(
        &home,
        &settings,
        json!({"metadata": {"labels": {PROPAGATE: null}}}),
    )
    .await;
    case.converge("copies removed with the label", || {
        case.no_copies(&home, &settings)
    })
    .await;
    assert_eq!(case.named(&settings).await.len(), 1, "the source stays");
    case.delete(&home, &early).await;
    case.converge("copies removed with the source", || {
        case.no_copies(&home, &early)
    })
    .await;
    assert!(case.named(&early).await.is_empty());

    let status = case
        .host
        .plugins()
        .into_iter()
        .find(|p| p.name == case.plugin)
        .expect("status");
    assert_eq!(
        (status.traps, status.timeouts, status.memory_faults),
        (0, 0, 0),
        "{status:?}"
    );
    case.stop().await;
}

/// Both languages on one dev server, one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_js_and_c_propagators_keep_copies_in_every_namespace() {
    guest_logs();
    let server = TestServer::dev().await;
    for language in ["js", "c"] {
        propagates(&server, language).await;
    }
}

/// The same on a real kube-apiserver (`KUBEBUILDER_ASSETS`), without the injected errors and the
/// reload: what works on `kubewasm dev` works on a cluster.
mod real {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_js_and_c_propagators_keep_copies_in_every_namespace() {
        guest_logs();
        let server = TestServer::real().await;
        for language in ["js", "c"] {
            propagates(&server, language).await;
        }
    }
}
