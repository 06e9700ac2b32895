//! Watch fan-out throughput: events per second delivered to 10 concurrent watchers through
//! kube's client, plus the seeding, paged-list and streaming-list rates later benchmarks rely
//! on.
//!
//! Run: `cargo bench -p kubewasm-devserver --bench watch_fanout` (prints figures, no timing
//! assertions).

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kubewasm_devserver::{DevServer, Options};
use serde_json::{Value, json};

const WATCHERS: usize = 10;
const EVENTS: usize = 20_000;
const SEED: usize = 100_000;

/// A ConfigMap of about 1.6 KB of JSON: a 1000-character value, a label and an annotation.
fn config_map(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("cm-{i:06}"),
            "namespace": "bench",
            "labels": {"app": "bench"},
            "annotations": {"bench.kubewasm.dev/note": "x".repeat(200)},
        },
        "data": {"value": "v".repeat(1000)},
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = DevServer::start(Options {
        history_size: EVENTS + 1,
        ..Options::default()
    })
    .await?;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "bench");
    let rv = api
        .list(&ListParams::default().limit(1))
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), "bench");
        let stream = api.watch(&WatchParams::default(), &rv).await?;
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut received = 0;
            while received < EVENTS {
                match tokio::time::timeout(Duration::from_secs(60), stream.next()).await {
                    Ok(Some(Ok(WatchEvent::Added(_)))) => received += 1,
                    Ok(Some(Ok(_))) => {}
                    other => anyhow::bail!("watch ended early after {received}: {other:?}"),
                }
            }
            Ok(Instant::now())
        }));
    }
    let started = Instant::now();
    for i in 0..EVENTS {
        server.create(config_map(i))?;
    }
    let created = started.elapsed();
    let mut last = started;
    for watcher in watchers {
        last = last.max(watcher.await??);
    }
    let elapsed = last - started;
    let delivered = (EVENTS * WATCHERS) as f64;
    println!(
        "- watch fan-out: {EVENTS} events x {WATCHERS} watchers (kube Api::watch, typed ConfigMap) \
         in {:.2} s = {:.0} events/s delivered ({:.0} events/s per watcher); creates alone took \
         {:.2} s",
        elapsed.as_secs_f64(),
        delivered / elapsed.as_secs_f64(),
        EVENTS as f64 / elapsed.as_secs_f64(),
        created.as_secs_f64(),
    );

    let seeding = Instant::now();
    for i in EVENTS..SEED {
        server.create(config_map(i))?;
    }
    let seeded = seeding.elapsed();
    println!(
        "- seeding: {} ConfigMaps of ~1.6 KB through DevServer::create in {:.2} s = {:.0} creates/s",
        SEED - EVENTS,
        seeded.as_secs_f64(),
        (SEED - EVENTS) as f64 / seeded.as_secs_f64()
    );

    let listing = Instant::now();
    let mut token: Option<String> = None;
    let mut listed = 0;
    loop {
        let mut params = ListParams::default().limit(500);
        if let Some(t) = token.take() {
            params = params.continue_token(&t);
        }
        let page = api.list(&params).await?;
        listed += page.items.len();
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    let list_time = listing.elapsed();
    println!(
        "- paged list: {listed} ConfigMaps, 500 per page, typed kube client, in {:.2} s = {:.0} \
         objects/s (client decoding included)",
        list_time.as_secs_f64(),
        listed as f64 / list_time.as_secs_f64()
    );
    let streaming = Instant::now();
    let mut initial = 0;
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    while let Some(event) = stream.next().await {
        match event? {
            watcher::Event::InitApply(_) => initial += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    let stream_time = streaming.elapsed();
    println!(
        "- streaming list (kube watcher, sendInitialEvents): {initial} ConfigMaps in {:.2} s = \
         {:.0} objects/s (client decoding included)",
        stream_time.as_secs_f64(),
        initial as f64 / stream_time.as_secs_f64()
    );
    server.shutdown().await;
    Ok(())
}
