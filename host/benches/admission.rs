//! Admission review latency (run with `cargo xtask bench admission`, or `cargo bench -p
//! kubewasm-devserver -p kubewasm-informer -p kubewasm --bench admission`): reviews per
//! second and p50 / p99 per review for a no-op policy (the admission-probe test guest, which
//! parses the object's metadata and allows it) and for the unique-Ingress-host example against
//! 10,000 Ingresses in the shared cache (each review looks its host up in the `host` index and
//! reads the holder's JSON; every other review is a duplicate, denied), and the RoleBinding
//! lookup (the bound-service-account test guest) against 10,000 RoleBindings: 100 namespaces of
//! 100 bindings, the account names `sa-0`..`sa-99` bound in every namespace, so a lookup by
//! subject finds 100 candidates and reads them in namespace order until one is in the Pod's
//! namespace. Every other review is a Pod in a namespace with no binding: denied after all 100.
//!
//! Two views: host-side (`AdmissionPolicy::review`, the guest call and the answer, no HTTP) and
//! over the webhook endpoint (HTTPS on loopback with a kept-alive connection, as the API server
//! calls it: TLS, HTTP, body parsing and the JSON answer included). One review at a time, then
//! four clients at once for throughput. Prints a Markdown section.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kubewasm::admission::AdmissionMetrics;
use kubewasm::admission::tls::ReloadingCert;
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::admission::declaration::WebhookKind;
use kubewasm_runtime::admission::registry::AdmissionRegistry;
use kubewasm_runtime::admission::review;
use kubewasm_runtime::{
    HostOptions, PluginHost, PluginPolicy, ResourcePattern, WriteGrant, WriteGrants,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const INGRESSES: usize = 10_000;
const BINDING_NAMESPACES: usize = 100;
const ROLE_BINDINGS: usize = 10_000;
const HOST_SIDE_REVIEWS: usize = 5_000;
const HTTPS_REVIEWS: usize = 2_000;
const CLIENTS: usize = 4;

fn review_body(object: serde_json::Value, resource: (&str, &str, &str)) -> Vec<u8> {
    let (group, kind, plural) = resource;
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": plural},
            "namespace": object["metadata"]["namespace"],
            "name": object["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": object,
            "dryRun": false,
        },
    }))
    .unwrap()
}

fn ingress(namespace: &str, name: &str, host: &str) -> serde_json::Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": name, "port": {"number": 80}}}}]}}]},
    })
}

/// RoleBinding `i`: in namespace `ns-(i % 100)`, binding the service account `sa-(i / 100)`.
fn role_binding(i: usize) -> serde_json::Value {
    let namespace = format!("ns-{}", i % BINDING_NAMESPACES);
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": format!("rb-{i}"), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app"},
        "subjects": [
            {"kind": "ServiceAccount", "name": format!("sa-{}", i / BINDING_NAMESPACES),
             "namespace": namespace},
            {"kind": "User", "name": format!("user-{i}")},
        ],
    })
}

fn pod(namespace: &str, name: &str, account: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"serviceAccountName": account,
                 "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    })
}

/// The reviews of each scenario: a no-op ConfigMap review, Ingress reviews alternating a new
/// host and one another Ingress holds, and Pod reviews alternating a bound account and an
/// account bound only in other namespaces.
fn scenarios() -> Vec<(&'static str, &'static str, Vec<Vec<u8>>)> {
    let noop = vec![review_body(
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "fine", "namespace": "default"}, "data": {"a": "b"}}),
        ("", "ConfigMap", "configmaps"),
    )];
    let unique = (0..64)
        .map(|i| {
            let host = if i % 2 == 0 {
                format!("new-{i}.example.com")
            } else {
                format!("host-{}.example.com", i * 97)
            };
            review_body(
                ingress("incoming", &format!("in-{i}"), &host),
                ("networking.k8s.io", "Ingress", "ingresses"),
            )
        })
        .collect();
    let bound = (0..64)
        .map(|i| {
            let namespace = if i % 2 == 0 {
                format!("ns-{}", (i * 7) % BINDING_NAMESPACES)
            } else {
                "incoming".into()
            };
            review_body(
                pod(&namespace, &format!("pod-{i}"), &format!("sa-{i}")),
                ("", "Pod", "pods"),
            )
        })
        .collect();
    vec![
        ("no-op (admission-probe)", "probe", noop),
        (
            "unique Ingress host, 10,000 Ingresses",
            "unique-ingress-host",
            unique,
        ),
        (
            "RoleBinding lookup, 10,000 RoleBindings",
            "bound-service-account",
            bound,
        ),
    ]
}

struct Figures {
    per_second: f64,
    p50: Duration,
    p99: Duration,
}

fn figures(mut took: Vec<Duration>, wall: Duration) -> Figures {
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    Figures {
        per_second: took.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn row(scenario: &str, view: &str, clients: usize, f: &Figures) {
    println!(
        "| {scenario} | {view} | {clients} | {:.0} | {:.0} µs | {:.0} µs |",
        f.per_second,
        f.p50.as_secs_f64() * 1e6,
        f.p99.as_secs_f64() * 1e6
    );
}

type HttpsClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

fn https_client(ca: &str) -> HttpsClient {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(connector)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (server, client) = kubewasm_tests::devserver().await;
    for ns in ["incoming", "team"] {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    for i in 0..INGRESSES {
        server
            .create(ingress(
                "team",
                &format!("ing-{i}"),
                &format!("host-{i}.example.com"),
            ))
            .unwrap();
    }
    for i in 0..BINDING_NAMESPACES {
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": format!("ns-{i}")}}))
            .unwrap();
    }
    for i in 0..ROLE_BINDINGS {
        server.create(role_binding(i)).unwrap();
    }
    let registry = AdmissionRegistry::default();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory,
        client,
        HostOptions {
            admission: registry.clone(),
            policy: Arc::new(|path: &Path| PluginPolicy {
                config: if path.ends_with("probe.wasm") {
                    r#"{"name":"probe"}"#.into()
                } else {
                    String::new()
                },
                // The probe's mutating webhook on ConfigMaps needs the grant to patch them.
                writes: WriteGrants::only(vec![
                    WriteGrant::new(
                        ResourcePattern::new("", "ConfigMap"),
                        Some(vec!["patch".into()]),
                    )
                    .expect("a write grant"),
                ]),
                ..PluginPolicy::default()
            }),
            ..HostOptions::default()
        },
    )
    .expect("plugin host");
    for (file, package) in [
        ("probe.wasm", "admission-probe"),
        ("unique.wasm", "unique-ingress-host"),
        ("bound.wasm", "bound-service-account"),
    ] {
        host.load(Path::new(file), kubewasm_tests::guest_bytes(package))
            .await
            .expect("policy loads");
    }
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let cancel = CancellationToken::new();
    let (addr, _) = kubewasm::admission::server::serve(
        "127.0.0.1:0".parse().unwrap(),
        Arc::new(ReloadingCert::new(&cert, &key).unwrap()),
        registry.clone(),
        AdmissionMetrics::default(),
        cancel.clone(),
    )
    .await
    .unwrap();
    let https = https_client(&certified.cert.pem());

    println!("### Reviews\n");
    println!(
        "{INGRESSES} Ingresses and {ROLE_BINDINGS} RoleBindings in the cache; \
         host-side {HOST_SIDE_REVIEWS} reviews, over HTTPS {HTTPS_REVIEWS}; a policy runs at \
         most {} reviews at once.\n",
        kubewasm_runtime::ADMISSION_INSTANCES
    );
    println!("| policy | view | clients | reviews/s | p50 | p99 |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for (scenario, plugin, bodies) in scenarios() {
        let policy = registry.get(plugin).expect("registered");
        let requests: Vec<review::Request> = bodies
            .iter()
            .map(|b| review::parse(b).expect("a review"))
            .collect();
        let deadline = Duration::from_secs(5);
        // Wait for the cache (the unique-host policy fails while it fills), then warm up.
        let started = Instant::now();
        while policy
            .review(WebhookKind::Validating, &requests[0], deadline)
            .await
            .is_err()
        {
            assert!(started.elapsed() < Duration::from_secs(120), "never synced");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for r in requests.iter().cycle().take(200) {
            let _ = policy.review(WebhookKind::Validating, r, deadline).await;
        }
        // Host-side, one at a time.
        let mut took = Vec::with_capacity(HOST_SIDE_REVIEWS);
        let wall = Instant::now();
        for r in requests.iter().cycle().take(HOST_SIDE_REVIEWS) {
            let t = Instant::now();
            policy
                .review(WebhookKind::Validating, r, deadline)
                .await
                .expect("answered");
            took.push(t.elapsed());
        }
        row(scenario, "host-side", 1, &figures(took, wall.elapsed()));
        // Over HTTPS.
        let url = format!("https://{addr}/validate/{plugin}?timeout=10s");
        for clients in [1, CLIENTS] {
            let wall = Instant::now();
            let tasks: Vec<_> = (0..clients)
                .map(|c| {
                    let (https, url, bodies) = (https.clone(), url.clone(), bodies.clone());
                    tokio::spawn(async move {
                        let mut took = Vec::new();
                        for body in bodies.iter().cycle().skip(c).take(HTTPS_REVIEWS / clients) {
                            let t = Instant::now();
                            let request = http::Request::post(&url)
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(body.clone())))
                                .unwrap();
                            let response = https.request(request).await.expect("answered");
                            assert_eq!(response.status(), 200);
                            let _ = response.into_body().collect().await.unwrap();
                            took.push(t.elapsed());
                        }
                        took
                    })
                })
                .collect();
            let mut took = Vec::new();
            for t in tasks {
                took.extend(t.await.unwrap());
            }
            row(scenario, "HTTPS", clients, &figures(took, wall.elapsed()));
        }
    }
    cancel.cancel();
}
