//! Reload latency (run with `cargo bench -p kubewasm --bench reload`): from a new version of a
//! plugin file renamed into the watched plugins directory to that version having handled the
//! replay of a 1,000-object cache and a ConfigMap created right after the rename. Cold (the
//! component is new to the compile cache) and warm (compiled before). The guest is the small
//! Rust probe (~170 KB). The file is written just before the rename, as a deploy does, so the
//! latency includes the reloader's debounce (a file must be unmodified that long before it is
//! loaded). Median of `ROUNDS` rounds; prints a Markdown section.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm::app::HostLoader;
use kubewasm::reload::Reloader;
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::{
    EventKind, HostOptions, Observer, PluginHost, PluginObserver, PluginPolicy,
};
use kubewasm_tests::variant;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const OBJECTS: usize = 1_000;
const ROUNDS: u32 = 7;
const NAMESPACE: &str = "bench";
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Events handled per plugin name (each version gets its own name).
#[derive(Default)]
struct Handled(Arc<Mutex<HashMap<String, usize>>>);

impl Observer for Handled {
    fn plugin(&self, name: &str, _: &[String]) -> Arc<dyn PluginObserver> {
        Arc::new(HandledBy(name.to_owned(), self.0.clone()))
    }
}

/// One plugin's handle on [`Handled`].
struct HandledBy(String, Arc<Mutex<HashMap<String, usize>>>);

impl PluginObserver for HandledBy {
    fn event_handled(&self, _: usize, _: EventKind, _: bool) {
        *self.1.lock().entry(self.0.clone()).or_default() += 1;
    }
}

impl Handled {
    async fn wait(&self, plugin: &str, n: usize) {
        while self.0.lock().get(plugin).copied().unwrap_or(0) < n {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let probe = std::fs::read(kubewasm_tests::guest_path("probe"))?;
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    server.create(json!({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": NAMESPACE}}))?;
    for i in 0..OBJECTS {
        server.create(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": NAMESPACE,
                         "labels": {"app": "bench"}},
            "data": {"value": "x".repeat(1000)},
        }))?;
    }
    let versions = Arc::new(AtomicUsize::new(0));
    let v = versions.clone();
    let policy = move |_: &Path| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        PluginPolicy {
            config: json!({
                "name": format!("reload-v{n}"),
                "mode": "noop",
                "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap",
                                   "namespace": NAMESPACE}],
            })
            .to_string(),
            ..PluginPolicy::default()
        }
    };
    let handled = Arc::new(Handled::default());
    let cache = tempfile::tempdir()?;
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory,
        client.clone(),
        HostOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            policy: Arc::new(policy),
            observer: handled.clone(),
            ..HostOptions::default()
        },
    )?;
    let dir = tempfile::tempdir()?;
    let staging = tempfile::tempdir()?;
    let cancel = CancellationToken::new();
    let reloader = Reloader::new(dir.path().to_path_buf(), HostLoader(host.clone()), DEBOUNCE);
    let watcher = tokio::spawn(reloader.run(cancel.clone(), |_, _| {}));
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client, NAMESPACE);

    let mut created = 0;
    let mut round = |bytes: Vec<u8>| {
        created += 1;
        let name = format!("live-{created}");
        let (api, handled, versions) = (api.clone(), handled.clone(), versions.clone());
        let staged = staging.path().join("reload.wasm");
        let target = dir.path().join("reload.wasm");
        async move {
            std::fs::write(&staged, &bytes)?;
            let before = versions.load(Ordering::SeqCst);
            let expected = OBJECTS + created;
            let started = Instant::now();
            std::fs::rename(&staged, &target)?;
            let cm = k8s_openapi::api::core::v1::ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..ObjectMeta::default()
                },
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await?;
            while versions.load(Ordering::SeqCst) == before {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            let plugin = format!("reload-v{}", before + 1);
            handled.wait(&plugin, expected).await;
            anyhow::Ok(started.elapsed())
        }
    };

    // The first load compiles and starts the informer; not measured.
    round(variant(&probe, 0)).await?;
    let mut cold = Vec::new();
    for n in 1..=ROUNDS {
        cold.push(round(variant(&probe, n)).await?);
    }
    let mut warm = Vec::new();
    for n in 1..=ROUNDS {
        // Compiled (and cached) by the cold rounds: only deserialisation is left.
        warm.push(round(variant(&probe, n)).await?);
        // Alternate with another cached version so every round is a real change.
        round(variant(&probe, ROUNDS + n)).await?;
    }
    cancel.cancel();
    watcher.await??;
    host.shutdown(Duration::from_secs(5)).await;

    println!("## Reload latency");
    println!();
    println!(
        "File written, then renamed into the plugins dir -> new version has handled the replay of \
         {OBJECTS} cached ConfigMaps and one created after the rename. Small Rust guest (probe, \
         {} KB); the latency includes the reloader's debounce of {} ms (the file is fresh when \
         renamed); median of {ROUNDS}. Wall time.",
        probe.len() / 1024,
        DEBOUNCE.as_millis()
    );
    println!();
    println!("| compile cache | latency |");
    println!("|---|---|");
    println!(
        "| cold (new component) | {:.1} ms |",
        median(cold).as_secs_f64() * 1e3
    );
    println!(
        "| warm (compiled before) | {:.1} ms |",
        median(warm).as_secs_f64() * 1e3
    );
    println!();
    Ok(())
}
