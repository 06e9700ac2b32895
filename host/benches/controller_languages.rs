//! The sample-controller in each guest language (run with `cargo bench -p kubewasm --bench
//! controller_languages` after `cargo xtask build-guests`, which builds the components into
//! `target/plugins/`): component size, compile time (cold, and from the on-disk compile cache)
//! and reconcile latency, from a Foo created on the dev server to its Deployment seen through a
//! watch, one Foo at a time (so it is latency, not throughput). Prints a Markdown section.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::runtime::watcher;
use kubewasm::plugin::{
    EngineOptions, HostOptions, PluginEngine, PluginHost, PluginPolicy, ResourcePattern,
    WriteGrant, WriteGrants,
};
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use serde_json::json;
use tokio::sync::mpsc;

/// Foos created per language, one after the other.
const FOOS: usize = 200;
/// Compile rounds per language (median).
const ROUNDS: usize = 3;

/// (language, component name in `target/plugins/`).
const CONTROLLERS: [(&str, &str); 3] = [
    ("Rust", "sample-controller"),
    ("Go", "sample-controller-go"),
    ("Python", "sample-controller-python"),
];

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

struct Figures {
    size: u64,
    cold: Duration,
    cached: Duration,
    p50: Duration,
    p99: Duration,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let plugins = kubewasm_tests::workspace_root().join("target/plugins");
    let mut rows = Vec::new();
    for (language, name) in CONTROLLERS {
        let path = plugins.join(format!("{name}.wasm"));
        let bytes = std::fs::read(&path)
            .with_context(|| format!("{}: run `cargo xtask build-guests` first", path.display()))?;
        eprintln!("controller_languages: {language}");
        let (cold, cached) = compile_times(&path, &bytes).await?;
        let (p50, p99) = latency(&path, bytes.clone()).await?;
        rows.push((
            language,
            name,
            Figures {
                size: bytes.len() as u64,
                cold,
                cached,
                p50,
                p99,
            },
        ));
    }
    println!("### The sample-controller in each language\n");
    println!(
        "Components from `cargo xtask build-guests` (release Rust guest; Go and Python as their \
         toolchains build them). Compile: `PluginEngine::compile` (wasmtime `Component::new`), \
         cold with no cache, then from the on-disk compile cache in a fresh engine; median of \
         {ROUNDS}. Latency: a Foo created on the dev server -> its Deployment seen by a watch, \
         {FOOS} Foos one at a time, each controller alone in its host, its client-side write rate \
         limit lifted (with client-go's default of 5 writes/s, burst 10, every language takes \
         0.60 s per Foo once the burst is spent: three writes per Foo).\n"
    );
    println!(
        "| language | component | size | compile (cold) | compile (from cache) | Foo -> Deployment p50 | p99 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (language, name, f) in rows {
        println!(
            "| {language} | `{name}` | {:.1} MiB | {} ms | {} ms | {} ms | {} ms |",
            f.size as f64 / (1024.0 * 1024.0),
            ms(f.cold),
            ms(f.cached),
            ms(f.p50),
            ms(f.p99),
        );
    }
    Ok(())
}

/// Median cold compile, and median load from a compile cache another engine filled.
async fn compile_times(path: &Path, bytes: &[u8]) -> anyhow::Result<(Duration, Duration)> {
    let cache = tempfile::tempdir()?;
    let mut cold = Vec::new();
    let mut cached = Vec::new();
    for _ in 0..ROUNDS {
        let engine = PluginEngine::new(EngineOptions { cache_dir: None })?;
        let started = Instant::now();
        engine.compile(path, bytes.to_vec()).await?;
        cold.push(started.elapsed());
    }
    let cache_dir = Some(PathBuf::from(cache.path()));
    PluginEngine::new(EngineOptions {
        cache_dir: cache_dir.clone(),
    })?
    .compile(path, bytes.to_vec())
    .await?;
    for _ in 0..ROUNDS {
        let engine = PluginEngine::new(EngineOptions {
            cache_dir: cache_dir.clone(),
        })?;
        let started = Instant::now();
        let compiled = engine.compile(path, bytes.to_vec()).await?;
        cached.push(started.elapsed());
        anyhow::ensure!(
            compiled.from_cache(),
            "{}: not from the cache",
            path.display()
        );
    }
    Ok((median(cold), median(cached)))
}

/// The write grants of `examples/kubewasm-dev.toml`'s sample-controllers, without the write
/// rate limit.
fn policy() -> anyhow::Result<PluginPolicy> {
    let mut writes = Vec::new();
    for (group, kind) in [
        ("apps", "Deployment"),
        ("samplecontroller.k8s.io", "Foo"),
        ("", "Event"),
    ] {
        writes.push(
            WriteGrant::new(ResourcePattern::new(group, kind), None).map_err(anyhow::Error::msg)?,
        );
    }
    let mut policy = PluginPolicy {
        writes: WriteGrants::only(writes),
        ..PluginPolicy::default()
    };
    // Lifted, or the client-side write limit (client-go's 5 qps, burst 10) sets the pace: each
    // Foo takes three writes (Deployment, Event, status), 0.6 s per Foo once the burst is spent.
    policy.reconcile.client.qps = 1e6;
    policy.reconcile.client.burst = 1_000_000;
    Ok(policy)
}

/// p50 and p99 of Foo created -> Deployment seen, on a fresh dev server.
async fn latency(path: &Path, bytes: Vec<u8>) -> anyhow::Result<(Duration, Duration)> {
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    server.load_manifests(&kubewasm_tests::workspace_root().join("examples/manifests"))?;
    let policy = policy()?;
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory,
        client.clone(),
        HostOptions {
            policy: Arc::new(move |_: &Path| policy.clone()),
            ..HostOptions::default()
        },
    )?;
    host.load(path, bytes).await?;
    while !host.ready() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let (seen_tx, mut seen) = mpsc::unbounded_channel::<(String, Instant)>();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "bench");
    let watch = tokio::spawn(async move {
        let mut events = watcher(deployments, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(d)) = event {
                let _ = seen_tx.send((d.metadata.name.unwrap_or_default(), Instant::now()));
            }
        }
    });
    let mut early: HashMap<String, Instant> = HashMap::new();
    let mut latencies = Vec::with_capacity(FOOS);
    for i in 0..FOOS {
        let name = format!("foo-{i}");
        let started = Instant::now();
        server
            .create(json!({
                "apiVersion": "samplecontroller.k8s.io/v1alpha1",
                "kind": "Foo",
                "metadata": {"name": name, "namespace": "bench"},
                "spec": {"deploymentName": name, "replicas": 1},
            }))
            .map_err(|e| anyhow::anyhow!("creating {name}: {e:?}"))?;
        let at = loop {
            if let Some(at) = early.remove(&name) {
                break at;
            }
            let (seen_name, at) = tokio::time::timeout(Duration::from_secs(30), seen.recv())
                .await
                .with_context(|| format!("no Deployment for {name} within 30 s"))?
                .context("the watch ended")?;
            if seen_name == name {
                break at;
            }
            early.insert(seen_name, at);
        };
        latencies.push(at.saturating_duration_since(started));
    }
    watch.abort();
    host.shutdown(Duration::from_secs(5)).await;
    server.shutdown().await;
    latencies.sort();
    Ok((percentile(&latencies, 0.5), percentile(&latencies, 0.99)))
}
