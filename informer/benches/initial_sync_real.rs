//! Initial sync of many ConfigMaps from a real kube-apiserver (envtest), kubewasm-informer over
//! protobuf (the default for built-in kinds) against the same informer over JSON, with and
//! without gzip on the LIST (the default asks for it), each variant
//! in a fresh child process. The API server's side is read from /proc: its CPU time and the
//! bytes it wrote (`wchar`: the TLS bytes on the client's connection; a LIST at
//! resourceVersion=0 is answered from the watch cache, so etcd adds nothing) over each sync.
//!
//! With `BENCH_CLIENT_GO` naming a built `benchmarks/client-go` binary, client-go's informer is
//! measured in the same run, as rows of its own (its `sync`, `sync-strip` and `sync-list` modes).
//!
//! `KUBEBUILDER_ASSETS=/work/shared/envtest/bin cargo bench -p kubewasm-informer --bench initial_sync_real`
//! Environment: `BENCH_OBJECTS` (default 100000), `BENCH_RUNS` (default 3), `BENCH_CLIENT_GO`,
//! `BENCH_CHILD_WRAPPER` (a program the kubewasm children run under, their command line its
//! arguments: `heaptrack`, `perf record ... --`, a script; its standard output must be the
//! child's).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kubewasm_informer::{FactoryOptions, InformerKey, ListWatchOptions, SharedInformerFactory};
use kubewasm_tests::envtest::{Envtest, User};

mod common;
use common::{config_map, env_usize, median, rss};

/// (name, protobuf, gzip).
const VARIANTS: &[(&str, bool, bool)] = &[
    (
        "kubewasm, protobuf + gzip (default), one LIST at resourceVersion=0",
        true,
        true,
    ),
    (
        "kubewasm, protobuf ([informers] gzip = false), one LIST at resourceVersion=0",
        true,
        false,
    ),
    (
        "kubewasm, JSON ([informers] protobuf = false, gzip = false), one LIST at resourceVersion=0",
        false,
        false,
    ),
    (
        "kubewasm, JSON + gzip ([informers] protobuf = false), one LIST at resourceVersion=0",
        false,
        true,
    ),
];

/// (name, mode of the `benchmarks/client-go` binary): the rows measured when `BENCH_CLIENT_GO`
/// is set.
const CLIENT_GO_VARIANTS: &[(&str, &str)] = &[
    (
        "client-go informer, protobuf as controllers set it, defaults (managedFields kept)",
        "sync",
    ),
    (
        "client-go informer, protobuf, managedFields dropped by a transform",
        "sync-strip",
    ),
    (
        "client-go informer, protobuf, WatchListClient off (LISTs, as before client-go 1.35)",
        "sync-list",
    ),
];

/// The client-go binary from `BENCH_CLIENT_GO`, when set; an error when it names no file.
fn client_go() -> Result<Option<PathBuf>> {
    match std::env::var_os("BENCH_CLIENT_GO") {
        None => Ok(None),
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_file() {
                bail!("BENCH_CLIENT_GO={}: no such file", path.display());
            }
            Ok(Some(path))
        }
    }
}

/// The rows of this run: the kubewasm variants, then client-go's when its binary is given.
fn row_names(client_go: bool) -> Vec<&'static str> {
    let client_go_rows = if client_go { CLIENT_GO_VARIANTS } else { &[] };
    VARIANTS
        .iter()
        .map(|(name, ..)| *name)
        .chain(client_go_rows.iter().map(|(name, _)| *name))
        .collect()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let variant: usize = args.get(i + 1).context("variant")?.parse()?;
        let kubeconfig = args.get(i + 2).context("kubeconfig")?.clone();
        return child(variant, &kubeconfig);
    }
    parent()
}

/// `(CPU ms, bytes written)` of process `pid`, from /proc.
fn process_counters(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let wchar = io
        .lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    ((ticks(11) + ticks(12)) * 10.0, wchar)
}

fn parent() -> Result<()> {
    let objects = env_usize("BENCH_OBJECTS", 100_000);
    let runs = env_usize("BENCH_RUNS", 3);
    let client_go = client_go()?;
    let wrapper = std::env::var("BENCH_CHILD_WRAPPER").ok();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let server = Envtest::start().await?;
        let api_server = *server
            .process_ids()
            .last()
            .context("the kube-apiserver's process")?;
        let started = Instant::now();
        let api: Api<ConfigMap> = Api::namespaced(server.admin(), "default");
        futures::stream::iter(0..objects)
            .map(|i| {
                let api = api.clone();
                async move {
                    api.patch(
                        &format!("bench-{i:06}"),
                        &PatchParams::apply("kubectl"),
                        &Patch::Apply(config_map(i)),
                    )
                    .await
                }
            })
            .buffer_unordered(16)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        eprintln!(
            "seeded {objects} ConfigMaps in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let kubeconfig = server.kubeconfig(User::Admin);
        let exe = std::env::current_exe()?;
        let names = row_names(client_go.is_some());
        let mut results: Vec<Vec<Sample>> = vec![Vec::new(); names.len()];
        for run in 0..runs {
            for (v, name) in names.iter().enumerate() {
                let mut command = match v.checked_sub(VARIANTS.len()) {
                    None => {
                        let mut command = match &wrapper {
                            Some(wrapper) => {
                                let mut words = wrapper.split_whitespace();
                                let program = words.next().context("BENCH_CHILD_WRAPPER")?;
                                let mut command = Command::new(program);
                                command.args(words).arg(&exe);
                                command
                            }
                            None => Command::new(&exe),
                        };
                        command.arg("--child").arg(v.to_string());
                        command
                    }
                    Some(c) => {
                        let mut command =
                            Command::new(client_go.as_ref().context("the client-go binary")?);
                        command.arg(CLIENT_GO_VARIANTS[c].1);
                        command
                    }
                };
                command.arg(&kubeconfig);
                let (cpu0, written0) = process_counters(api_server);
                let out = tokio::task::spawn_blocking(move || command.output()).await??;
                if !out.status.success() {
                    bail!("{name} failed: {}", String::from_utf8_lossy(&out.stderr));
                }
                let (cpu1, written1) = process_counters(api_server);
                let mut sample: Sample = serde_json::from_slice(&out.stdout)
                    .with_context(|| String::from_utf8_lossy(&out.stdout).to_string())?;
                sample.server_cpu_ms = cpu1 - cpu0;
                sample.server_bytes = written1.saturating_sub(written0);
                if sample.objects != objects {
                    bail!(
                        "{name} cached {} objects, expected {objects}",
                        sample.objects
                    );
                }
                eprintln!(
                    "run {run} {name}: {:.0} ms, client CPU {:.0} ms, server CPU {:.0} ms",
                    sample.sync_ms, sample.cpu_ms, sample.server_cpu_ms
                );
                results[v].push(sample);
            }
        }
        print_table(objects, &names, &results);
        Ok(())
    })
}

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Sample {
    objects: usize,
    sync_ms: f64,
    cpu_ms: f64,
    idle_rss: u64,
    synced_rss: u64,
    /// What the child saw: LIST answers in protobuf and in JSON.
    protobuf_lists: u64,
    json_lists: u64,
    /// LIST answers that arrived gzipped.
    #[serde(default)]
    gzip_lists: u64,
    /// Of those, streaming lists (WATCH with sendInitialEvents=true); client-go reports it.
    #[serde(default)]
    streaming_lists: u64,
    #[serde(default)]
    server_cpu_ms: f64,
    #[serde(default)]
    server_bytes: u64,
}

fn print_table(objects: usize, names: &[&str], results: &[Vec<Sample>]) {
    println!();
    println!(
        "Initial sync of {objects} ConfigMaps (one managedFields entry each, stripped by \
         kubewasm's informer, kept by client-go's unless a transform drops them) from a real kube-apiserver, medians of {} fresh processes, the variants \
         interleaved. Client CPU = user + system time of the client process; server CPU and \
         bytes written = the kube-apiserver process's over the sync (/proc stat and io wchar); \
         bytes per object = (RSS after sync - idle RSS) / objects.",
        results[0].len()
    );
    println!();
    println!(
        "| client | wire seen | sync, wall (ms) | client CPU (ms) | server CPU (ms) | server wrote (MB) | RSS after sync (MiB) | bytes per object |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, samples) in names.iter().zip(results) {
        let med = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        let wire = match (samples[0].protobuf_lists, samples[0].json_lists) {
            (p, 0) if p > 0 => "protobuf",
            (0, j) if j > 0 => "JSON",
            _ => "mixed",
        };
        let wire = match samples[0].gzip_lists {
            0 => wire.to_owned(),
            _ => format!("{wire}, gzip"),
        };
        let streaming = if samples[0].streaming_lists > 0 {
            ", streaming list"
        } else {
            ""
        };
        println!(
            "| {name} | {wire}{streaming} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} |",
            med(|s| s.sync_ms),
            med(|s| s.cpu_ms),
            med(|s| s.server_cpu_ms),
            med(|s| s.server_bytes as f64) / 1e6,
            med(|s| s.synced_rss as f64) / 1048576.0,
            med(|s| s.synced_rss.saturating_sub(s.idle_rss) as f64) / objects as f64,
        );
    }
}

fn child(variant: usize, kubeconfig: &str) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let sample = rt.block_on(async move {
        let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
        let client = kube::Client::try_from(config)?;
        client.apiserver_version().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let idle_rss = rss();
        let cpu0 = process_counters(std::process::id()).0;
        let started = Instant::now();
        let list_watch = ListWatchOptions {
            protobuf: VARIANTS[variant].1,
            gzip: VARIANTS[variant].2,
            ..ListWatchOptions::default()
        };
        let wire = list_watch.wire.clone();
        let options = FactoryOptions {
            list_watch,
            ..FactoryOptions::default()
        };
        let factory = SharedInformerFactory::new(client, options);
        let informer = factory.informer_for(
            InformerKey::all(kube::discovery::ApiResource::erase::<ConfigMap>(&()))
                .with_label_selector("app.kubernetes.io/name=bench"),
        );
        factory.start();
        informer.wait_synced().await;
        let objects = informer.indexer().len();
        let sync_ms = started.elapsed().as_secs_f64() * 1000.0;
        let cpu = process_counters(std::process::id()).0 - cpu0;
        let stats = wire.snapshot();
        std::mem::forget(factory);
        anyhow::Ok(Sample {
            objects,
            sync_ms,
            cpu_ms: cpu,
            idle_rss,
            synced_rss: rss(),
            protobuf_lists: stats.protobuf_lists,
            json_lists: stats.json_lists,
            gzip_lists: stats.gzip_lists,
            streaming_lists: 0,
            server_cpu_ms: 0.0,
            server_bytes: 0,
        })
    })?;
    let mut stdout = std::io::stdout();
    serde_json::to_writer(&mut stdout, &sample)?;
    stdout.flush()?;
    std::process::exit(0);
}
