//! Density (issue 37): N controllers in one `kubewasm run` host against N separate controller
//! processes, each with its own cache, on a real kube-apiserver (envtest) holding a fixed data
//! set of ConfigMaps. Per N and variant: resident memory (the host's, or the sum over the
//! processes), the API server's open watches (`apiserver_longrunning_requests{verb="WATCH"}`
//! from its /metrics, less those open before the start) and its CPU time (/proc) from the start
//! to ready and over the updates, time to ready, and update-to-handler latency. Its requests per
//! verb from start to ready (`apiserver_request_total`) go to stderr with the progress.
//!
//! Variants (each with its own cap on N, `BENCH_CAP_<VARIANT>`, because the machine or the
//! time runs out before N = 1,000 for some):
//! - `rust-identical`: N copies of the pod-diff example (Rust; watches Pods and ConfigMaps,
//!   logs every change) under different file names: the same bytes, compiled once and shared.
//! - `rust-distinct`: N pod-diff components made distinct by a custom section holding their
//!   number (`kubewasm_tests::variant`): the same code, but each has its own content hash, so
//!   each is compiled, cached and loaded as code of its own, as N different plugins would be.
//! - `python-identical`, `python-distinct`: the same with the Python configmap-counter
//!   (ConfigMaps only; logs every event).
//! - `kube-rs`: N processes of this benchmark's own binary in `--controller` mode, each a
//!   kube-runtime reflector (its own cache) on Pods and ConfigMaps, as pod-diff watches,
//!   logging each change of the probe ConfigMap.
//! - `client-go`: N processes of `benchmarks/client-go` (the binary named by `BENCH_CLIENT_GO`)
//!   in `controller` mode, each a client-go SharedInformerFactory (its own cache) on Pods and
//!   ConfigMaps, asking for protobuf as controllers do, with the same output. Run when
//!   `BENCH_CLIENT_GO` is set.
//!
//! The compile cache is filled before a kubewasm run (`kubewasm compile`, not timed), as the
//! deployment's init container does: the host starts from the cache.
//!
//! Latency: the probe ConfigMap is patched (an annotation with a sequence number) and every
//! handler's log line for that update is timestamped when this process reads it from the
//! host's or controller's output, against the moment before the PATCH was sent; the next patch
//! goes out when all N lines arrived. It is the production path (API server, watch, cache,
//! dispatch into the guest, the guest's log call, the host's log writer) plus a pipe.
//!
//! `KUBEBUILDER_ASSETS=/work/shared/envtest/bin cargo bench -p kubewasm --bench density`
//! (after `cargo xtask build-guests`). Environment: `BENCH_N` (default `1,10,100,1000`),
//! `BENCH_VARIANTS` (default all), `BENCH_CAP_RUST_DISTINCT`, `BENCH_CAP_PYTHON_IDENTICAL`,
//! `BENCH_CAP_PYTHON_DISTINCT`, `BENCH_CAP_KUBE_RS`, `BENCH_CAP_CLIENT_GO` (defaults below),
//! `BENCH_OBJECTS` (default 1000), `BENCH_UPDATES` (default 30), `BENCH_RUNS` (default 3),
//! `BENCH_CLIENT_GO`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams};
use kubewasm_tests::density::{
    PROBE_OBJECT, is_probe_update, metric_sum, percentile, stat_cpu_ms, status_rss_bytes,
};
use kubewasm_tests::envtest::{Envtest, User};
use serde_json::json;

#[path = "../../informer/benches/common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::{config_map, env_usize, median};

/// How long one start may take to be ready, and one update to reach every handler.
const READY_TIMEOUT: Duration = Duration::from_secs(1800);
const UPDATE_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Variant {
    RustIdentical,
    RustDistinct,
    PythonIdentical,
    PythonDistinct,
    KubeRs,
    ClientGo,
}

impl Variant {
    const ALL: [Variant; 6] = [
        Variant::RustIdentical,
        Variant::RustDistinct,
        Variant::PythonIdentical,
        Variant::PythonDistinct,
        Variant::KubeRs,
        Variant::ClientGo,
    ];

    fn key(self) -> &'static str {
        match self {
            Variant::RustIdentical => "rust-identical",
            Variant::RustDistinct => "rust-distinct",
            Variant::PythonIdentical => "python-identical",
            Variant::PythonDistinct => "python-distinct",
            Variant::KubeRs => "kube-rs",
            Variant::ClientGo => "client-go",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::RustIdentical => "kubewasm, N identical Rust plugins (pod-diff), one host",
            Variant::RustDistinct => "kubewasm, N distinct Rust plugins (pod-diff), one host",
            Variant::PythonIdentical => {
                "kubewasm, N identical Python plugins (configmap-counter), one host"
            }
            Variant::PythonDistinct => {
                "kubewasm, N distinct Python plugins (configmap-counter), one host"
            }
            Variant::KubeRs => "kube-rs, N controller processes (reflector each)",
            Variant::ClientGo => {
                "client-go, N controller processes (SharedInformerFactory each, protobuf)"
            }
        }
    }

    /// The largest N run by default: where the machine (2 cores, 23 GiB, shared) or the time
    /// runs out, as the table says.
    fn cap(self) -> usize {
        let (name, default) = match self {
            Variant::RustIdentical => ("BENCH_CAP_RUST_IDENTICAL", 1000),
            Variant::RustDistinct => ("BENCH_CAP_RUST_DISTINCT", 100),
            Variant::PythonIdentical => ("BENCH_CAP_PYTHON_IDENTICAL", 100),
            Variant::PythonDistinct => ("BENCH_CAP_PYTHON_DISTINCT", 10),
            Variant::KubeRs => ("BENCH_CAP_KUBE_RS", 100),
            Variant::ClientGo => ("BENCH_CAP_CLIENT_GO", 100),
        };
        env_usize(name, default)
    }

    fn guest(self) -> Option<&'static str> {
        match self {
            Variant::RustIdentical | Variant::RustDistinct => Some("pod-diff"),
            Variant::PythonIdentical | Variant::PythonDistinct => Some("configmap-counter-python"),
            Variant::KubeRs | Variant::ClientGo => None,
        }
    }

    fn distinct(self) -> bool {
        matches!(self, Variant::RustDistinct | Variant::PythonDistinct)
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--controller") {
        let kubeconfig = args.get(i + 1).context("--controller KUBECONFIG")?;
        return controller(Path::new(kubeconfig));
    }
    parent()
}

/// One run's figures.
#[derive(Clone, Debug)]
struct Sample {
    ready_ms: f64,
    rss: u64,
    client_cpu_ms: f64,
    watches: f64,
    server_cpu_start_ms: f64,
    server_cpu_updates_ms: f64,
    latencies_ms: Vec<f64>,
    /// Handler lines that did not arrive within [`UPDATE_TIMEOUT`].
    missing: usize,
}

fn parent() -> Result<()> {
    let objects = env_usize("BENCH_OBJECTS", 1000);
    let updates = env_usize("BENCH_UPDATES", 30);
    let runs = env_usize("BENCH_RUNS", 3);
    let ns: Vec<usize> = std::env::var("BENCH_N")
        .unwrap_or_else(|_| "1,10,100,1000".into())
        .split(',')
        .map(|n| n.trim().parse().context("BENCH_N: comma-separated counts"))
        .collect::<Result<_>>()?;
    let variants: Vec<Variant> = match std::env::var("BENCH_VARIANTS") {
        Ok(list) => list
            .split(',')
            .map(|k| {
                Variant::ALL
                    .into_iter()
                    .find(|v| v.key() == k.trim())
                    .with_context(|| format!("BENCH_VARIANTS: unknown variant {k}"))
            })
            .collect::<Result<_>>()?,
        // client-go's row needs its binary: without it, the default leaves the row out.
        Err(_) => Variant::ALL
            .into_iter()
            .filter(|&v| v != Variant::ClientGo || std::env::var_os("BENCH_CLIENT_GO").is_some())
            .collect(),
    };
    let client_go: Option<PathBuf> = match std::env::var_os("BENCH_CLIENT_GO") {
        Some(path) => {
            let path = PathBuf::from(path);
            ensure!(
                path.is_file(),
                "BENCH_CLIENT_GO={}: no such file",
                path.display()
            );
            Some(path)
        }
        None => {
            ensure!(
                !variants.contains(&Variant::ClientGo),
                "BENCH_VARIANTS has client-go: set BENCH_CLIENT_GO to the built benchmarks/client-go binary"
            );
            None
        }
    };
    let work = tempfile::tempdir()?;
    let cache = work.path().join("cache");
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let server = Envtest::start().await?;
        let api_server = *server
            .process_ids()
            .last()
            .context("the kube-apiserver's process")?;
        let admin = server.admin();
        seed(&admin, objects).await?;
        let idle_rate = idle_cpu_rate(api_server).await?;
        eprintln!("kube-apiserver idle: {idle_rate:.1} ms of CPU per s");
        let kubeconfig = server.kubeconfig(User::Admin);
        let mut results: BTreeMap<(usize, Variant), Vec<Sample>> = BTreeMap::new();
        let mut skipped: Vec<String> = Vec::new();
        for &n in &ns {
            for &variant in &variants {
                if n > variant.cap() {
                    skipped.push(format!("{} at N = {n} (cap {})", variant.key(), variant.cap()));
                    continue;
                }
                let plugins = work.path().join(format!("plugins-{}-{n}", variant.key()));
                if let Some(guest) = variant.guest() {
                    write_plugins(&plugins, guest, variant.distinct(), n)?;
                    fill_cache(&plugins, variant.distinct(), &cache)?;
                }
                let setup = Setup {
                    admin: &admin,
                    api_server,
                    kubeconfig: &kubeconfig,
                    plugins: &plugins,
                    cache: &cache,
                    updates,
                    client_go: client_go.as_deref(),
                };
                for run in 0..runs {
                    let sample = setup
                        .measure(variant, n)
                        .await
                        .with_context(|| format!("{} with N = {n}, run {run}", variant.key()))?;
                    eprintln!(
                        "N={n} {} run {run}: ready {:.0} ms, RSS {:.1} MiB, {} watches, p50 {:.1} ms",
                        variant.key(),
                        sample.ready_ms,
                        sample.rss as f64 / 1048576.0,
                        sample.watches,
                        percentile(&sample.latencies_ms, 50.0).unwrap_or(f64::NAN),
                    );
                    results.entry((n, variant)).or_default().push(sample);
                }
                if plugins.exists() {
                    std::fs::remove_dir_all(&plugins)?;
                }
            }
        }
        print_table(objects, updates, idle_rate, &results, &skipped);
        Ok(())
    })
}

/// The verbs counted in the API server's requests from start to ready.
const REQUEST_VERBS: [&str; 7] = ["GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"];

/// How long the API server's idle rate is measured, with no client but this benchmark's.
const IDLE_WINDOW: Duration = Duration::from_secs(10);

/// The kube-apiserver's CPU time per second of wall time with no controller running (its own
/// loops, etcd's heartbeats, the shared machine's scheduling), in ms/s: the start-to-ready CPU
/// less this rate times the time to ready estimates what the controllers cost it (an estimate:
/// on a loaded machine the rate itself moves).
async fn idle_cpu_rate(api_server: u32) -> Result<f64> {
    let before = cpu_ms(api_server)?;
    let started = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    Ok((cpu_ms(api_server)? - before) / started.elapsed().as_secs_f64())
}

/// Creates `objects` ConfigMaps in `default` by server-side apply.
async fn seed(admin: &kube::Client, objects: usize) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), "default");
    let started = Instant::now();
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
    Ok(())
}

struct Setup<'a> {
    admin: &'a kube::Client,
    api_server: u32,
    kubeconfig: &'a Path,
    plugins: &'a Path,
    cache: &'a Path,
    updates: usize,
    /// The `benchmarks/client-go` binary (`BENCH_CLIENT_GO`), for the client-go variant.
    client_go: Option<&'a Path>,
}

/// What the forwarders of a run's output report: a handler's probe line (when it was read), or a
/// kube-rs controller's "synced".
enum Seen {
    Probe(Instant),
    Synced,
}

/// What was started for one run: the processes, and what their output reported.
struct Started {
    children: Vec<Child>,
    seen: mpsc::Receiver<Seen>,
    /// The host's metrics port (kubewasm only).
    port: Option<u16>,
}

impl Drop for Started {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Setup<'_> {
    /// One fresh start of `variant` with `n` controllers (the plugin files already written).
    async fn measure(&self, variant: Variant, n: usize) -> Result<Sample> {
        let watches_before = self.watches().await?;
        let requests_before = self.requests().await?;
        let cpu_before = cpu_ms(self.api_server)?;
        let started = Instant::now();
        let mut run = match variant.guest() {
            Some(_) => self.start_host(self.plugins)?,
            None => self.start_controllers(variant, n)?,
        };
        wait_ready(&mut run, n).await?;
        let ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        let server_cpu_start_ms = cpu_ms(self.api_server)? - cpu_before;
        // Reported at once by the host and each process once synced: the watches are open.
        let watches = self.watches().await? - watches_before;
        let requests: Vec<String> = self
            .requests()
            .await?
            .iter()
            .zip(&requests_before)
            .map(|((verb, after), (_, before))| format!("{verb} {}", after - before))
            .collect();
        eprintln!(
            "N={n} {}: API server requests from start to ready (this bench's one GET included): {}",
            variant.key(),
            requests.join(", ")
        );
        let cpu_before = cpu_ms(self.api_server)?;
        let (latencies_ms, missing) = self.updates(&run, n).await?;
        let server_cpu_updates_ms = cpu_ms(self.api_server)? - cpu_before;
        let pids: Vec<u32> = run.children.iter().map(Child::id).collect();
        let rss = pids.iter().map(|&p| rss(p)).sum::<Result<u64>>()?;
        let client_cpu_ms = pids.iter().map(|&p| cpu_ms(p)).sum::<Result<f64>>()?;
        drop(run);
        Ok(Sample {
            ready_ms,
            rss,
            client_cpu_ms,
            watches,
            server_cpu_start_ms,
            server_cpu_updates_ms,
            latencies_ms,
            missing,
        })
    }

    /// The API server's requests served so far (`apiserver_request_total`), per verb.
    async fn requests(&self) -> Result<Vec<(&'static str, f64)>> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await?;
        Ok(REQUEST_VERBS
            .iter()
            .map(|&verb| {
                let count = metric_sum(&text, "apiserver_request_total", &[("verb", verb)]);
                (verb, count.unwrap_or(0.0))
            })
            .collect())
    }

    /// Open watches on the API server (every client's; this benchmark keeps none open).
    async fn watches(&self) -> Result<f64> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.admin.request_text(request).await?;
        metric_sum(
            &text,
            "apiserver_longrunning_requests",
            &[("verb", "WATCH")],
        )
        .context("apiserver_longrunning_requests{verb=\"WATCH\"} not in /metrics")
    }

    fn start_host(&self, plugins: &Path) -> Result<Started> {
        let port = kubewasm_tests::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
            .args(["--log", "warn,kubewasm::guest=info", "run", "--plugins"])
            .arg(plugins)
            .arg("--cache-dir")
            .arg(self.cache)
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--metrics-addr")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting kubewasm run")?;
        let (tx, seen) = mpsc::channel();
        forward(child.stdout.take(), tx.clone());
        forward(child.stderr.take(), tx);
        Ok(Started {
            children: vec![child],
            seen,
            port: Some(port),
        })
    }

    /// Starts `n` baseline controller processes: this binary in `--controller` mode (kube-rs),
    /// or the client-go binary in `controller` mode.
    fn start_controllers(&self, variant: Variant, n: usize) -> Result<Started> {
        let (exe, mode) = match variant {
            Variant::ClientGo => (
                self.client_go
                    .context("client-go needs BENCH_CLIENT_GO")?
                    .to_owned(),
                "controller",
            ),
            _ => (std::env::current_exe()?, "--controller"),
        };
        let (tx, seen) = mpsc::channel();
        let mut started = Started {
            children: Vec::with_capacity(n),
            seen,
            port: None,
        };
        for _ in 0..n {
            let mut child = Command::new(&exe)
                .arg(mode)
                .arg(self.kubeconfig)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting a {} controller process", variant.key()))?;
            forward(child.stdout.take(), tx.clone());
            started.children.push(child);
        }
        Ok(started)
    }

    /// Patches the probe ConfigMap `self.updates` times, one after the other, each once every
    /// handler logged the one before: the latency of each handler's line, and how many lines
    /// did not come.
    async fn updates(&self, run: &Started, n: usize) -> Result<(Vec<f64>, usize)> {
        let api: Api<ConfigMap> = Api::namespaced(self.admin.clone(), "default");
        // Whatever matched before the first update (nothing should) is not counted.
        while run.seen.try_recv().is_ok() {}
        let mut latencies = Vec::with_capacity(self.updates * n);
        let mut missing = 0;
        for seq in 0..self.updates {
            let patch =
                json!({"metadata": {"annotations": {"density.kubewasm.io/seq": seq.to_string()}}});
            let sent = Instant::now();
            api.patch(PROBE_OBJECT, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .context("patching the probe ConfigMap")?;
            let deadline = sent + UPDATE_TIMEOUT;
            let mut got = 0;
            while got < n {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::task::block_in_place(|| run.seen.recv_timeout(left)) {
                    Ok(Seen::Probe(at)) => {
                        latencies.push(at.duration_since(sent).as_secs_f64() * 1000.0);
                        got += 1;
                    }
                    Ok(Seen::Synced) => {}
                    Err(_) => break,
                }
            }
            missing += n - got;
        }
        Ok((latencies, missing))
    }
}

/// Waits until the host answers /readyz 200 (every plugin file found at start loaded, every
/// informer synced, every plugin through its initial replay), or every controller process said
/// it synced.
async fn wait_ready(run: &mut Started, n: usize) -> Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut synced = 0;
    loop {
        for child in &mut run.children {
            if let Some(status) = child.try_wait()? {
                bail!("a process exited before ready: {status}");
            }
        }
        match run.port {
            Some(port) => {
                let answer =
                    tokio::task::block_in_place(|| kubewasm_tests::http_get(port, "/readyz"));
                if answer.is_some_and(|(code, _)| code == 200) {
                    return Ok(());
                }
            }
            None => {
                while let Ok(seen) = run.seen.try_recv() {
                    if matches!(seen, Seen::Synced) {
                        synced += 1;
                    }
                }
                if synced == n {
                    return Ok(());
                }
            }
        }
        ensure!(
            Instant::now() < deadline,
            "not ready after {READY_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads `output` line by line on a thread of its own, reporting probe lines and "synced".
fn forward(output: Option<impl Read + Send + 'static>, tx: mpsc::Sender<Seen>) {
    let Some(output) = output else { return };
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            let seen = if is_probe_update(&line) {
                Seen::Probe(Instant::now())
            } else if line == "density-synced" {
                Seen::Synced
            } else {
                continue;
            };
            if tx.send(seen).is_err() {
                break;
            }
        }
    });
}

/// Writes `n` plugin files of `guest` into a fresh `dir`: hard links to the one component when
/// identical, variants of it with their number in a custom section when distinct.
fn write_plugins(dir: &Path, guest: &str, distinct: bool, n: usize) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    let source = kubewasm_tests::guest_path(guest);
    let bytes = std::fs::read(&source).with_context(|| source.display().to_string())?;
    for i in 0..n {
        let file = dir.join(format!("p{i:04}.wasm"));
        if distinct {
            let number = u32::try_from(i)?;
            kubewasm_tests::write_settled(&file, &kubewasm_tests::variant(&bytes, number));
        } else {
            std::fs::hard_link(&source, &file)?;
        }
    }
    Ok(())
}

/// Compiles the plugins of `dir` into the compile cache (not timed: a deployment fills it in an
/// init container); files already there are left as they are. Identical copies are one
/// component: one of them is compiled (`kubewasm compile` loads every file it is given).
fn fill_cache(dir: &Path, distinct: bool, cache: &Path) -> Result<()> {
    let started = Instant::now();
    let target = if distinct {
        dir.to_owned()
    } else {
        dir.join("p0000.wasm")
    };
    let status = Command::new(env!("CARGO_BIN_EXE_kubewasm"))
        .args(["--log", "warn", "compile"])
        .arg(&target)
        .arg("--cache-dir")
        .arg(cache)
        .stdout(Stdio::null())
        .status()?;
    ensure!(
        status.success(),
        "kubewasm compile {}: {status}",
        dir.display()
    );
    eprintln!(
        "compile cache filled for {} in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn cpu_ms(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    stat_cpu_ms(&stat).with_context(|| format!("/proc/{pid}/stat"))
}

fn rss(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status_rss_bytes(&status).with_context(|| format!("VmRSS in /proc/{pid}/status"))
}

fn print_table(
    objects: usize,
    updates: usize,
    idle_rate: f64,
    results: &BTreeMap<(usize, Variant), Vec<Sample>>,
    skipped: &[String],
) {
    let runs = results.values().map(Vec::len).max().unwrap_or(0);
    println!();
    println!(
        "{objects} ConfigMaps in `default` on a real kube-apiserver (envtest); medians of {runs} \
         fresh starts. RSS = the host's, or the sum over the N processes, after {updates} \
         updates; client CPU = user + system time of the host or of all N processes, start to \
         the end of the updates; watches = the API server's open WATCH requests \
         (apiserver_longrunning_requests) less those before the start; server CPU = the \
         kube-apiserver process's, start to ready and over the updates; ready = start to \
         /readyz 200 or every process synced; latency = PATCH sent to each handler's log line \
         read, over {updates} updates x N handlers (pooled over the runs). The API server's \
         idle rate, measured over {IDLE_WINDOW:?} before the runs: {idle_rate:.1} ms of CPU \
         per s; \"less idle\" subtracts it over the time to ready."
    );
    println!();
    println!(
        "| N | controllers | ready (s) | RSS (MiB) | RSS per controller (MiB) | client CPU (s) | API server watches | server CPU to ready (ms) | same, less idle (ms) | server CPU, updates (ms) | latency p50 (ms) | latency p99 (ms) | lines missing |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for ((n, variant), samples) in results {
        let med = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        let pooled: Vec<f64> = samples
            .iter()
            .flat_map(|s| s.latencies_ms.iter().copied())
            .collect();
        let rss_mib = med(|s| s.rss as f64) / 1048576.0;
        println!(
            "| {n} | {} | {:.1} | {:.1} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.1} | {} |",
            variant.label(),
            med(|s| s.ready_ms) / 1000.0,
            rss_mib,
            rss_mib / *n as f64,
            med(|s| s.client_cpu_ms) / 1000.0,
            med(|s| s.watches),
            med(|s| s.server_cpu_start_ms),
            median(
                samples
                    .iter()
                    .map(|s| s.server_cpu_start_ms - idle_rate * s.ready_ms / 1000.0)
                    .collect()
            ),
            med(|s| s.server_cpu_updates_ms),
            percentile(&pooled, 50.0).unwrap_or(f64::NAN),
            percentile(&pooled, 99.0).unwrap_or(f64::NAN),
            samples.iter().map(|s| s.missing).sum::<usize>(),
        );
    }
    if !skipped.is_empty() {
        println!();
        println!("Not run (over the variant's cap): {}.", skipped.join("; "));
    }
}

/// `--controller KUBECONFIG`: the baseline, one controller process with its own cache: kube-runtime
/// reflectors on Pods and ConfigMaps in every namespace (what pod-diff watches), printing
/// `density-synced` once both initial lists are in its stores and `density-update NS/NAME` for
/// each later change of the probe ConfigMap.
fn controller(kubeconfig: &Path) -> Result<()> {
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
        let client = kube::Client::try_from(config)?;
        let (pods, pod_writer) = reflector::store::<Pod>();
        let (config_maps, config_map_writer) = reflector::store::<ConfigMap>();
        let pod_stream = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
            .reflect(pod_writer)
            .applied_objects()
            .map_ok(|_: Pod| ());
        let config_map_stream = watcher(Api::<ConfigMap>::all(client), watcher::Config::default())
            .reflect(config_map_writer)
            .applied_objects()
            .map_ok(|cm: ConfigMap| {
                if cm.metadata.name.as_deref() == Some(PROBE_OBJECT) {
                    let ns = cm.metadata.namespace.as_deref().unwrap_or("");
                    println!("density-update {ns}/{PROBE_OBJECT}");
                }
            });
        tokio::spawn(async move {
            let (pods, config_maps) = (pods, config_maps);
            let _ = tokio::join!(pods.wait_until_ready(), config_maps.wait_until_ready());
            println!("density-synced");
        });
        let mut both = futures::stream::select(pod_stream.boxed(), config_map_stream.boxed());
        while let Some(event) = both.next().await {
            if let Err(e) = event {
                eprintln!("controller watch error: {e}");
            }
        }
        anyhow::Ok(())
    })
}
