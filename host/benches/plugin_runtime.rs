//! Plugin runtime benchmarks (run with `cargo bench -p kubewasm --bench plugin_runtime`):
//! events per second through a no-op and a parsing wasm guest against native handlers doing
//! the same, in one run over the same informer cache of ~2 KiB ConfigMaps; RSS per idle
//! plugin with 1, 10 and 100 copies loaded; load time cold and from the compile cache.
//!
//! Throughput is measured on the replay a handler receives when it joins an informer whose
//! cache holds `OBJECTS` objects: no API server in the loop, only the dispatch path (listener,
//! the plugin's queue and actor, the guest call). Rate = events between the first and the
//! last handled, over that time; median of `ROUNDS` rounds.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kube::api::GroupVersionKind;
use kubewasm::plugin::{
    EngineOptions, EventKind, HostOptions, Observer, Origin, PluginEngine, PluginHost,
    PluginObserver, PluginPolicy,
};
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{
    FactoryOptions, InformerKey, ObjectRef, ResourceEventHandler, SharedInformerFactory,
};
use parking_lot::Mutex;
use serde_json::json;

const OBJECTS: usize = 10_000;
const ROUNDS: usize = 5;
const NAMESPACE: &str = "bench";

/// First and last time an event was handled, and how many were.
#[derive(Default)]
struct Span {
    count: AtomicUsize,
    /// Time spent inside guest calls, as the observer reports it.
    call_nanos: std::sync::atomic::AtomicU64,
    times: Mutex<Option<(Instant, Instant)>>,
}

impl Span {
    fn hit(&self) {
        let now = Instant::now();
        let mut t = self.times.lock();
        *t = Some(match *t {
            Some((first, _)) => (first, now),
            None => (now, now),
        });
        drop(t);
        self.count.fetch_add(1, Ordering::Release);
    }

    fn reset(&self) {
        self.count.store(0, Ordering::Release);
        self.call_nanos.store(0, Ordering::Release);
        *self.times.lock() = None;
    }

    async fn wait(&self, n: usize) -> f64 {
        while self.count.load(Ordering::Acquire) < n {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let (first, last) = self.times.lock().expect("events were handled");
        (n - 1) as f64 / (last - first).as_secs_f64()
    }
}

struct Counting {
    span: Arc<Span>,
    parse: bool,
}

impl ResourceEventHandler for Counting {
    fn on_add(&self, obj: &ObjectRef, _initial: bool) {
        if self.parse {
            let v: serde_json::Value = serde_json::from_str(obj.json()).expect("valid JSON");
            std::hint::black_box(v);
        }
        self.span.hit();
    }
    fn on_update(&self, _old: &ObjectRef, _new: &ObjectRef) {}
    fn on_delete(&self, _obj: &ObjectRef, _unknown: bool) {}
}

struct SpanObserver(Arc<Span>);

impl Observer for SpanObserver {
    fn plugin(&self, _: &str, _: &[String]) -> Arc<dyn PluginObserver> {
        Arc::new(SpanObserver(self.0.clone()))
    }
}

impl PluginObserver for SpanObserver {
    fn event_handled(&self, _: usize, _: EventKind, elapsed: Duration, ok: bool) {
        assert!(ok, "the bench guest failed an event");
        self.0
            .call_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        self.0.hit();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn probe_config(name: &str, mode: &str, namespace: &str) -> String {
    json!({
        "name": name,
        "mode": mode,
        "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap", "namespace": namespace}],
    })
    .to_string()
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let probe = std::fs::read(kubewasm_tests::build_guest("probe"))?;
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    for ns in [NAMESPACE, "idle"] {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .map_err(|e| anyhow::anyhow!("namespace: {e:?}"))?;
    }
    let filler = "x".repeat(1800);
    for i in 0..OBJECTS {
        server
            .create(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:05}"), "namespace": NAMESPACE,
                             "labels": {"app": "bench", "shard": (i % 16).to_string()},
                             "annotations": {"bench/owner": "plugin-runtime"}},
                "data": {"payload": filler, "index": i.to_string()},
            }))
            .map_err(|e| anyhow::anyhow!("configmap: {e:?}"))?;
    }
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let (resource, _) =
        kubewasm_informer::resolve(&client, &GroupVersionKind::gvk("", "v1", "ConfigMap")).await?;
    let informer = factory.informer_for(InformerKey::all(resource).in_namespace(NAMESPACE));
    factory.start();
    factory.wait_for_cache_sync().await;
    let json_size = informer
        .indexer()
        .list()
        .iter()
        .map(|o| o.json().len())
        .sum::<usize>()
        / OBJECTS;

    let span = Arc::new(Span::default());
    let cache_dir = tempfile::tempdir()?;
    let host = PluginHost::new(
        factory.clone(),
        client.clone(),
        HostOptions {
            cache_dir: Some(cache_dir.path().to_owned()),
            observer: Arc::new(SpanObserver(span.clone())),
            policy: Arc::new(|p: &Path| {
                let stem = p
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                let config = match stem.as_str() {
                    "noop" => probe_config("bench-noop", "noop", NAMESPACE),
                    "parse" => probe_config("bench-parse", "parse", NAMESPACE),
                    many if many.starts_with("many-") => probe_config(many, "noop", NAMESPACE),
                    _ => probe_config(&stem, "noop", "idle"),
                };
                PluginPolicy {
                    config,
                    ..PluginPolicy::default()
                }
            }),
            ..HostOptions::default()
        },
    )?;

    println!("# kubewasm plugin runtime benchmarks");
    println!(
        "{OBJECTS} ConfigMaps of {json_size} bytes of JSON each, replayed to one handler; median of {ROUNDS} rounds\n"
    );
    println!("| handler | events/s | us per event |");
    println!("|---|---|---|");
    let mut rates = Vec::new();
    // KUBEWASM_BENCH_ONLY=wasm-noop runs only that case, many rounds (for profiling).
    let only_noop = std::env::var("KUBEWASM_BENCH_ONLY").as_deref() == Ok("wasm-noop");
    if only_noop {
        for _ in 0..50 {
            span.reset();
            let id = host.load(Path::new("noop.wasm"), probe.clone()).await?;
            span.wait(OBJECTS).await;
            host.unload(id).await;
        }
        return Ok(());
    }
    for (label, parse) in [
        ("native no-op", false),
        ("native, parses JSON (serde_json::Value)", true),
    ] {
        let mut r = Vec::new();
        for _ in 0..ROUNDS {
            span.reset();
            let handler = Arc::new(Counting {
                span: span.clone(),
                parse,
            });
            let registration = informer.add_event_handler(handler, None);
            r.push(span.wait(OBJECTS).await);
            informer.remove_event_handler(&registration);
        }
        rates.push((label, median(r)));
    }
    let mut call_us = Vec::new();
    for (label, file) in [
        ("wasm no-op guest", "noop.wasm"),
        ("wasm guest, parses JSON (serde_json::Value)", "parse.wasm"),
    ] {
        let mut r = Vec::new();
        let mut calls = Vec::new();
        for _ in 0..ROUNDS {
            span.reset();
            let id = host.load(Path::new(file), probe.clone()).await?;
            r.push(span.wait(OBJECTS).await);
            calls.push(span.call_nanos.load(Ordering::Acquire) as f64 / OBJECTS as f64 / 1e3);
            host.unload(id).await;
        }
        call_us.push((label, median(calls)));
        rates.push((label, median(r)));
    }
    for (label, rate) in &rates {
        println!("| {label} | {rate:.0} | {:.2} |", 1e6 / rate);
    }
    // Ten no-op plugins on the same informer at once (client-go's reference: 10 handlers).
    const COPIES: usize = 10;
    let mut r = Vec::new();
    for _ in 0..ROUNDS {
        span.reset();
        let mut ids = Vec::new();
        for i in 0..COPIES {
            ids.push(
                host.load(Path::new(&format!("many-{i}.wasm")), probe.clone())
                    .await?,
            );
        }
        r.push(span.wait(OBJECTS * COPIES).await);
        for id in ids {
            host.unload(id).await;
        }
    }
    let many = median(r);
    println!(
        "| {COPIES} wasm no-op guests at once (events x plugins) | {many:.0} | {:.2} (wall, 2 cores) |",
        1e6 / many
    );
    for (label, us) in &call_us {
        println!("{label}: {us:.2} us per event inside the guest call (instance.deliver)");
    }
    let native = rates[0].1;
    let wasm = rates[2].1;
    println!(
        "\nwasm plugin overhead per event over a native handler: {:.2} us; parsing guest at {:.0}% of the native parser's rate\n",
        1e6 / wasm - 1e6 / native,
        100.0 * rates[3].1 / rates[1].1
    );

    // Load times.
    let engine_dir = tempfile::tempdir()?;
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    for round in 0..ROUNDS {
        let dir = engine_dir.path().join(round.to_string());
        let options = EngineOptions {
            cache_dir: Some(dir),
        };
        let engine = PluginEngine::new(options.clone())?;
        let t = Instant::now();
        let c = engine
            .compile(Path::new("probe.wasm"), probe.clone())
            .await?;
        cold.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(!c.from_cache());
        drop((c, engine));
        // A fresh engine, as after a restart: only the on-disk cache helps.
        let engine = PluginEngine::new(options)?;
        let t = Instant::now();
        let c = engine
            .compile(Path::new("probe.wasm"), probe.clone())
            .await?;
        cached.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(c.origin(), Origin::DiskCache);
    }
    println!("| load ({} KB component) | ms |", probe.len() / 1024);
    println!("|---|---|");
    println!("| compile (cold) | {:.1} |", median(cold));
    println!("| from the on-disk compile cache | {:.2} |", median(cached));
    let mut full = Vec::new();
    for i in 0..ROUNDS {
        let t = Instant::now();
        let id = host
            .load(Path::new(&format!("load-{i}.wasm")), probe.clone())
            .await?;
        full.push(t.elapsed().as_secs_f64() * 1e3);
        host.unload(id).await;
    }
    println!(
        "| PluginHost::load from the cache (instantiate, init, discovery, register) | {:.2} |\n",
        median(full)
    );

    // RSS per idle plugin.
    println!("| idle plugins loaded | RSS growth | per plugin |");
    println!("|---|---|---|");
    let base = rss_bytes();
    let mut loaded = 0;
    for target in [1, 10, 100] {
        while loaded < target {
            host.load(Path::new(&format!("idle-{loaded}.wasm")), probe.clone())
                .await?;
            loaded += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let grown = rss_bytes().saturating_sub(base);
        println!(
            "| {target} | {:.1} MiB | {:.2} MiB |",
            grown as f64 / (1 << 20) as f64,
            grown as f64 / target as f64 / (1 << 20) as f64
        );
    }
    host.shutdown(Duration::from_secs(5)).await;
    factory.shutdown().await;
    server.shutdown().await;
    Ok(())
}
