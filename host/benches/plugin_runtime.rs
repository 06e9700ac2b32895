//! Plugin runtime benchmarks (run with `cargo bench -p kubewasm --bench plugin_runtime`):
//! events per second through a no-op and a parsing wasm guest against native handlers doing
//! the same, in one run over the same informer cache of ~2 KiB ConfigMaps; CPU time per
//! *update* event (old and new object) with the production metrics observer; RSS per idle
//! plugin with 1, 10 and 100 distinct components loaded; load time cold and from the compile
//! cache. `KUBEWASM_BENCH_ONLY=update-instructions`, run under `valgrind --tool=callgrind
//! --smc-check=all-non-file`, counts the update event's instructions instead of its CPU time:
//! deterministic where CPU time on a shared machine is not. `KUBEWASM_BENCH_ONLY=update-cpu`
//! runs only the CPU-time measurement of the update event and prints each window's make-up
//! (user and system time, faults, context switches, CPU per thread, the rest of the machine's
//! load) to stderr.
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
use kubewasm::metrics::Metrics;
use kubewasm_devserver::{DevServer, Options};
use kubewasm_informer::{
    FactoryOptions, InformerKey, ObjectRef, ResourceEventHandler, SharedInformerFactory,
};
use kubewasm_runtime::{
    EngineOptions, EventKind, HostOptions, Observer, Origin, PluginEngine, PluginHost,
    PluginObserver, PluginPolicy, ReconcileSettings,
};
use parking_lot::Mutex;
use serde_json::json;

#[path = "plugin_runtime/usage.rs"]
mod usage;

const OBJECTS: usize = 10_000;
const ROUNDS: usize = 5;
/// Resync periods (one update of every cached object each) measured per handler.
const RESYNCS: u64 = 6;
/// How often the CPU measurement looks at the delivered count. The looking itself runs on the
/// measuring thread, whose CPU is left out; the wake-ups it causes on the runtime's workers are
/// counted (the same for every handler, so they cancel in the differences).
const POLL: Duration = Duration::from_millis(20);
const NAMESPACE: &str = "bench";
/// The update-event measurement's own namespace and objects: more than `OBJECTS`, so that the
/// events' CPU stands well above what the process spends idle over the same seconds.
const UPDATE_NAMESPACE: &str = "resync";
const UPDATE_OBJECTS: usize = 40_000;

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
    fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
        std::hint::black_box((old, new));
        self.span.hit();
    }
    fn on_delete(&self, _obj: &ObjectRef, _unknown: bool) {}
}

/// A native handler that only counts what it is handed, one atomic add an event (what the
/// plugin path's own event counter costs): the update-event measurement's native baseline,
/// with no clock read or lock of the bench's own in it.
#[derive(Default)]
struct Tally(AtomicUsize);

impl Tally {
    fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl ResourceEventHandler for Tally {
    fn on_add(&self, obj: &ObjectRef, _initial: bool) {
        std::hint::black_box(obj);
        self.0.fetch_add(1, Ordering::Release);
    }
    fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
        std::hint::black_box((old, new));
        self.0.fetch_add(1, Ordering::Release);
    }
    fn on_delete(&self, _obj: &ObjectRef, _unknown: bool) {}
}

struct SpanObserver(Arc<Span>);

impl Observer for SpanObserver {
    fn plugin(&self, _: &str, _: &[String]) -> Arc<dyn PluginObserver> {
        Arc::new(SpanObserver(self.0.clone()))
    }
}

impl PluginObserver for SpanObserver {
    fn event_handled(&self, _: usize, _: EventKind, ok: bool) {
        assert!(ok, "the bench guest failed an event");
        self.0.hit();
    }

    fn handler_called(&self, elapsed: Duration) {
        self.0
            .call_nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time of the whole process in nanoseconds, threads that ended included
/// (`CLOCK_PROCESS_CPUTIME_ID`). A sum over the live threads' schedstat, what this used to
/// read, loses a thread's whole time when it exits (a listener thread, an idle blocking-pool
/// thread), so a measurement could shrink or wrap around.
fn process_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` only writes the `timespec` it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    now.tv_sec.unsigned_abs() * 1_000_000_000 + now.tv_nsec.unsigned_abs()
}

/// CPU time of the calling thread in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` only writes the `timespec` it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec.unsigned_abs() * 1_000_000_000 + now.tv_nsec.unsigned_abs()
}

/// A reading of the process's CPU time without the measuring thread's, and which thread that
/// is. The measurement runs on the thread that blocks on the runtime (`block_on` polls its
/// future there, never on a worker), and what it does there is the bench's, not the product's:
/// waking every `POLL` to read a handler's count, which for a plugin builds its status (locks,
/// a few allocations) where a native handler's is one atomic load.
#[derive(Clone, Copy)]
struct CpuReading {
    others_ns: u64,
    measuring_thread: libc::pid_t,
}

impl CpuReading {
    fn now() -> CpuReading {
        // Thread CPU first: the process clock then includes all of it, so the difference
        // never counts the measuring thread's time between the two reads.
        let own = thread_cpu_ns();
        CpuReading {
            others_ns: process_cpu_ns().saturating_sub(own),
            // SAFETY: `gettid` has no preconditions.
            measuring_thread: unsafe { libc::gettid() },
        }
    }

    /// The CPU the other threads spent since `self`; an error if the measurement moved to
    /// another thread (the subtraction would then be meaningless).
    fn since(self) -> anyhow::Result<u64> {
        let now = CpuReading::now();
        anyhow::ensure!(
            now.measuring_thread == self.measuring_thread,
            "the CPU measurement moved from thread {} to {}",
            self.measuring_thread,
            now.measuring_thread
        );
        Ok(now.others_ns.saturating_sub(self.others_ns))
    }
}

/// Valgrind's client requests (`valgrind.h`, `callgrind.h`), for the instruction-count
/// measurement: instructions are counted by callgrind, deterministic where CPU time on a shared
/// machine is not (there is no hardware counter in this VM for `perf stat -e instructions`).
mod callgrind {
    use std::ffi::CStr;

    const RUNNING_ON_VALGRIND: usize = 0x1001;
    /// `VG_USERREQ_TOOL_BASE('C','T')`: callgrind's requests follow in this order.
    const BASE: usize = ((b'C' as usize) << 24) | ((b'T' as usize) << 16);
    const ZERO_STATS: usize = BASE + 1;
    const DUMP_STATS_AT: usize = BASE + 3;

    /// Valgrind's client request `request` with `arg`; `default` when not running on valgrind
    /// (the magic sequence is a no-op on a real CPU).
    fn request(default: usize, request: usize, arg: usize) -> usize {
        #[cfg(target_arch = "x86_64")]
        {
            let args: [usize; 6] = [request, arg, 0, 0, 0, 0];
            let result: usize;
            // SAFETY: valgrind.h's amd64 preamble: four rotations of rdi by 128 bits in all
            // (rdi unchanged), then `xchg rbx, rbx` (no change); valgrind reads `args` at rax
            // and writes the answer to rdx. On a real CPU nothing changes but the flags.
            unsafe {
                std::arch::asm!(
                    "rol rdi, 3",
                    "rol rdi, 13",
                    "rol rdi, 61",
                    "rol rdi, 51",
                    "xchg rbx, rbx",
                    in("rax") args.as_ptr(),
                    inout("rdx") default => result,
                    options(nostack),
                );
            }
            result
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (request, arg);
            default
        }
    }

    /// Whether the process runs under valgrind.
    pub fn running() -> bool {
        request(0, RUNNING_ON_VALGRIND, 0) != 0
    }

    /// Zeroes the counts: the next [`dump`] counts from here.
    pub fn zero() {
        request(0, ZERO_STATS, 0);
    }

    /// Writes the counts since the last [`zero`] (every thread's) to callgrind's next output
    /// file (`callgrind.out.PID.N` in the working directory, `label` in its header) and
    /// answers the instructions counted, read back from that file's `totals` line (the sum of
    /// the functions' own costs; its `summary` line also counts calls that began before the
    /// zeroing).
    pub fn dump(label: &CStr) -> anyhow::Result<u64> {
        request(0, DUMP_STATS_AT, label.as_ptr() as usize);
        let prefix = format!("callgrind.out.{}.", std::process::id());
        let mut newest: Option<(u32, std::path::PathBuf)> = None;
        for entry in std::fs::read_dir(".")? {
            let path = entry?.path();
            let Some(n) = path
                .file_name()
                .and_then(|f| f.to_str())
                .and_then(|f| f.strip_prefix(&prefix))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if newest.as_ref().is_none_or(|(m, _)| n > *m) {
                newest = Some((n, path));
            }
        }
        let (_, path) = newest.ok_or_else(|| {
            anyhow::anyhow!("no {prefix}N in the working directory: is the tool callgrind?")
        })?;
        let text = std::fs::read_to_string(&path)?;
        text.lines()
            .find_map(|l| l.strip_prefix("totals:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("{}: no totals line", path.display()))
    }
}

/// What a measurement counts over its window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Meter {
    /// The process's CPU time less the measuring thread's, in nanoseconds ([`CpuReading`]).
    Cpu,
    /// Instructions executed by every thread, counted by callgrind.
    Instructions,
}

impl Meter {
    /// Starts a window: the CPU reading so far, or zero after zeroing callgrind's counts.
    fn start(self) -> Start {
        match self {
            Meter::Cpu => Start::Cpu(CpuReading::now()),
            Meter::Instructions => {
                callgrind::zero();
                Start::Instructions
            }
        }
    }

    /// How often a measurement looks at the delivered count. Reading a plugin's count builds
    /// its status, a few microseconds: left out of the CPU time, but counted by callgrind (all
    /// threads), which runs the process some 50 times slower, so that every 5 ms would add
    /// about 5 % to a batch plugin's instructions.
    fn poll(self) -> Duration {
        match self {
            Meter::Cpu => POLL,
            Meter::Instructions => Duration::from_millis(100),
        }
    }

    /// What was counted since `start` answered `from`; `label` names an instruction dump.
    fn since(self, from: Start, label: &str) -> anyhow::Result<u64> {
        match (self, from) {
            (Meter::Cpu, Start::Cpu(reading)) => reading.since(),
            (Meter::Instructions, Start::Instructions) => {
                let label = std::ffi::CString::new(label)?;
                callgrind::dump(&label)
            }
            _ => anyhow::bail!("a window started with one meter and ended with the other"),
        }
    }
}

/// Where a [`Meter`]'s window started.
#[derive(Clone, Copy)]
enum Start {
    Cpu(CpuReading),
    Instructions,
}

fn probe_resync_config(name: &str) -> String {
    json!({
        "name": name,
        "mode": "noop",
        "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap",
                           "namespace": UPDATE_NAMESPACE, "resyncSeconds": 1}],
    })
    .to_string()
}

/// What `meter` counts per update event while `delivered()` counts `resyncs` resyncs of the
/// cache (an update of every object, old and new crossing to the handler), less the idle rate
/// measured before (per second of the window): nanoseconds of CPU, or instructions. `delivered`
/// must already count the handler's initial replay. `None` when the updates stop coming
/// (nothing for 20 s).
async fn cost_per_update(
    delivered: impl Fn() -> usize,
    calls: impl Fn() -> Option<f64>,
    objects: usize,
    resyncs: usize,
    meter: Meter,
    label: &str,
    idle_per_s: f64,
) -> anyhow::Result<Option<Measured>> {
    let reach = |target: usize| {
        let delivered = &delivered;
        async move {
            let mut last = (delivered(), Instant::now());
            while delivered() < target {
                tokio::time::sleep(meter.poll()).await;
                let now = delivered();
                if now != last.0 {
                    last = (now, Instant::now());
                } else if last.1.elapsed() > Duration::from_secs(20) {
                    return false;
                }
            }
            true
        }
    };
    // Start on a resync boundary: wait for the first resync to begin and finish.
    if !reach(delivered() + objects).await {
        return Ok(None);
    }
    let from = delivered();
    let calls_before = calls();
    let usage = (meter == Meter::Cpu).then(usage::Usage::now);
    let (counted, t0) = (meter.start(), Instant::now());
    if !reach(from + objects * resyncs).await {
        return Ok(None);
    }
    let counted = meter.since(counted, label)?;
    let elapsed = t0.elapsed();
    let events = delivered() - from;
    let idle = idle_per_s * elapsed.as_secs_f64();
    let cost = (counted as f64 - idle).max(0.0) / events as f64;
    if let Some(usage) = usage {
        let window = usage.until(&usage::Usage::now());
        let per_call = match (calls_before, calls()) {
            (Some(before), Some(after)) if after > before => {
                format!(", {:.1} events a call", events as f64 / (after - before))
            }
            _ => String::new(),
        };
        eprintln!(
            "window {label}: {:.3} us per update over {events} events in {:.2} s{per_call}; \
             {window}",
            cost / 1e3,
            elapsed.as_secs_f64(),
        );
    }
    Ok(Some(Measured {
        cost,
        middle: t0 + elapsed / 2,
    }))
}

/// A measured window: the cost per update event and the window's middle.
#[derive(Clone, Copy, Debug)]
struct Measured {
    cost: f64,
    middle: Instant,
}

/// The native cost at `at`, on the line through the native windows `before` and `after`.
fn interpolate(before: Measured, after: Measured, at: Instant) -> f64 {
    let span = after.middle.duration_since(before.middle).as_secs_f64();
    if span <= 0.0 {
        return (before.cost + after.cost) / 2.0;
    }
    let share = at.duration_since(before.middle).as_secs_f64() / span;
    before.cost + (after.cost - before.cost) * share
}

/// How a native handler is registered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Native {
    /// Called on the informer's processing thread, as a plugin's feeder is
    /// (`add_inline_event_handler`): the reference a plugin's own cost is taken against.
    Inline,
    /// With a listener thread of its own (`add_event_handler`, client-go's way).
    Thread,
}

/// A native no-op handler's cost per update event ([`Tally`], registered with a 1 s resync for
/// this one window and removed after it). `None` when the updates stop coming.
async fn native_window(
    informer: &kubewasm_informer::SharedIndexInformer,
    native: Native,
    setup: UpdateSetup,
    label: &str,
    idle_per_s: f64,
) -> anyhow::Result<Option<Measured>> {
    let tally = Arc::new(Tally::default());
    let resync = Some(Duration::from_secs(1));
    let registration = match native {
        Native::Inline => informer.add_inline_event_handler(tally.clone(), resync),
        Native::Thread => informer.add_event_handler(tally.clone(), resync),
    };
    while tally.count() < setup.objects {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let measured = cost_per_update(
        || tally.count(),
        || None,
        setup.objects,
        setup.resyncs,
        setup.meter,
        label,
        idle_per_s,
    )
    .await;
    informer.remove_event_handler(&registration);
    measured
}

/// What `meter` counts per second with no events flowing, over `window`.
async fn idle_rate(meter: Meter, window: Duration) -> anyhow::Result<f64> {
    let (counted, t0) = (meter.start(), Instant::now());
    tokio::time::sleep(window).await;
    let counted = meter.since(counted, "idle")?;
    Ok(counted as f64 / t0.elapsed().as_secs_f64())
}

/// Creates `n` ConfigMaps of about 2 KB of JSON in `namespace`, straight into the dev server.
fn create_config_maps(server: &DevServer, namespace: &str, n: usize) -> anyhow::Result<()> {
    let filler = "x".repeat(1800);
    for i in 0..n {
        server
            .create(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i:05}"), "namespace": namespace,
                             "labels": {"app": "bench", "shard": (i % 16).to_string()},
                             "annotations": {"bench/owner": "plugin-runtime"}},
                "data": {"payload": filler, "index": i.to_string()},
            }))
            .map_err(|e| anyhow::anyhow!("configmap: {e:?}"))?;
    }
    Ok(())
}

/// A plugin host on `factory` whose compile cache lives in `cache_dir`.
fn plugin_host(
    factory: &SharedInformerFactory,
    client: &kube::Client,
    cache_dir: &Path,
    observer: Arc<dyn Observer>,
    policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static,
) -> anyhow::Result<PluginHost> {
    Ok(PluginHost::new(
        factory.clone(),
        client.clone(),
        HostOptions {
            cache_dir: Some(cache_dir.to_owned()),
            observer,
            policy: Arc::new(policy),
            ..HostOptions::default()
        },
    )?)
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
    let probe = std::fs::read(kubewasm_tests::guest_path("probe"))?;
    let no_ops = NoOpGuests {
        v0_1: probe.clone(),
        v0_2: std::fs::read(kubewasm_tests::guest_path("observer-v0-2"))?,
        v0_2_1: std::fs::read(kubewasm_tests::guest_path("batch-observer"))?,
    };
    let reconciler = std::fs::read(kubewasm_tests::guest_path("reconciler-v0-2"))?;
    let server = DevServer::start(Options::default()).await?;
    let client = server.client();
    for ns in [NAMESPACE, "idle"] {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .map_err(|e| anyhow::anyhow!("namespace: {e:?}"))?;
    }
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    // KUBEWASM_BENCH_ONLY=update-cpu / update-instructions / reconcile runs only that
    // measurement.
    let only = std::env::var("KUBEWASM_BENCH_ONLY").unwrap_or_default();
    match only.as_str() {
        "update-cpu" => {
            let setup = UpdateSetup {
                resyncs: cpu_resyncs()?,
                ..UpdateSetup::CPU
            };
            return update_event_cost(&server, &factory, &client, &no_ops, setup).await;
        }
        "update-instructions" => {
            anyhow::ensure!(
                callgrind::running(),
                "update-instructions counts under callgrind: valgrind --tool=callgrind \
                 --smc-check=all-non-file {} --bench",
                std::env::args().next().unwrap_or_default()
            );
            return update_event_cost(
                &server,
                &factory,
                &client,
                &no_ops,
                UpdateSetup::INSTRUCTIONS,
            )
            .await;
        }
        _ => {}
    }
    create_config_maps(&server, NAMESPACE, OBJECTS)?;
    let (resource, _) = kubewasm_informer::KindResolver::new(client.clone())
        .resolve(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await?;
    let informer = factory.informer_for(InformerKey::all(resource.clone()).in_namespace(NAMESPACE));
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
    let host = plugin_host(
        &factory,
        &client,
        cache_dir.path(),
        Arc::new(SpanObserver(span.clone())),
        |p: &Path| {
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
        },
    )?;

    if only == "reconcile" {
        return reconcile_rate(&factory, &client, &reconciler).await;
    }
    println!("# kubewasm plugin runtime benchmarks");
    println!(
        "{OBJECTS} ConfigMaps of {json_size} bytes of JSON each, replayed to one handler; median of {ROUNDS} rounds\n"
    );
    println!("| handler | events/s | us per event |");
    println!("|---|---|---|");
    let mut rates = Vec::new();
    // KUBEWASM_BENCH_ONLY=wasm-noop runs only that case, many rounds (for profiling).
    let only_noop = only == "wasm-noop";
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

    update_event_cost(&server, &factory, &client, &no_ops, UpdateSetup::CPU).await?;
    reconcile_rate(&factory, &client, &reconciler).await?;

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
    println!(
        "Idle plugins: distinct components (the probe with a different custom section each, so \
         each is compiled and kept on its own), subscribed to an empty namespace.\n"
    );
    println!("| idle plugins loaded | RSS growth | per plugin |");
    println!("|---|---|---|");
    let base = rss_bytes();
    let mut loaded = 0;
    for target in [1, 10, 100] {
        while loaded < target {
            // Distinct components (a custom section each), compiled and kept separately, as
            // different plugins are; not copies sharing one compiled module.
            host.load(
                Path::new(&format!("idle-{loaded}.wasm")),
                kubewasm_tests::variant(&probe, 1_000 + loaded),
            )
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

/// The no-op plugins of each contract version, for the update-event measurement.
struct NoOpGuests {
    /// The probe guest, in its `noop` mode.
    v0_1: Vec<u8>,
    /// World `observer` (one call per event).
    v0_2: Vec<u8>,
    /// World `batch-observer` (one call per batch).
    v0_2_1: Vec<u8>,
}

/// Resyncs per CPU window: `KUBEWASM_BENCH_RESYNCS`, or [`RESYNCS`]. A longer window spreads
/// what the process does besides the events (timers, the in-process dev server) over more
/// of them, so the own costs, small differences of two windows, move less between rounds.
fn cpu_resyncs() -> anyhow::Result<usize> {
    match std::env::var("KUBEWASM_BENCH_RESYNCS") {
        Err(_) => Ok(RESYNCS as usize),
        Ok(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| {
                anyhow::anyhow!("KUBEWASM_BENCH_RESYNCS={text:?}: a positive number of resyncs")
            }),
    }
}

/// How the update-event measurement runs.
#[derive(Clone, Copy)]
struct UpdateSetup {
    meter: Meter,
    /// Cached ConfigMaps, each re-delivered by every resync.
    objects: usize,
    /// Resyncs per measurement window.
    resyncs: usize,
}

impl UpdateSetup {
    /// CPU time of every thread but the measuring one, over 40,000 objects and 6 resyncs a
    /// window.
    const CPU: UpdateSetup = UpdateSetup {
        meter: Meter::Cpu,
        objects: UPDATE_OBJECTS,
        resyncs: RESYNCS as usize,
    };
    /// Instructions under callgrind, which runs the process some 50 times slower: fewer
    /// objects, so that a resync is still handled within its 1 s period.
    const INSTRUCTIONS: UpdateSetup = UpdateSetup {
        meter: Meter::Instructions,
        objects: 2_000,
        resyncs: 2,
    };

    /// A measured cost as the tables show it.
    fn show(self, value: f64) -> String {
        match self.meter {
            Meter::Cpu => format!("{:.2}", value / 1e3),
            Meter::Instructions => format!("{value:.0}"),
        }
    }

    fn unit(self) -> &'static str {
        match self.meter {
            Meter::Cpu => "CPU us",
            Meter::Instructions => "instructions",
        }
    }
}

/// Median, lowest and highest of `v`, and the range (highest less lowest) as a percentage of
/// the median's magnitude.
fn spread(v: &[f64]) -> (f64, f64, f64, f64) {
    let low = v.iter().copied().fold(f64::INFINITY, f64::min);
    let high = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mid = median(v.to_vec());
    (mid, low, high, 100.0 * (high - low) / mid.abs())
}

/// The cost of an update event through a native no-op handler and a no-op wasm plugin of each
/// contract version on the same informer, driven by resyncs (every cached object re-delivered
/// as an update of old and new), with the production metrics observer counting every event as
/// `kubewasm run` does: CPU time, or instructions under callgrind (`setup`).
async fn update_event_cost(
    server: &DevServer,
    factory: &SharedInformerFactory,
    client: &kube::Client,
    guests: &NoOpGuests,
    setup: UpdateSetup,
) -> anyhow::Result<()> {
    let objects = setup.objects;
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": UPDATE_NAMESPACE}}))
        .map_err(|e| anyhow::anyhow!("namespace: {e:?}"))?;
    create_config_maps(server, UPDATE_NAMESPACE, objects)?;
    let (resource, _) = kubewasm_informer::KindResolver::new(client.clone())
        .resolve(&GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await?;
    let informer = factory.informer_for(InformerKey::all(resource).in_namespace(UPDATE_NAMESPACE));
    factory.start();
    informer.wait_synced().await;
    let cache_dir = tempfile::tempdir()?;
    let metrics = Arc::new(Metrics::new(Arc::new(Vec::new)));
    let host = plugin_host(
        factory,
        client,
        cache_dir.path(),
        metrics.clone(),
        |p: &Path| {
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            PluginPolicy {
                config: if stem.starts_with("observer") || stem.starts_with("batch") {
                    json!({"name": stem, "namespace": UPDATE_NAMESPACE, "resyncSeconds": 1})
                        .to_string()
                } else {
                    probe_resync_config(&stem)
                },
                ..PluginPolicy::default()
            }
        },
    )?;
    let idle_per_s = idle_rate(setup.meter, Duration::from_secs(2)).await?;

    // A handler that stays registered throughout: without it, unloading the last plugin leaves
    // the informer without handlers, the host stops it, and the native handler of the next
    // round would be registered on a stopped informer (a replay but no resyncs). It has no
    // resync period, so resyncs never reach it.
    let keepalive = informer.add_event_handler(
        Arc::new(Counting {
            span: Arc::new(Span::default()),
            parse: false,
        }),
        None,
    );
    // Inline native windows bracket every round (inline native, native on its own thread, 0.1,
    // 0.2, 0.2.1, inline native, ...; a round's closing window opens the next round): every
    // other handler's own cost is taken against the inline native cost interpolated to the
    // middle of its window, so a drift over the minutes of a run (the machine's load, the
    // heap's layout) cancels instead of landing on whichever handler is measured furthest from
    // the native window.
    let mut native = Vec::new();
    let mut threaded = Vec::new();
    let mut wasm = Vec::new();
    let mut wasm_v0_2 = Vec::new();
    let mut wasm_batch = Vec::new();
    let mut incomplete = 0;
    let mut per_call = Vec::new();
    let mut opening = native_window(
        &informer,
        Native::Inline,
        setup,
        "native round 0 (opening)",
        idle_per_s,
    )
    .await?;
    for round_number in 0..ROUNDS {
        let thread = native_window(
            &informer,
            Native::Thread,
            setup,
            &format!("native thread round {round_number}"),
            idle_per_s,
        )
        .await?;
        let mut round = Vec::new();
        for (file, bytes) in [
            ("resync-noop.wasm", &guests.v0_1),
            ("observer-noop.wasm", &guests.v0_2),
            ("batch-noop.wasm", &guests.v0_2_1),
        ] {
            let id = host.load(Path::new(file), bytes.to_vec()).await?;
            let delivered = || calls_returned(&host, id);
            wait_calls(&host, id, objects).await;
            let label = format!("{file} round {round_number}");
            let name = file.trim_end_matches(".wasm");
            round.push(
                cost_per_update(
                    delivered,
                    || handler_counts(&metrics, name).map(|(_, calls)| calls),
                    objects,
                    setup.resyncs,
                    setup.meter,
                    &label,
                    idle_per_s,
                )
                .await?,
            );
            if file.starts_with("batch") {
                per_call.extend(events_per_call(&metrics, "batch-noop"));
            }
            host.unload(id).await;
        }
        let closing = native_window(
            &informer,
            Native::Inline,
            setup,
            &format!("native round {round_number} (closing)"),
            idle_per_s,
        )
        .await?;
        // A round counts only whole: the differences are taken within a round.
        match (opening, thread, round[0], round[1], round[2], closing) {
            (Some(before), Some(t), Some(a), Some(b), Some(c), Some(after)) => {
                let own = |w: Measured| w.cost - interpolate(before, after, w.middle);
                eprintln!(
                    "round {round_number}: native {} and {}; native thread {} (own {}), 0.1 {} \
                     (own {}), 0.2 {} (own {}), 0.2.1 {} (own {}) {} per update",
                    setup.show(before.cost),
                    setup.show(after.cost),
                    setup.show(t.cost),
                    setup.show(own(t)),
                    setup.show(a.cost),
                    setup.show(own(a)),
                    setup.show(b.cost),
                    setup.show(own(b)),
                    setup.show(c.cost),
                    setup.show(own(c)),
                    setup.unit()
                );
                if native.is_empty() {
                    native.push(before.cost);
                }
                native.push(after.cost);
                threaded.push((t.cost, own(t)));
                wasm.push((a.cost, own(a)));
                wasm_v0_2.push((b.cost, own(b)));
                wasm_batch.push((c.cost, own(c)));
            }
            measured => {
                eprintln!(
                    "an incomplete round (native, native thread, 0.1, 0.2, 0.2.1, native): \
                     {measured:?}"
                );
                incomplete += 1
            }
        }
        opening = closing;
    }
    informer.remove_event_handler(&keepalive);
    if wasm.is_empty() {
        println!(
            "Cost per update event: not measured in this run (resync updates stopped arriving in \
             every one of the {incomplete} rounds).\n"
        );
        host.shutdown(Duration::from_secs(5)).await;
        return Ok(());
    }
    let counted = match setup.meter {
        Meter::Cpu => format!(
            "the process's CPU time (`CLOCK_PROCESS_CPUTIME_ID`) less the measuring thread's \
             (`CLOCK_THREAD_CPUTIME_ID`: the bench's polling of the counts) and less the idle \
             rate ({:.1} ms/s)",
            idle_per_s / 1e6
        ),
        Meter::Instructions => format!(
            "instructions of every thread counted by callgrind (zeroed at the window's start, \
             dumped at its end) less the idle rate ({:.0} instructions/s of the run under \
             callgrind)",
            idle_per_s
        ),
    };
    println!(
        "{} per update event (old and new object handed to the handler), {objects} cached \
         ConfigMaps re-delivered by a 1 s resync, {} resyncs per measurement, {} whole rounds of \
         {ROUNDS} (each measures a native handler on its own thread and the three plugins in turn \
         between two windows of the inline native handler, {} of those \
         windows in all); {counted}; the wasm plugins run with the production metrics observer \
         (`kubewasm::metrics::Metrics`). A plugin's own cost is its cost less the native cost \
         interpolated between the native windows before and after it, to the middle of its \
         window: median, the range over the rounds, and the range as a share of the median.\n",
        setup.unit(),
        setup.resyncs,
        wasm.len(),
        native.len(),
    );
    let unit = setup.unit();
    println!(
        "| handler | {unit} per update event (median, range) | own cost over native (median) | own cost, range | range / median |"
    );
    println!("|---|---|---|---|---|");
    let (mid, low, high, _) = spread(&native);
    println!(
        "| native no-op handler, called inline on the informer's thread as a plugin's feeder is \
         (resync, store, dispatch included) | {} ({} to {}) | - | - | - |",
        setup.show(mid),
        setup.show(low),
        setup.show(high)
    );
    for (label, measured) in [
        (
            "native no-op handler on a listener thread of its own (`add_event_handler`)",
            &threaded,
        ),
        ("wasm no-op plugin, contract 0.1 (probe guest)", &wasm),
        (
            "wasm no-op plugin, contract 0.2, world `observer`",
            &wasm_v0_2,
        ),
        (
            "wasm no-op plugin, contract 0.2.1, world `batch-observer`",
            &wasm_batch,
        ),
    ] {
        let own: Vec<f64> = measured.iter().map(|(_, own)| *own).collect();
        let absolute: Vec<f64> = measured.iter().map(|(cost, _)| *cost).collect();
        let (abs, abs_low, abs_high, _) = spread(&absolute);
        let (mid, low, high, share) = spread(&own);
        println!(
            "| {label} | {} ({} to {}) | {} | {} to {} | {share:.0}% |",
            setup.show(abs),
            setup.show(abs_low),
            setup.show(abs_high),
            setup.show(mid),
            setup.show(low),
            setup.show(high)
        );
    }
    if !per_call.is_empty() {
        println!(
            "\nThe batch plugin received {:.0} events per call (median over the rounds; its \
             replay and every resync).",
            median(per_call)
        );
    }
    println!();
    host.shutdown(Duration::from_secs(5)).await;
    Ok(())
}

/// Events per handler call of plugin `plugin` so far, from the metrics it reports.
fn events_per_call(metrics: &Metrics, plugin: &str) -> Option<f64> {
    let (events, calls) = handler_counts(metrics, plugin)?;
    (calls > 0.0).then(|| events / calls)
}

/// Events handled and handler calls of plugin `plugin` so far, from the metrics it reports;
/// `None` before it reported any.
fn handler_counts(metrics: &Metrics, plugin: &str) -> Option<(f64, f64)> {
    let label = format!("plugin=\"{plugin}\"");
    let text = metrics.encode();
    let sum = |prefix: &str| -> Option<f64> {
        text.lines()
            .filter(|l| l.starts_with(prefix) && l.contains(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .reduce(|a, b| a + b)
    };
    Some((
        sum("kubewasm_plugin_events_total{")?,
        sum("kubewasm_plugin_handler_duration_seconds_count{")?,
    ))
}

/// Reconciles per second of a no-op reconcile (the `reconciler-v0-2` guest): loaded over the
/// `OBJECTS` cached ConfigMaps, its own-key rule queues every key on the replay, and each is
/// reconciled once. Rate = keys / time from the load until the last key is reconciled (the load
/// itself, about a millisecond from the compile cache, included); CPU = whole-process CPU time
/// over the same span less the idle rate; median of `ROUNDS`, with 1 and 2 workers
/// (`max-concurrent-reconciles`).
async fn reconcile_rate(
    factory: &SharedInformerFactory,
    client: &kube::Client,
    reconciler: &[u8],
) -> anyhow::Result<()> {
    let idle_window = Duration::from_secs(2);
    let (cpu0, t0) = (process_cpu_ns(), Instant::now());
    tokio::time::sleep(idle_window).await;
    let idle_ns_per_s = (process_cpu_ns() - cpu0) as f64 / t0.elapsed().as_secs_f64();
    println!(
        "### Reconciles per second\n\nNo-op `reconcile` (guest `reconciler-v0-2`, contract 0.2 \
         world `reconciler`): {OBJECTS} cached ConfigMaps, each key queued once by the replay \
         and reconciled once; from load to the last reconcile; median of {ROUNDS}; CPU = \
         whole-process CPU less the idle rate ({:.1} ms/s). The plugin's reconcile rate limit \
         (200 a second by default, `reconciles-per-second`) is raised out of the way: this \
         measures the runtime, not the limit.\n",
        idle_ns_per_s / 1e6
    );
    println!("| workers (max-concurrent-reconciles) | reconciles/s | CPU us per reconcile |");
    println!("|---|---|---|");
    for workers in [1usize, 2] {
        let cache_dir = tempfile::tempdir()?;
        let host = plugin_host(
            factory,
            client,
            cache_dir.path(),
            Arc::new(Metrics::new(Arc::new(Vec::new))),
            move |_: &Path| PluginPolicy {
                config: json!({"name": "bench-reconciler", "namespace": NAMESPACE}).to_string(),
                reconcile: ReconcileSettings {
                    max_concurrent_reconciles: workers,
                    reconciles_per_second: 1e9,
                    reconcile_burst: 1_000_000,
                    ..ReconcileSettings::default()
                },
                ..PluginPolicy::default()
            },
        )?;
        // Compiled once, so every round loads from the cache.
        host.engine()
            .compile(Path::new("reconciler.wasm"), reconciler.to_vec())
            .await?;
        let mut rates = Vec::new();
        let mut cpu = Vec::new();
        for _ in 0..ROUNDS {
            let (cpu0, t0) = (process_cpu_ns(), Instant::now());
            let id = host
                .load(Path::new("reconciler.wasm"), reconciler.to_vec())
                .await?;
            wait_calls(&host, id, OBJECTS).await;
            let elapsed = t0.elapsed().as_secs_f64();
            let used = (process_cpu_ns() - cpu0) as f64 - idle_ns_per_s * elapsed;
            rates.push(OBJECTS as f64 / elapsed);
            cpu.push(used.max(0.0) / OBJECTS as f64 / 1e3);
            host.unload(id).await;
        }
        println!("| {workers} | {:.0} | {:.2} |", median(rates), median(cpu));
        host.shutdown(Duration::from_secs(5)).await;
    }
    println!();
    Ok(())
}

/// Guest calls of plugin `id` that returned (handler calls or reconciles).
fn calls_returned(host: &PluginHost, id: kubewasm_runtime::PluginId) -> usize {
    host.plugins()
        .iter()
        .find(|p| p.id == id)
        .map_or(0, |p| (p.events_delivered + p.reconciles) as usize)
}

/// Waits until plugin `id` has returned from `n` guest calls.
async fn wait_calls(host: &PluginHost, id: kubewasm_runtime::PluginId, n: usize) {
    while calls_returned(host, id) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
