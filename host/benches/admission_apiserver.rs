//! Admission latency as kube-apiserver sees it (run with `cargo xtask bench admission_apiserver`,
//! or `KUBEBUILDER_ASSETS=... cargo bench -p kubewasm-devserver -p kubewasm-informer -p kubewasm
//! --bench admission_apiserver`): a real kube-apiserver and etcd from the envtest assets, the
//! unique-Ingress-host example served by a plugin host on loopback (its
//! ValidatingWebhookConfiguration stored there, as `kubewasm test` and `kubewasm dev` store it), and Ingress
//! creates through the API server, every other one a duplicate host (denied).
//!
//! Three views of the same reviews: the API server's own histogram
//! `apiserver_admission_webhook_admission_duration_seconds` (its /metrics read as admin before
//! and after; the call to the webhook as the API server times it: TLS, HTTP and the host), the
//! host's `kubewasm_admission_review_duration_seconds` (body read to answer), and the client's
//! round trip of the whole create (authentication, admission, etcd for the allowed ones).
//! A histogram's quantile is given as the upper bound of the bucket it falls in: the API
//! server's buckets are coarse (5 ms, 25 ms, 100 ms, ...), so its figures say in which bucket
//! the calls fell, not more; the host's double from 25 µs. Prints a Markdown section;
//! without `KUBEBUILDER_ASSETS` it says it was skipped.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::PostParams;
use kubewasm::admission::AdmissionMetrics;
use kubewasm::admission::loopback::LoopbackWebhooks;
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::admission::registry::AdmissionRegistry;
use kubewasm_runtime::{HostOptions, PluginHost, StaticPolicy};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Ingresses holding a host before the reviews start.
const HOLDERS: usize = 1_000;
/// Creates through the API server, half of them denied.
const REVIEWS: usize = 1_000;
const WEBHOOK: &str = "unique-ingress-host.kubewasm.dev";

fn ingress(namespace: &str, name: &str, host: &str) -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host}]},
    }))
    .unwrap()
}

/// The cumulative bucket counts (`le` bound in seconds -> count) of histogram `metric` in the
/// Prometheus text `text`, summed over the series whose labels contain every one of `labels`
/// (`name="value"` pairs), and their `_count`.
fn buckets(text: &str, metric: &str, labels: &[&str]) -> BTreeMap<u64, f64> {
    let mut out = BTreeMap::new();
    let prefix = format!("{metric}_bucket{{");
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((series, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        if !labels.iter().all(|l| series.contains(l)) {
            continue;
        }
        let Some(le) = series
            .split(',')
            .find_map(|p| p.trim().strip_prefix("le=\""))
            .map(|v| v.trim_end_matches('"'))
        else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse::<f64>().unwrap_or(f64::NAN)
        };
        let count: f64 = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        // Keyed by the bound's bits (ordered for non-negative finite floats and +Inf).
        *out.entry(bound.to_bits()).or_insert(0.0) += count;
    }
    out
}

/// `after - before`, bucket by bucket.
fn delta(after: &BTreeMap<u64, f64>, before: &BTreeMap<u64, f64>) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|(bound, n)| {
            (
                f64::from_bits(*bound),
                n - before.get(bound).copied().unwrap_or(0.0),
            )
        })
        .collect()
}

/// The upper bound of the bucket holding the `q` quantile of cumulative buckets (all a
/// histogram can say without guessing where in the bucket the observations fell); `None`
/// without observations or in the +Inf bucket.
fn bucket_of(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    buckets
        .iter()
        .find(|(_, count)| *count >= q * total)
        .map(|(bound, _)| *bound)
        .filter(|bound| bound.is_finite())
}

fn millis(seconds: f64) -> String {
    format!("{:.3} ms", seconds * 1e3)
}

fn at_most(bound: Option<f64>) -> String {
    bound.map_or("-".into(), |s| format!("≤ {}", millis(s)))
}

async fn api_server_metrics(client: &kube::Client) -> String {
    client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .expect("the API server's /metrics")
}

fn host_metrics(metrics: &AdmissionMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("kubewasm");
    metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

/// Serves the unique-ingress-host policy's webhook on loopback for the API server of `client`
/// and stores its configuration there.
async fn serve(
    client: &kube::Client,
    cancel: &CancellationToken,
) -> (PluginHost, AdmissionMetrics) {
    let registry = AdmissionRegistry::default();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory,
        client.clone(),
        HostOptions {
            admission: registry.clone(),
            policy: Arc::new(StaticPolicy::default()),
            ..HostOptions::default()
        },
    )
    .expect("plugin host");
    host.load(
        Path::new("unique-ingress-host.wasm"),
        kubewasm_tests::guest_bytes("unique-ingress-host"),
    )
    .await
    .expect("the policy loads");
    // Served and configured as `kubewasm test` and `kubewasm dev` do for their API server.
    let metrics = AdmissionMetrics::default();
    let webhooks = LoopbackWebhooks::start(
        registry.clone(),
        metrics.clone(),
        client.clone(),
        cancel.clone(),
    )
    .await
    .expect("the webhook endpoint starts");
    webhooks
        .sync(&registry.declarations())
        .await
        .expect("the webhook configuration is stored");
    (host, metrics)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("### Latency seen by kube-apiserver\n");
    if let Err(e) = kubewasm_tests::envtest::assets_from_env() {
        println!("Skipped: {e} (set KUBEBUILDER_ASSETS to the envtest binaries).");
        return;
    }
    let server = kubewasm_tests::envtest::Envtest::start()
        .await
        .unwrap_or_else(|e| panic!("the real API server does not start: {e}"));
    let client = server.admin();
    for ns in ["team-a", "team-b"] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
    }
    let holders: Api<Ingress> = Api::namespaced(client.clone(), "team-a");
    for i in 0..HOLDERS {
        holders
            .create(
                &PostParams::default(),
                &ingress(
                    "team-a",
                    &format!("ing-{i}"),
                    &format!("host-{i}.example.com"),
                ),
            )
            .await
            .expect("holder");
    }
    eprintln!("admission_apiserver: {HOLDERS} Ingresses stored");
    let cancel = CancellationToken::new();
    let (host, metrics) = serve(&client, &cancel).await;
    let incoming: Api<Ingress> = Api::namespaced(client.clone(), "team-b");
    // Wait until the API server calls the webhook (it finds its configuration by a watch) and
    // the host's cache holds the Ingresses (a duplicate is denied), then warm up.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let duplicate = ingress("team-b", "copy", "host-0.example.com");
    let started = Instant::now();
    while incoming.create(&dry, &duplicate).await.is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the webhook never denies"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..50 {
        let _ = incoming
            .create(
                &dry,
                &ingress("team-b", &format!("warm-{i}"), "warm.example.com"),
            )
            .await;
    }

    let apiserver = "apiserver_admission_webhook_admission_duration_seconds";
    let hostside = "kubewasm_admission_review_duration_seconds";
    let name = format!("name=\"{WEBHOOK}\"");
    let before = api_server_metrics(&client).await;
    let host_before = host_metrics(&metrics);
    let mut round_trips = Vec::with_capacity(REVIEWS);
    let mut denied = 0;
    let wall = Instant::now();
    for i in 0..REVIEWS {
        let host = if i % 2 == 0 {
            format!("new-{i}.example.com")
        } else {
            format!("host-{}.example.com", (i * 97) % HOLDERS)
        };
        let t = Instant::now();
        let answer = incoming
            .create(
                &PostParams::default(),
                &ingress("team-b", &format!("in-{i}"), &host),
            )
            .await;
        round_trips.push(t.elapsed());
        if answer.is_err() {
            denied += 1;
        }
    }
    let wall = wall.elapsed();
    let after = api_server_metrics(&client).await;
    let host_after = host_metrics(&metrics);
    assert_eq!(denied, REVIEWS / 2, "every duplicate and only they denied");

    let seen = delta(
        &buckets(&after, apiserver, &[&name]),
        &buckets(&before, apiserver, &[&name]),
    );
    let reviewed = seen.last().map_or(0.0, |b| b.1);
    let plugin = "plugin=\"unique-ingress-host\"";
    let in_host = delta(
        &buckets(&host_after, hostside, &[plugin]),
        &buckets(&host_before, hostside, &[plugin]),
    );
    round_trips.sort();
    let at = |q: f64| {
        round_trips[((round_trips.len() as f64 * q) as usize).min(round_trips.len() - 1)]
            .as_secs_f64()
    };
    println!(
        "{HOLDERS} Ingresses in the cache; {REVIEWS} Ingress creates through kube-apiserver one \
         at a time, every other one a duplicate host (denied); {reviewed:.0} webhook calls in \
         the API server's histogram for `{WEBHOOK}`; {:.0} creates/s.\n",
        REVIEWS as f64 / wall.as_secs_f64()
    );
    println!("| view | p50 | p99 |");
    println!("| --- | ---: | ---: |");
    println!(
        "| kube-apiserver: `{apiserver}` (buckets {}) | {} | {} |",
        seen.iter()
            .filter(|b| b.0.is_finite())
            .map(|b| format!("{}", b.0))
            .collect::<Vec<_>>()
            .join(", "),
        at_most(bucket_of(&seen, 0.5)),
        at_most(bucket_of(&seen, 0.99))
    );
    println!(
        "| host: `{hostside}` | {} | {} |",
        at_most(bucket_of(&in_host, 0.5)),
        at_most(bucket_of(&in_host, 0.99))
    );
    println!(
        "| client: the create's round trip | {} | {} |",
        millis(at(0.5)),
        millis(at(0.99))
    );
    cancel.cancel();
    drop(host);
}
