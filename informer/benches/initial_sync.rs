//! Initial sync of many ConfigMaps: kubewasm-informer with each of its list strategies against
//! kube-runtime's reflector Store, on one dev server, each variant measured in a fresh child
//! process so RSS figures are clean. The dev server runs in this (parent) process, so the
//! parent's CPU time during a child's sync is what serving that list cost.
//!
//! Bytes per object are set against the JSON each client keeps: kubewasm drops managedFields, so
//! its divisor is the JSON without them; kube-runtime keeps them unless told to strip them.
//!
//! `cargo bench -p kubewasm-informer --bench initial_sync`
//! Environment: `BENCH_OBJECTS` (default 100000), `BENCH_RUNS` (default 3); `BENCH_WRAPPER=PATH`
//! runs each child under `perf record -g -o PATH.N` (N = the variant) for profiling.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kubewasm_informer::{
    FactoryOptions, InformerKey, ListStrategy, ReflectorOptions, SharedInformerFactory,
};
use serde_json::json;

mod common;
use common::{config_map, env_usize, median, rss};

/// (name, keeps managedFields).
const VARIANTS: &[(&str, bool)] = &[
    ("kubewasm, one LIST at resourceVersion=0 (default)", false),
    ("kubewasm, streaming list", false),
    ("kubewasm, paginated LISTs of 500", false),
    ("kube-runtime, paginated LISTs of 500 (default)", true),
    ("kube-runtime, streaming list", true),
    ("kube-runtime, paginated, managedFields stripped", false),
];

/// The list strategy of the kubewasm variants, by variant number.
const KUBEWASM: [ListStrategy; 3] = [
    ListStrategy::AnyVersion,
    ListStrategy::Streaming,
    ListStrategy::Paginated,
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let variant: usize = args.get(i + 1).context("variant")?.parse()?;
        let url = args.get(i + 2).context("url")?.clone();
        return child(variant, &url);
    }
    parent()
}

/// The one managedFields entry kubectl's client-side apply leaves on such an object.
fn managed_fields() -> serde_json::Value {
    json!({"metadata": {"managedFields": [{
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:data": {".": {}, "f:value": {}},
                     "f:metadata": {"f:annotations": {".": {}, "f:bench.kubewasm.io/note": {}},
                                    "f:labels": {".": {}, "f:app.kubernetes.io/name": {}}}},
        "manager": "kubectl-client-side-apply",
        "operation": "Update",
        "time": "2026-11-29T12:00:00Z"
    }]}})
}

fn parent() -> Result<()> {
    let objects = env_usize("BENCH_OBJECTS", 100_000);
    let runs = env_usize("BENCH_RUNS", 3);
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let server =
            kubewasm_devserver::DevServer::start(kubewasm_devserver::Options::default()).await?;
        let started = Instant::now();
        for i in 0..objects {
            server
                .create(config_map(i))
                .map_err(|s| anyhow::anyhow!("create: {s:?}"))?;
        }
        // The dev server drops managedFields on create (they are server-owned); a merge patch
        // keeps them, so each object gets its entry as on a real API server.
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
        futures::stream::iter(0..objects)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.patch(
                        &format!("bench-{i:06}"),
                        &PatchParams::default(),
                        &Patch::Merge(managed_fields()),
                    )
                    .await
                }
            })
            .buffer_unordered(32)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        eprintln!(
            "seeded {objects} ConfigMaps in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let json_bytes = average_json_size(&server).await?;
        eprintln!(
            "average object JSON: {:.0} bytes as the server sends it, {:.0} without managedFields",
            json_bytes.full, json_bytes.stripped
        );

        let exe = std::env::current_exe()?;
        let mut results: Vec<Vec<Sample>> = vec![Vec::new(); VARIANTS.len()];
        for run in 0..runs {
            for (v, (name, _)) in VARIANTS.iter().enumerate() {
                let server_cpu0 = cpu_ms();
                let out = tokio::task::spawn_blocking({
                    let exe = exe.clone();
                    let url = server.url();
                    move || match std::env::var("BENCH_WRAPPER") {
                        Ok(w) => Command::new("perf")
                            .args(["record", "-g", "-o", &format!("{w}.{v}"), "--"])
                            .arg(exe)
                            .args(["--child", &v.to_string(), &url])
                            .output(),
                        Err(_) => Command::new(exe)
                            .args(["--child", &v.to_string(), &url])
                            .output(),
                    }
                })
                .await??;
                if !out.status.success() {
                    bail!("{name} failed: {}", String::from_utf8_lossy(&out.stderr));
                }
                let server_cpu_ms = cpu_ms() - server_cpu0;
                let mut sample: Sample = serde_json::from_slice(&out.stdout)
                    .with_context(|| String::from_utf8_lossy(&out.stdout).to_string())?;
                sample.server_cpu_ms = server_cpu_ms;
                if sample.objects != objects {
                    bail!(
                        "{name} cached {} objects, expected {objects}",
                        sample.objects
                    );
                }
                eprintln!("run {run} {name}: {:.0} ms", sample.sync_ms);
                results[v].push(sample);
            }
        }
        print_table(objects, &json_bytes, &results);
        server.shutdown().await;
        Ok(())
    })
}

/// Average JSON size of an object, with and without `metadata.managedFields`.
struct JsonSize {
    full: f64,
    stripped: f64,
}

async fn average_json_size(server: &kubewasm_devserver::DevServer) -> Result<JsonSize> {
    let client = server.client();
    let request = kube::core::Request::new("/api/v1/namespaces/default/configmaps");
    let mut total = 0usize;
    let mut stripped = 0usize;
    let mut count = 0usize;
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(500);
        params.continue_token = token.take();
        let text = client.request_text(request.list(&params)?).await?;
        let list: serde_json::Value = serde_json::from_str(&text)?;
        for item in list["items"].as_array().into_iter().flatten() {
            let mut item = item.clone();
            // Watch events and typed clients carry apiVersion and kind; count them.
            item["apiVersion"] = json!("v1");
            item["kind"] = json!("ConfigMap");
            total += serde_json::to_string(&item)?.len();
            if let Some(meta) = item["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
            stripped += serde_json::to_string(&item)?.len();
            count += 1;
        }
        match list["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => break,
        }
    }
    let count = count.max(1) as f64;
    Ok(JsonSize {
        full: total as f64 / count,
        stripped: stripped as f64 / count,
    })
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Sample {
    objects: usize,
    sync_ms: f64,
    cpu_ms: f64,
    idle_rss: u64,
    synced_rss: u64,
    /// CPU the dev server (the parent process) spent while this child synced.
    #[serde(default)]
    server_cpu_ms: f64,
}

fn print_table(objects: usize, json: &JsonSize, results: &[Vec<Sample>]) {
    println!();
    println!(
        "Initial sync of {objects} ConfigMaps ({:.0} B of JSON each as served, {:.0} B without \
         managedFields), medians of {} fresh processes. CPU = user + system time of the client \
         process; server CPU = the dev server's (parent process) over the same sync; bytes per \
         object = (RSS after sync - the same process's idle RSS) / objects, set against the JSON \
         the client keeps.",
        json.full,
        json.stripped,
        results[0].len()
    );
    println!();
    println!(
        "| client | sync, wall (ms) | client CPU (ms) | server CPU (ms) | RSS after sync (MiB) | bytes per object | JSON kept (B) | / JSON kept |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((name, keeps_managed_fields), samples) in VARIANTS.iter().zip(results) {
        let sync = median(samples.iter().map(|s| s.sync_ms).collect());
        let cpu = median(samples.iter().map(|s| s.cpu_ms).collect());
        let server_cpu = median(samples.iter().map(|s| s.server_cpu_ms).collect());
        let rss = median(samples.iter().map(|s| s.synced_rss as f64).collect());
        let delta = median(
            samples
                .iter()
                .map(|s| s.synced_rss.saturating_sub(s.idle_rss) as f64)
                .collect(),
        );
        let per_object = delta / objects as f64;
        let kept = if *keeps_managed_fields {
            json.full
        } else {
            json.stripped
        };
        println!(
            "| {name} | {sync:.0} | {cpu:.0} | {server_cpu:.0} | {:.1} | {per_object:.0} | {kept:.0} | {:.2}x |",
            rss / 1048576.0,
            per_object / kept
        );
    }
}

/// User + system CPU time of this process in milliseconds (from /proc/self/stat, 100 Hz ticks).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) * 10.0
}

fn child(variant: usize, url: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sample = rt.block_on(async move {
        let config = kube::Config::new(url.parse()?);
        let client = kube::Client::try_from(config)?;
        client.apiserver_version().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let idle_rss = rss();
        let cpu0 = cpu_ms();
        let started = Instant::now();
        let objects = match variant {
            0..=2 => {
                let options = FactoryOptions {
                    reflector: ReflectorOptions {
                        list: KUBEWASM[variant],
                        ..ReflectorOptions::default()
                    },
                    ..FactoryOptions::default()
                };
                let factory = SharedInformerFactory::new(client, options);
                let informer =
                    factory.informer_for(InformerKey::all(kube::discovery::ApiResource::erase::<
                        ConfigMap,
                    >(&())));
                factory.start();
                informer.wait_synced().await;
                let n = informer.indexer().len();
                std::mem::forget(factory);
                n
            }
            _ => {
                let (reader, writer) = reflector::store::<ConfigMap>();
                let api: Api<ConfigMap> = Api::all(client);
                let config = if variant == 4 {
                    watcher::Config::default().streaming_lists()
                } else {
                    watcher::Config::default()
                };
                let strip = variant == 5;
                let stream = watcher(api, config).modify(move |cm: &mut ConfigMap| {
                    if strip {
                        cm.metadata.managed_fields = None;
                    }
                });
                let stream = reflector(writer, stream);
                tokio::spawn(stream.for_each(|_| async {}));
                reader.wait_until_ready().await?;
                let n = reader.state().len();
                std::mem::forget(reader);
                n
            }
        };
        let sync_ms = started.elapsed().as_secs_f64() * 1000.0;
        let cpu = cpu_ms() - cpu0;
        anyhow::Ok(Sample {
            objects,
            sync_ms,
            cpu_ms: cpu,
            idle_rss,
            synced_rss: rss(),
            server_cpu_ms: 0.0,
        })
    })?;
    let mut stdout = std::io::stdout();
    serde_json::to_writer(&mut stdout, &sample)?;
    stdout.flush()?;
    std::process::exit(0);
}
