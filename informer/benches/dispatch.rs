//! Dispatch throughput: events through reflector, DeltaFIFO, store and processor to 0, 1 and 10
//! no-op native handlers; no API server (a ListerWatcher feeds 10k objects, then 200k updates).
//!
//! `cargo bench -p kubewasm-informer --bench dispatch`
//! Environment: `BENCH_CACHED` (default 10000), `BENCH_EVENTS` (default 200000),
//! `BENCH_REPEATS` (default 5; the median run by CPU time is shown), `BENCH_HANDLERS` (default
//! `0,1,10`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::future::BoxFuture;
use futures::stream;
use kubewasm_informer::{
    InformerOptions, ListPage, ListerWatcher, Object, ObjectRef, ParseOptions, ReflectorOptions,
    ResourceEventHandler, SharedIndexInformer, WatchEvent, WatchStream,
};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The 1000-character data value of object `i` (26 variants, made once so that making events
/// costs little next to what is measured).
fn value(i: u64) -> &'static str {
    static VALUES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let values = VALUES.get_or_init(|| {
        (0..26u64)
            .map(|i| {
                (0..1000)
                    .map(|k| (b'a' + ((i + k) % 26) as u8) as char)
                    .collect()
            })
            .collect()
    });
    &values[(i % 26) as usize]
}

/// The JSON of object `i` at resourceVersion `rv`: ~1.6 KB with one managedFields entry.
fn object_json(i: u64, rv: u64) -> String {
    let value = value(i);
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"bench-{i:06}","namespace":"default","uid":"5d3c1f6e-0000-4000-8000-{i:012}","resourceVersion":"{rv}","creationTimestamp":"2026-11-29T12:00:00Z","labels":{{"app.kubernetes.io/name":"bench"}},"annotations":{{"bench.kubewasm.io/note":"object number {i}"}},"managedFields":[{{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{".":{{}},"f:value":{{}}}},"f:metadata":{{"f:annotations":{{".":{{}},"f:bench.kubewasm.io/note":{{}}}},"f:labels":{{".":{{}},"f:app.kubernetes.io/name":{{}}}}}}}},"manager":"kubectl-client-side-apply","operation":"Update","time":"2026-11-29T12:00:00Z"}}]}},"data":{{"value":"{value}"}}}}"#
    )
}

fn parse_options() -> ParseOptions {
    ParseOptions {
        strip_managed_fields: true,
        type_meta: None,
    }
}

/// Lists `cached` objects, then, once `go` is set, streams `events` updates round-robin over
/// them (so the measured window holds only the updates, not the initial list).
struct Feed {
    cached: u64,
    events: u64,
    go: tokio::sync::watch::Receiver<bool>,
}

impl ListerWatcher for Feed {
    fn list(
        &self,
        _continue_token: Option<String>,
    ) -> BoxFuture<'_, kubewasm_informer::Result<ListPage>> {
        let cached = self.cached;
        Box::pin(async move {
            let items = (0..cached)
                .map(|i| Object::parse(&object_json(i, 1), &parse_options()))
                .collect::<kubewasm_informer::Result<Vec<_>>>()?;
            Ok(ListPage {
                items,
                resource_version: "1".into(),
                continue_token: None,
            })
        })
    }

    fn watch(
        &self,
        _rv: String,
        _initial: bool,
        _timeout: std::time::Duration,
    ) -> BoxFuture<'_, kubewasm_informer::Result<WatchStream>> {
        let (cached, events) = (self.cached, self.events);
        let mut go = self.go.clone();
        Box::pin(async move {
            let _ = go.wait_for(|go| *go).await;
            let updates = stream::iter(0..events).map(move |j| {
                let json = object_json(j % cached, 2 + j);
                Object::parse(&json, &parse_options()).map(WatchEvent::Modified)
            });
            let stream: WatchStream = Box::pin(updates.chain(stream::pending()));
            Ok(stream)
        })
    }
}

use futures::StreamExt;

#[derive(Default)]
struct Count(AtomicU64);

impl ResourceEventHandler for Count {
    fn on_add(&self, _: &ObjectRef, _: bool) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn on_update(&self, _: &ObjectRef, _: &ObjectRef) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn on_delete(&self, _: &ObjectRef, _: bool) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

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

struct Figures {
    wall: Duration,
    cpu_ms: f64,
}

async fn run(handlers: usize, cached: u64, events: u64) -> Figures {
    let (go, go_rx) = tokio::sync::watch::channel(false);
    let informer = SharedIndexInformer::new(
        Arc::new(Feed {
            cached,
            events,
            go: go_rx,
        }),
        InformerOptions {
            reflector: ReflectorOptions {
                list: kubewasm_informer::ListStrategy::Paginated,
                ..ReflectorOptions::default()
            },
            ..InformerOptions::default()
        },
    );
    let counts: Vec<Arc<Count>> = (0..handlers).map(|_| Arc::new(Count::default())).collect();
    for c in &counts {
        informer.add_event_handler(c.clone(), None);
    }
    let total = cached + events;
    informer.start();
    informer.wait_synced().await;
    let cpu0 = cpu_ms();
    let started = Instant::now();
    let _ = go.send(true);
    loop {
        let done = if handlers == 0 {
            informer.stats().events >= total
        } else {
            counts.iter().all(|c| c.0.load(Ordering::Relaxed) >= total)
        };
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let figures = Figures {
        wall: started.elapsed(),
        cpu_ms: cpu_ms() - cpu0,
    };
    informer.stop().await;
    figures
}

fn main() -> Result<()> {
    let cached = env_u64("BENCH_CACHED", 10_000);
    let events = env_u64("BENCH_EVENTS", 200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;

    // The cost of making the events (formatting and parsing 1.6 KB of JSON), measured alone.
    let cpu0 = cpu_ms();
    let started = Instant::now();
    let mut bytes = 0usize;
    for j in 0..events {
        let o = Object::parse(&object_json(j % cached, 2 + j), &parse_options())?;
        bytes += o.json().len();
    }
    let parse_wall = started.elapsed();
    let parse_cpu = cpu_ms() - cpu0;
    eprintln!(
        "parsed {events} objects ({} B stored each)",
        bytes as u64 / events
    );

    println!();
    println!(
        "Dispatch of {events} updates over {cached} cached ConfigMaps (~1.6 KB JSON), no-op handlers"
    );
    println!("| handlers | events/s | CPU us/event (all) | CPU us/event (without JSON parse) |");
    println!("|---|---|---|---|");
    let parse_us = parse_cpu * 1000.0 / events as f64;
    println!(
        "| (making and parsing the JSON only) | {:.0} | {parse_us:.2} | - |",
        events as f64 / parse_wall.as_secs_f64()
    );
    let repeats = env_u64("BENCH_REPEATS", 5) as usize;
    let mut per_handler = Vec::new();
    let counts: Vec<usize> = std::env::var("BENCH_HANDLERS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, 1, 10]);
    for &handlers in &counts {
        let mut runs: Vec<Figures> = (0..repeats)
            .map(|_| rt.block_on(run(handlers, cached, events)))
            .collect();
        runs.sort_by(|a, b| a.cpu_ms.total_cmp(&b.cpu_ms));
        let f = &runs[runs.len() / 2];
        let us = f.cpu_ms * 1000.0 / events as f64;
        per_handler.push(us);
        println!(
            "| {handlers} | {:.0} | {us:.2} | {:.2} |",
            events as f64 / f.wall.as_secs_f64(),
            us - parse_us
        );
    }
    if let [_, one, ten] = per_handler[..] {
        println!(
            "Each additional handler (1 -> 10): {:.2} us of CPU per event; medians of {repeats} runs",
            (ten - one) / 9.0
        );
    }
    Ok(())
}
