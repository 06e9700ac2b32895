//! Admission: plugins of contract 0.3 answer the dev server's webhook calls. The dev server runs
//! its admission chain for the webhook configurations `kubewasm webhooks` would print (pointed
//! at the host's HTTPS endpoint on loopback, trusting a certificate made here), so a write
//! through kube's client is denied, mutated or let through by the guest; hostile request bodies
//! are sent to the endpoint directly.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use kubewasm::admission::configuration::{self, Endpoint};
use kubewasm::admission::tls::ReloadingCert;
use kubewasm::admission::{AdmissionMetrics, AdmissionRegistry};
use kubewasm::plugin::{HostOptions, PluginId, PluginPolicy};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use k8s_openapi::api::networking::v1::Ingress;

use super::fixture::{DevRig, config_map, namespace, plugin_status};

/// A dev server and plugin host, and the host's webhook endpoint on loopback.
struct AdmissionRig {
    rig: DevRig,
    registry: AdmissionRegistry,
    metrics: AdmissionMetrics,
    url: String,
    ca: String,
    /// Each plugin file's config string, read at every load (a reload takes the new one).
    configs: Arc<Mutex<Vec<(PathBuf, String)>>>,
    dir: tempfile::TempDir,
    cancel: CancellationToken,
}

impl Drop for AdmissionRig {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl AdmissionRig {
    async fn start() -> AdmissionRig {
        let registry = AdmissionRegistry::default();
        let configs: Arc<Mutex<Vec<(PathBuf, String)>>> = Arc::default();
        let lookup = configs.clone();
        let rig = DevRig::start(HostOptions {
            admission: registry.clone(),
            policy: Arc::new(move |path: &Path| PluginPolicy {
                config: lookup
                    .lock()
                    .iter()
                    .find(|(p, _)| p == path)
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default(),
                ..PluginPolicy::default()
            }),
            ..HostOptions::default()
        })
        .await;
        let dir = tempfile::tempdir().expect("temp dir");
        let certified =
            rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
                .expect("certificate");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let metrics = AdmissionMetrics::default();
        let cancel = CancellationToken::new();
        let (addr, _) = kubewasm::admission::server::serve(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(ReloadingCert::new(&cert, &key).expect("the pair loads")),
            registry.clone(),
            metrics.clone(),
            cancel.clone(),
        )
        .await
        .expect("webhook server");
        AdmissionRig {
            rig,
            registry,
            metrics,
            url: format!("https://{addr}"),
            ca: certified.cert.pem(),
            configs,
            dir,
            cancel,
        }
    }

    /// Loads the admission-probe guest as `file` with `config`, and stores the webhook
    /// configurations of every policy loaded so far in the dev server.
    async fn load(&self, file: &str, config: serde_json::Value) -> PluginId {
        self.load_guest("admission-probe", file, config).await
    }

    /// Loads the guest `package` as `file` with `config`, waits until the host is ready (its
    /// informers synced, its replay handled), and stores the webhook configurations (once per
    /// rig).
    async fn load_guest(&self, package: &str, file: &str, config: serde_json::Value) -> PluginId {
        let path = self.dir.path().join(file);
        self.configs.lock().push((path.clone(), config.to_string()));
        let id = self
            .rig
            .host
            .load(&path, kubewasm_tests::guest_bytes(package))
            .await
            .expect("the policy loads");
        // A policy that answers from the cache refuses until its informers have synced.
        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(30), || self.rig.host.ready()).await,
            "the policy's informers never sync"
        );
        self.configure();
        id
    }

    /// Stores the webhook configurations of the registered policies (once per rig).
    fn configure(&self) {
        for manifest in configuration::manifests(
            "kubewasm",
            &self.registry.declarations(),
            &Endpoint::Url(self.url.clone()),
            configuration::Trust::Bundle(self.ca.as_bytes()),
        ) {
            self.rig
                .server
                .create(manifest)
                .expect("configuration stored");
        }
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        self.rig.config_maps()
    }
}

/// What the API server answered a create: the stored object, or its error code and message.
async fn create(api: &Api<ConfigMap>, name: &str) -> Result<ConfigMap, (u16, String)> {
    api.create(&PostParams::default(), &config_map(name, &[], &[]))
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => (s.code, s.message),
            other => panic!("creating {name}: {other}"),
        })
}

fn label(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.metadata.labels.as_ref()?.get(key).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_writes_are_denied_and_mutated_by_the_policy() {
    let a = AdmissionRig::start().await;
    a.load("probe.wasm", serde_json::json!({"name": "probe"}))
        .await;
    let api = a.config_maps();

    let (code, message) = create(&api, "deny-me").await.unwrap_err();
    assert_eq!(code, 422, "the guest's code: {message}");
    assert_eq!(
        message,
        "admission webhook \"probe.kubewasm.dev\" denied the request: denied deny-me"
    );
    assert!(
        api.get_opt("deny-me").await.unwrap().is_none(),
        "not stored"
    );

    let stored = create(&api, "fine").await.expect("allowed");
    assert_eq!(label(&stored, "admitted-by").as_deref(), Some("probe-v0"));
    let read = api.get("fine").await.unwrap();
    assert_eq!(label(&read, "admitted-by").as_deref(), Some("probe-v0"));

    // An update is reviewed with its old object, and mutated again.
    let mut changed = read.clone();
    changed.metadata.labels = None;
    let updated = api
        .replace("fine", &PostParams::default(), &changed)
        .await
        .expect("update allowed");
    assert_eq!(label(&updated, "admitted-by").as_deref(), Some("probe-v0"));
    let status = plugin_status(&a.rig.host, "probe");
    assert!(status.admission.is_some(), "/plugins shows the rules");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_policy_follows_its_failure_policy() {
    let a = AdmissionRig::start().await;
    a.load("strict.wasm", serde_json::json!({"name": "strict"}))
        .await;
    let api = a.config_maps();
    for name in ["trap-1", "err-1", "garbage-1"] {
        let (code, message) = create(&api, name).await.unwrap_err();
        assert_eq!(code, 500, "{name}: {message}");
        assert!(
            message.contains("admission policy \\\"strict\\\" failed")
                || message.contains("admission policy \"strict\" failed"),
            "{name}: {message}"
        );
    }
    assert!(plugin_status(&a.rig.host, "strict").traps >= 1);
    // After the trap a fresh instance answers.
    create(&api, "fine-after-faults")
        .await
        .expect("a fresh instance answers");

    let a = AdmissionRig::start().await;
    a.load(
        "lenient.wasm",
        serde_json::json!({"name": "lenient", "failurePolicy": "ignore"}),
    )
    .await;
    let api = a.config_maps();
    for name in ["trap-2", "err-2"] {
        let stored = create(&api, name).await.expect("allowed by Ignore");
        assert_eq!(label(&stored, "admitted-by"), None, "{name}: not mutated");
    }
    let text = encode(&a.metrics);
    assert!(
        text.contains(
            "kubewasm_admission_policy_failures_total{plugin=\"lenient\",webhook=\"mutating\",reason=\"trap\"}"
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_policy_is_cut_at_its_deadline() {
    let a = AdmissionRig::start().await;
    a.load(
        "spin.wasm",
        serde_json::json!({"name": "spin", "timeoutSeconds": 2}),
    )
    .await;
    let (code, message) = create(&a.config_maps(), "spin-1").await.unwrap_err();
    assert_eq!(code, 500, "{message}");
    assert!(
        kubewasm_tests::wait_until(Duration::from_secs(10), || encode(&a.metrics)
            .contains("reason=\"timeout\""))
        .await,
        "the host counted the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_under_a_stream_of_reviews_refuses_none() {
    let a = AdmissionRig::start().await;
    let id = a
        .load(
            "reloaded.wasm",
            serde_json::json!({"name": "reloaded", "version": "v1"}),
        )
        .await;
    let api = a.config_maps();
    let writer = {
        let api = api.clone();
        tokio::spawn(async move {
            let mut versions = Vec::new();
            for i in 0..150 {
                let stored = create(&api, &format!("stream-{i}"))
                    .await
                    .unwrap_or_else(|e| panic!("review {i} refused: {e:?}"));
                versions.push(label(&stored, "admitted-by").expect("mutated"));
            }
            versions
        })
    };
    // Reload while the writer runs (after its first answers), twice.
    kubewasm_tests::wait_until(Duration::from_secs(30), || {
        encode(&a.metrics).contains("result=\"allowed\"")
    })
    .await;
    for version in ["v2", "v3"] {
        let path = a.dir.path().join("reloaded.wasm");
        a.configs.lock().retain(|(p, _)| *p != path);
        a.configs.lock().push((
            path,
            serde_json::json!({"name": "reloaded", "version": version}).to_string(),
        ));
        a.rig
            .host
            .replace(id, kubewasm_tests::guest_bytes("admission-probe"))
            .await
            .expect("replaced");
    }
    let versions = writer.await.expect("every review answered");
    assert_eq!(versions.len(), 150);
    assert_eq!(versions.first().map(String::as_str), Some("reloaded-v1"));
    assert_eq!(versions.last().map(String::as_str), Some("reloaded-v3"));
    assert!(
        versions.windows(2).all(|w| w[0] <= w[1]),
        "no review went back to an older version: {versions:?}"
    );
    assert!(!encode(&a.metrics).contains("result=\"failed\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_request_bodies_are_refused_before_any_policy() {
    let a = AdmissionRig::start().await;
    a.load("probe.wasm", serde_json::json!({"name": "probe"}))
        .await;
    let client = https_client(&a.ca);
    let post = |path: &str, body: Vec<u8>| {
        let request = http::Request::post(format!("{}{path}", a.url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        let client = client.clone();
        async move {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            Ok::<_, String>((status, String::from_utf8_lossy(&body).into_owned()))
        }
    };
    assert_eq!(
        post("/validate/probe", b"{\"kind\":".to_vec())
            .await
            .unwrap()
            .0,
        400
    );
    let v1beta1 = serde_json::json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}});
    let (code, text) = post("/validate/probe", v1beta1.to_string().into_bytes())
        .await
        .unwrap();
    assert_eq!(code, 400);
    assert!(text.contains("only admission.k8s.io/v1"), "{text}");
    // Refused at its Content-Length: answered 413, or cut off while it is still being sent.
    // On a client of its own: the connection the server closes must not go back to the pool
    // the later requests take theirs from.
    let oversized = http::Request::post(format!("{}/validate/probe", a.url))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(vec![b' '; 5 << 20])))
        .unwrap();
    match https_client(&a.ca).request(oversized).await {
        Ok(response) => assert_eq!(response.status().as_u16(), 413),
        Err(e) => {
            let e = format!("{e:?}");
            assert!(e.contains("Broken pipe") || e.contains("reset"), "{e}");
        }
    }
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default",
            "name": "deny-me",
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "deny-me"}},
        },
    });
    assert_eq!(
        post("/validate/nobody", review.to_string().into_bytes())
            .await
            .unwrap()
            .0,
        404
    );
    let (code, text) = post("/validate/probe", review.to_string().into_bytes())
        .await
        .unwrap();
    assert_eq!(code, 200);
    let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false);
    let text = encode(&a.metrics);
    assert!(
        text.contains("kubewasm_admission_requests_refused_total{reason=\"malformed\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("kubewasm_admission_requests_refused_total{reason=\"unknown-plugin\"} 1"),
        "{text}"
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

fn encode(metrics: &AdmissionMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("kubewasm");
    metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

fn ingress(namespace: &str, name: &str, host: &str) -> Ingress {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": host}]},
    }))
    .expect("an Ingress")
}

/// What the API server answered creating `ingress` (a dry run with `dry_run`).
async fn create_ingress(
    client: &kube::Client,
    ingress: &Ingress,
    dry_run: bool,
) -> Result<Ingress, (u16, String)> {
    let namespace = ingress.metadata.namespace.as_deref().unwrap_or("default");
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    Api::<Ingress>::namespaced(client.clone(), namespace)
        .create(&params, ingress)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => (s.code, s.message),
            other => panic!("creating an Ingress: {other}"),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingress_host_is_unique_across_namespaces() {
    let a = AdmissionRig::start().await;
    a.load_guest(
        "unique-ingress-host",
        "unique-ingress-host.wasm",
        serde_json::json!({}),
    )
    .await;
    for ns in ["team-a", "team-b"] {
        a.rig.server.create(namespace(ns)).expect("namespace");
    }
    let client = &a.rig.client;
    let first = ingress("team-a", "shop", "shop.example.com");
    create_ingress(client, &first, false)
        .await
        .expect("the first claim of a host is allowed");
    // The policy answers from the host's cache: wait (with dry runs, which store nothing)
    // until the informer has the first Ingress.
    let duplicate = ingress("team-b", "shop-copy", "shop.example.com");
    let seen = super::fixture::eventually(Duration::from_secs(30), || async {
        create_ingress(client, &duplicate, true).await.is_err()
    })
    .await;
    assert!(seen, "the duplicate is never refused");
    let (code, message) = create_ingress(client, &duplicate, false).await.unwrap_err();
    assert_eq!(code, 409, "{message}");
    assert_eq!(
        message,
        "admission webhook \"unique-ingress-host.kubewasm.dev\" denied the request: host \"shop.example.com\" is already used by Ingress team-a/shop"
    );
    create_ingress(
        client,
        &ingress("team-b", "blog", "blog.example.com"),
        false,
    )
    .await
    .expect("another host is free");
    // Updating the holder itself is no conflict.
    let api = Api::<Ingress>::namespaced(client.clone(), "team-a");
    let mut current = api.get("shop").await.unwrap();
    current
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "web".into());
    api.replace("shop", &PostParams::default(), &current)
        .await
        .expect("the holder may update itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pod_gets_the_requests_it_lacks_except_where_its_namespace_opts_out() {
    use k8s_openapi::api::core::v1::Pod;
    let a = AdmissionRig::start().await;
    a.load_guest(
        "default-requests",
        "default-requests.wasm",
        serde_json::json!({"cpu": "250m", "memory": "64Mi"}),
    )
    .await;
    a.rig.server.create(namespace("apps")).expect("namespace");
    let mut quiet = namespace("quiet");
    quiet["metadata"]["labels"] = serde_json::json!({"kubewasm.dev/default-requests": "off"});
    a.rig.server.create(quiet).expect("namespace");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [
            {"name": "app", "image": "app:1"},
            {"name": "sidecar", "image": "proxy:1", "resources": {"requests": {"cpu": "10m"}}},
        ]},
    }))
    .unwrap();
    let requests = |pod: &Pod, i: usize| {
        let c = &pod.spec.as_ref().unwrap().containers[i];
        let r = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default();
        (
            r.get("cpu").map(|q| q.0.clone()),
            r.get("memory").map(|q| q.0.clone()),
        )
    };
    let apps = Api::<Pod>::namespaced(a.rig.client.clone(), "apps");
    apps.create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let stored = apps.get("web").await.unwrap();
    assert_eq!(
        requests(&stored, 0),
        (Some("250m".into()), Some("64Mi".into()))
    );
    assert_eq!(
        requests(&stored, 1),
        (Some("10m".into()), Some("64Mi".into())),
        "a request the container sets is kept"
    );
    let quiet = Api::<Pod>::namespaced(a.rig.client.clone(), "quiet");
    quiet
        .create(&PostParams::default(), &pod)
        .await
        .expect("created");
    let stored = quiet.get("web").await.unwrap();
    assert_eq!(
        requests(&stored, 0),
        (None, None),
        "its namespace opted out"
    );
}

/// The same reviews on the dev server and on the real kube-apiserver of the test tier, each
/// calling the host's webhook endpoint on loopback: the same answers.
mod real {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;
    use kube::api::PostParams;
    use kubewasm::admission::configuration::{self, Endpoint, Trust};
    use kubewasm::admission::tls::ReloadingCert;
    use kubewasm::admission::{AdmissionMetrics, AdmissionRegistry};
    use kubewasm::plugin::{HostOptions, PluginPolicy};
    use tokio_util::sync::CancellationToken;

    use super::{AdmissionRig, create, label};

    /// What each scenario's create answered: the `admitted-by` label, or the error.
    async fn answers(api: &Api<ConfigMap>) -> Vec<Result<Option<String>, (u16, String)>> {
        let mut out = Vec::new();
        for name in ["fine", "deny-me", "trap-1", "err-1", "garbage-1"] {
            out.push(create(api, name).await.map(|cm| label(&cm, "admitted-by")));
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_real_api_server_gives_the_dev_servers_answers() {
        let config = serde_json::json!({"name": "probe"});
        let dev = AdmissionRig::start().await;
        dev.load("probe.wasm", config.clone()).await;
        let on_dev = answers(&dev.config_maps()).await;

        let server = kubewasm_tests::envtest::Envtest::start()
            .await
            .unwrap_or_else(|e| panic!("the real API server does not start: {e}"));
        let client = server.admin();
        let registry = AdmissionRegistry::default();
        let (_factory, host) = super::super::fixture::plugin_host(
            &client,
            HostOptions {
                admission: registry.clone(),
                policy: Arc::new(kubewasm::plugin::StaticPolicy(PluginPolicy {
                    config: config.to_string(),
                    ..PluginPolicy::default()
                })),
                ..HostOptions::default()
            },
        );
        host.load(
            std::path::Path::new("probe.wasm"),
            kubewasm_tests::guest_bytes("admission-probe"),
        )
        .await
        .expect("the policy loads");
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
        let ca = certified.cert.pem();
        for manifest in configuration::manifests(
            "kubewasm",
            &registry.declarations(),
            &Endpoint::Url(format!("https://{addr}")),
            Trust::Bundle(ca.as_bytes()),
        ) {
            if manifest["kind"] == "MutatingWebhookConfiguration" {
                let m: MutatingWebhookConfiguration = serde_json::from_value(manifest).unwrap();
                Api::all(client.clone())
                    .create(&PostParams::default(), &m)
                    .await
                    .expect("stored");
            } else {
                let v: ValidatingWebhookConfiguration = serde_json::from_value(manifest).unwrap();
                Api::all(client.clone())
                    .create(&PostParams::default(), &v)
                    .await
                    .expect("stored");
            }
        }
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        // The API server picks its webhook configurations up from a watch: wait (with dry
        // runs, which store nothing) until it calls the policy.
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let called = super::super::fixture::eventually(Duration::from_secs(30), || async {
            api.create(&dry, &super::config_map("deny-me", &[], &[]))
                .await
                .is_err()
        })
        .await;
        assert!(called, "the real API server never called the webhook");
        let on_real = answers(&api).await;
        cancel.cancel();
        assert_eq!(on_dev, on_real);
        assert_eq!(on_dev[0], Ok(Some("probe-v0".into())));
        assert!(matches!(&on_dev[1], Err((422, _))), "{:?}", on_dev[1]);
    }
}
