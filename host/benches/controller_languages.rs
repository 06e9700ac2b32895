//! The sample-controller in each guest language (run with `cargo bench -p kubewasm --bench
//! controller_languages` after `cargo xtask build-guests`, which builds the components into
//! `target/plugins/`): component size, compile time (cold, and from the on-disk compile cache)
//! and reconcile latency, from a Foo created on the dev server to its Deployment seen through a
//! watch, one Foo at a time (so it is latency, not throughput); and the compile times of the
//! configmap-counter example in each language (JavaScript included). Prints Markdown sections.
//!
//! Then, in the same run, the Rust guest against the same controller written natively on
//! kube-runtime's `Controller` (`kube_runtime.rs`): 1,000 Foos each, with CPU time per Foo.
//! `KUBEWASM_BENCH_ONLY=kube-runtime` runs that second section alone.

#[path = "controller_languages/kube_runtime.rs"]
mod kube_runtime;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::{
    EngineOptions, HostOptions, PluginEngine, PluginHost, PluginPolicy, ResourcePattern,
    WriteGrant, WriteGrants,
};
use serde_json::json;
use tokio::sync::mpsc;

/// Foos created per language, one after the other.
const FOOS: usize = 200;
/// Foos created for the guest against kube-runtime, one after the other.
const NATIVE_FOOS: usize = 1_000;
/// Compile rounds per language (median).
const ROUNDS: usize = 3;

/// (language, component name in `target/plugins/`).
const CONTROLLERS: [(&str, &str); 3] = [
    ("Rust", "sample-controller"),
    ("Go", "sample-controller-go"),
    ("Python", "sample-controller-python"),
];

/// The configmap-counter example in each language (JavaScript has no sample-controller): compile
/// times only. The end-to-end tests compile only the C one cold; this is where the big ones'
/// cold compile is measured.
const COUNTERS: [(&str, &str); 4] = [
    ("C", "configmap-counter-c"),
    ("Go", "configmap-counter-go"),
    ("Python", "configmap-counter-python"),
    ("JavaScript", "configmap-counter-js"),
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
    latency: Latency,
}

/// Foo created -> Deployment seen, and the process's CPU time per Foo.
struct Latency {
    p50: Duration,
    p99: Duration,
    cpu_per_foo: Duration,
}

/// The controller a latency run measures.
enum Subject<'a> {
    /// A component in a kubewasm plugin host; `unpaced`: without the reconcile rate limit
    /// (200 a second after a burst of 1,000 by default), as kube-runtime has none.
    Guest {
        path: &'a Path,
        bytes: Vec<u8>,
        unpaced: bool,
    },
    /// The native controller of `kube_runtime.rs`.
    KubeRuntime,
}

/// What a latency run keeps alive while it creates Foos.
enum Running {
    Guest(PluginHost),
    KubeRuntime(kube_runtime::Running),
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let plugins = kubewasm_tests::workspace_root().join("target/plugins");
    if std::env::var("KUBEWASM_BENCH_ONLY").as_deref() != Ok("kube-runtime") {
        languages(&plugins).await?;
        counters_compile(&plugins).await?;
    }
    against_kube_runtime(&plugins).await
}

/// Reads a component built by `cargo xtask build-guests`.
fn component(plugins: &Path, name: &str) -> anyhow::Result<(PathBuf, Vec<u8>)> {
    let path = plugins.join(format!("{name}.wasm"));
    let bytes = std::fs::read(&path)
        .with_context(|| format!("{}: run `cargo xtask build-guests` first", path.display()))?;
    Ok((path, bytes))
}

async fn languages(plugins: &Path) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    for (language, name) in CONTROLLERS {
        let (path, bytes) = component(plugins, name)?;
        eprintln!("controller_languages: {language}");
        let (cold, cached) = compile_times(&path, &bytes).await?;
        let subject = Subject::Guest {
            path: &path,
            bytes: bytes.clone(),
            unpaced: false,
        };
        let latency = latency(subject, FOOS).await?;
        rows.push((
            language,
            name,
            Figures {
                size: bytes.len() as u64,
                cold,
                cached,
                latency,
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
            ms(f.latency.p50),
            ms(f.latency.p99),
        );
    }
    println!();
    Ok(())
}

/// Size and compile times of the configmap-counter examples.
async fn counters_compile(plugins: &Path) -> anyhow::Result<()> {
    println!(
        "### Compiling the configmap-counter example in each language
"
    );
    println!(
        "Components from `cargo xtask build-guests`; compiled as above (median of {ROUNDS}).\n"
    );
    println!("| language | component | size | compile (cold) | compile (from cache) |");
    println!("|---|---|---|---|---|");
    for (language, name) in COUNTERS {
        let (path, bytes) = component(plugins, name)?;
        eprintln!("controller_languages: compiling {name}");
        let (cold, cached) = compile_times(&path, &bytes).await?;
        println!(
            "| {language} | `{name}` | {:.1} MiB | {} ms | {} ms |",
            bytes.len() as f64 / (1024.0 * 1024.0),
            ms(cold),
            ms(cached),
        );
    }
    println!();
    Ok(())
}

/// The Rust guest in a kubewasm host against the native kube-runtime controller, one after the
/// other in this process, each on a fresh dev server.
async fn against_kube_runtime(plugins: &Path) -> anyhow::Result<()> {
    let (path, bytes) = component(plugins, "sample-controller")?;
    eprintln!("controller_languages: kubewasm guest, {NATIVE_FOOS} Foos");
    let guest = Subject::Guest {
        path: &path,
        bytes: bytes.clone(),
        unpaced: false,
    };
    let guest = latency(guest, NATIVE_FOOS).await?;
    eprintln!("controller_languages: kubewasm guest, reconcile rate lifted, {NATIVE_FOOS} Foos");
    let unpaced = Subject::Guest {
        path: &path,
        bytes,
        unpaced: true,
    };
    let unpaced = latency(unpaced, NATIVE_FOOS).await?;
    eprintln!("controller_languages: kube-runtime, {NATIVE_FOOS} Foos");
    let native = latency(Subject::KubeRuntime, NATIVE_FOOS).await?;
    println!("### sample-controller: kubewasm guest against kube-runtime\n");
    println!(
        "Foo created on the in-process dev server -> its Deployment seen by a watch, {NATIVE_FOOS} \
         Foos one at a time after one warm-up Foo, each controller alone on its own fresh dev \
         server, one after the other in the same process. kubewasm: the Rust guest \
         `sample-controller` (release build from `cargo xtask build-guests`) in a `PluginHost`, \
         its client-side write rate limit lifted; in the second row also its reconcile rate limit \
         (by default 200 reconciles a second once a burst of 1,000 is spent: the bench's 1,000 \
         Foos cause about three reconciles each, so the default row's later Foos wait for \
         tokens). kube-runtime: the same reconcile on \
         `kube::runtime::Controller` over a `DynamicObject` Foo, `owns` Deployments, Deployments \
         read from a reflector store (a second Deployment watch), Events through \
         `kube::runtime::events::Recorder` (kube's client has no client-side rate limit). Both \
         create the Deployment with a controller owner reference, record a `Synced` Event and \
         write the Foo's `status.availableReplicas`. CPU per Foo: `getrusage(RUSAGE_SELF)` user + \
         system time of the whole process over the {NATIVE_FOOS} Foos, until the last Foo's \
         status is written, divided by {NATIVE_FOOS}; it includes the dev server, the bench's \
         watch and its Foo creates, the same in both rows.\n"
    );
    println!("| controller | Foo -> Deployment p50 | p99 | CPU per Foo (whole process) |");
    println!("|---|---|---|---|");
    for (name, l) in [
        (
            "kubewasm, Rust guest `sample-controller`, default policy",
            guest,
        ),
        (
            "kubewasm, Rust guest `sample-controller`, reconcile rate lifted",
            unpaced,
        ),
        ("kube-runtime `Controller`, native Rust", native),
    ] {
        println!(
            "| {name} | {} ms | {} ms | {} ms |",
            ms(l.p50),
            ms(l.p99),
            ms(l.cpu_per_foo)
        );
    }
    Ok(())
}

/// User + system CPU time of the whole process, threads that ended included.
fn process_cpu() -> Duration {
    // SAFETY: `getrusage` only writes the `rusage` it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.unsigned_abs())
            + Duration::from_micros(t.tv_usec.unsigned_abs())
    };
    time(usage.ru_utime) + time(usage.ru_stime)
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
fn policy(unpaced: bool) -> anyhow::Result<PluginPolicy> {
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
    if unpaced {
        policy.reconcile.reconciles_per_second = 1e6;
        policy.reconcile.reconcile_burst = 1_000_000;
    }
    Ok(policy)
}

/// Starts `subject` against `server` and waits until it can reconcile.
async fn start(subject: Subject<'_>, client: &kube::Client) -> anyhow::Result<Running> {
    match subject {
        Subject::Guest {
            path,
            bytes,
            unpaced,
        } => {
            let policy = policy(unpaced)?;
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
            Ok(Running::Guest(host))
        }
        Subject::KubeRuntime => Ok(Running::KubeRuntime(kube_runtime::start(client.clone()))),
    }
}

/// Creates a Foo named `name` and waits for its Deployment; answers the time it took.
async fn foo_to_deployment(
    server: &DevServer,
    name: &str,
    seen: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    early: &mut HashMap<String, Instant>,
) -> anyhow::Result<Duration> {
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
        if let Some(at) = early.remove(name) {
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
    Ok(at.saturating_duration_since(started))
}

/// Waits until the controller has written Foo `name`'s status.
async fn status_written(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
    ));
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "bench", &resource);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let object = foos.get(name).await?;
        if object.data["status"]["availableReplicas"].is_i64() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "Foo {name}: no status within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// p50 and p99 of Foo created -> Deployment seen over `foos` Foos after a warm-up one, and the
/// process's CPU time per Foo, on a fresh dev server.
async fn latency(subject: Subject<'_>, foos: usize) -> anyhow::Result<Latency> {
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    server.load_manifests(&kubewasm_tests::workspace_root().join("examples/manifests"))?;
    let running = start(subject, &client).await?;

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
    foo_to_deployment(&server, "warm-up", &mut seen, &mut early).await?;
    status_written(&client, "warm-up").await?;
    let cpu_before = process_cpu();
    let mut latencies = Vec::with_capacity(foos);
    for i in 0..foos {
        let name = format!("foo-{i}");
        latencies.push(foo_to_deployment(&server, &name, &mut seen, &mut early).await?);
    }
    status_written(&client, &format!("foo-{}", foos - 1)).await?;
    let cpu = process_cpu().saturating_sub(cpu_before);
    watch.abort();
    match running {
        Running::Guest(host) => host.shutdown(Duration::from_secs(5)).await,
        Running::KubeRuntime(controller) => drop(controller),
    }
    server.shutdown().await;
    latencies.sort();
    Ok(Latency {
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        cpu_per_foo: cpu / u32::try_from(foos)?,
    })
}
