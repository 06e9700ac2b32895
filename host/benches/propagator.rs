//! The ConfigMap propagators of contract 0.2, in JavaScript and in C (run with
//! `cargo bench -p kubewasm --bench propagator` after `cargo xtask build-guests`): component
//! size, compile time (cold, and from the compile cache), and reconcile latency: from a labelled
//! source ConfigMap created to its copy present in every other namespace, with 10 and 50
//! namespaces, with the policy `cargo xtask dev` gives them (`examples/kubewasm-dev.toml`: 50
//! writes/s, burst 100). Median of `ROUNDS` rounds; prints a Markdown section.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, PostParams};
use kubewasm::config::Config;
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::{EngineOptions, HostOptions, PluginEngine, PluginHost};
use serde_json::json;

const ROUNDS: usize = 7;
const NAMESPACES: [usize; 2] = [10, 50];
const LANGUAGES: [(&str, &str); 2] = [("JavaScript", "js"), ("C", "c")];
/// Long enough for the write token bucket of `examples/kubewasm-dev.toml` to refill.
const REFILL: Duration = Duration::from_secs(2);

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn component(language: &str) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let path = kubewasm_tests::workspace_root().join(format!(
        "target/plugins/configmap-propagator-{language}.wasm"
    ));
    let bytes = std::fs::read(&path).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e}; run `cargo xtask build-guests` first",
            path.display()
        )
    })?;
    Ok((path, bytes))
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    println!(
        "Each component in a fresh engine: compiled (cold), then loaded again from the on-disk \
         compile cache. Latency: a ConfigMap labelled `kubewasm.io/propagate=true` created \
         through kube's client until a copy is in every other namespace (polled every 2 ms, \
         so about 1 ms of the figure is the polling), the plugin's host and the dev server in \
         this process, with a pause between rounds for the plugin's write bucket (burst 100, \
         50 writes/s) to refill: back to back, 49 copies a round are held to 50 writes/s \
         (about 1 s). Median of {ROUNDS}.\n"
    );
    println!(
        "| language | component | compile (cold) | from compile cache | latency, {} namespaces | latency, {} namespaces |",
        NAMESPACES[0], NAMESPACES[1]
    );
    println!("|---|---|---|---|---|---|");
    for (label, language) in LANGUAGES {
        let (path, bytes) = component(language)?;
        let (cold, cached) = compile_times(&path, &bytes).await?;
        let mut latencies = Vec::new();
        for namespaces in NAMESPACES {
            latencies.push(latency(&path, &bytes, namespaces).await?);
        }
        println!(
            "| {label} | {} KiB | {} | {} | {} | {} |",
            bytes.len().div_ceil(1024),
            ms(cold),
            ms(cached),
            ms(latencies[0]),
            ms(latencies[1])
        );
    }
    Ok(())
}

async fn compile_times(path: &Path, bytes: &[u8]) -> anyhow::Result<(Duration, Duration)> {
    let cache = tempfile::tempdir()?;
    let engine = || {
        PluginEngine::new(EngineOptions {
            cache_dir: Some(cache.path().to_path_buf()),
        })
    };
    let started = Instant::now();
    let compiled = engine()?.compile(path, bytes.to_vec()).await?;
    let cold = started.elapsed();
    anyhow::ensure!(!compiled.from_cache(), "the first compile is cold");
    let started = Instant::now();
    let again = engine()?.compile(path, bytes.to_vec()).await?;
    let cached = started.elapsed();
    anyhow::ensure!(again.from_cache(), "the second load comes from the cache");
    Ok((cold, cached))
}

/// Median time from a source created to its copy in each of `namespaces - 1` other namespaces.
async fn latency(path: &Path, bytes: &[u8], namespaces: usize) -> anyhow::Result<Duration> {
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    // `default` and the server's own namespaces count too.
    let existing = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .len();
    for i in existing..namespaces {
        server.create(json!({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": format!("bench-{i}")}}))?;
    }
    // What `cargo xtask dev` gives it: write grants and rate from examples/kubewasm-dev.toml.
    let config =
        Config::load(&kubewasm_tests::workspace_root().join("examples/kubewasm-dev.toml"))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let policy = config.policy_for(&stem);
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory.clone(),
        client.clone(),
        HostOptions {
            policy: Arc::new(move |_: &Path| policy.clone()),
            ..HostOptions::default()
        },
    )?;
    host.load(path, bytes.to_vec()).await?;
    while !host.ready() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let sources: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let all: Api<ConfigMap> = Api::all(client.clone());
    let mut times = Vec::new();
    // One round more than measured: the first warms the instances and the write client.
    for round in 0..=ROUNDS {
        let name = format!("shared-{round}");
        let source: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubewasm.io/propagate": "true"}},
            "data": {"round": round.to_string()},
        }))?;
        let copies = ListParams::default()
            .fields(&format!("metadata.name={name}"))
            .labels("kubewasm.io/propagated=true");
        let started = Instant::now();
        sources.create(&PostParams::default(), &source).await?;
        let deadline = started + Duration::from_secs(60);
        while all.list(&copies).await?.items.len() < namespaces - 1 {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{name} never reached every namespace"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        if round > 0 {
            times.push(started.elapsed());
        }
        // The plugin's write bucket (burst 100, 50 writes/s) refills between rounds, so each
        // round measures the propagator, not the rate limit.
        tokio::time::sleep(REFILL).await;
    }
    host.shutdown(Duration::from_secs(5)).await;
    factory.shutdown().await;
    server.shutdown().await;
    Ok(median(times))
}
