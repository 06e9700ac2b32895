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
use kubewasm::admission::AdmissionMetrics;
use kubewasm::admission::configuration::{self, Endpoint};
use kubewasm::admission::tls::ReloadingCert;
use kubewasm_runtime::admission::registry::AdmissionRegistry;
use kubewasm_runtime::{
    Grants, HostOptions, PluginId, PluginPolicy, ResourcePattern, WriteGrant, WriteGrants,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::Ingress;

use super::fixture::{DevRig, config_map, namespace, plugin_status, replace_data};

/// A dev server and plugin host, and the host's webhook endpoint on loopback.
struct AdmissionRig {
    rig: DevRig,
    registry: AdmissionRegistry,
    metrics: AdmissionMetrics,
    url: String,
    ca: String,
    /// Each plugin file's config string, read at every load (a reload takes the new one).
    configs: Arc<Mutex<Vec<(PathBuf, String)>>>,
    /// Each plugin file's grants and writes, when not [`test_policy`]'s.
    grants: Arc<Mutex<Vec<(PathBuf, PluginPolicy)>>>,
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
        let grants: Arc<Mutex<Vec<(PathBuf, PluginPolicy)>>> = Arc::default();
        let lookup = configs.clone();
        let granted = grants.clone();
        let rig = DevRig::start(HostOptions {
            admission: registry.clone(),
            // The Python and JavaScript policies compile once for every test that loads them.
            cache_dir: super::fixture::shared_compile_cache(),
            policy: Arc::new(move |path: &Path| PluginPolicy {
                config: lookup
                    .lock()
                    .iter()
                    .find(|(p, _)| p == path)
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default(),
                ..granted
                    .lock()
                    .iter()
                    .find(|(p, _)| p == path)
                    .map_or_else(test_policy, |(_, g)| g.clone())
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
            grants,
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
        let id = self.add_guest(package, file, config).await;
        self.configure();
        id
    }

    /// Loads the guest `package` as `file` with `config` and waits until the host is ready,
    /// storing no webhook configuration: for reviews sent to the endpoint directly, or several
    /// policies in one rig.
    async fn add_guest(&self, package: &str, file: &str, config: serde_json::Value) -> PluginId {
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
        id
    }

    /// Tries to load the guest `package` as `file` with `config` under `policy`'s grants and
    /// writes: what the host answered.
    async fn try_add_guest(
        &self,
        package: &str,
        file: &str,
        config: serde_json::Value,
        policy: PluginPolicy,
    ) -> Result<PluginId, kubewasm_runtime::PluginError> {
        let path = self.dir.path().join(file);
        self.configs.lock().push((path.clone(), config.to_string()));
        self.grants.lock().push((path.clone(), policy));
        self.rig
            .host
            .load(&path, kubewasm_tests::guest_bytes(package))
            .await
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

/// The grants the test policies load with: the default reads, and `patch` on the kinds they
/// mutate (ConfigMaps for admission-probe, Pods for default-requests), as a mutating webhook
/// needs.
fn test_policy() -> PluginPolicy {
    PluginPolicy {
        writes: WriteGrants::only(
            ["ConfigMap", "Pod"]
                .into_iter()
                .map(|kind| {
                    WriteGrant::new(ResourcePattern::new("", kind), Some(vec!["patch".into()]))
                        .expect("a write grant")
                })
                .collect(),
        ),
        ..PluginPolicy::default()
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

/// A policy whose webhooks match more than its plugin is granted does not load, and the
/// refusal names the rule, the resource and the line of the host's config that would grant
/// it: a validating webhook on Secrets with the default grants (no Secret), a mutating one on
/// ConfigMaps without a write grant, a `*` of the core group (which holds Secrets). Granted,
/// each loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_matching_more_than_its_grants_is_refused_at_load_naming_the_grant() {
    let a = AdmissionRig::start().await;
    let probe = "admission-probe";
    let secrets = serde_json::json!({"webhooks": ["validating"], "resources": ["secrets"]});
    let err = a
        .try_add_guest(
            probe,
            "secret-reader.wasm",
            secrets.clone(),
            PluginPolicy::default(),
        )
        .await
        .expect_err("Secrets are not granted")
        .to_string();
    assert!(
        err.contains(
            "the validating webhook's rule 0 matches `secrets` (Secret); it needs \
             grants = [..., \"Secret\"] in [plugins.secret-reader]"
        ),
        "{err}"
    );
    let mutator = serde_json::json!({"name": "cm-mutator", "webhooks": ["mutating"]});
    let err = a
        .try_add_guest(
            probe,
            "cm-mutator.wasm",
            mutator.clone(),
            PluginPolicy::default(),
        )
        .await
        .expect_err("ConfigMaps are not writable")
        .to_string();
    assert!(
        err.contains(
            "the mutating webhook's rule 0 matches `configmaps` (ConfigMap); it needs \
             writes = [..., \"ConfigMap:patch\"] in [plugins.cm-mutator]"
        ),
        "{err}"
    );
    let everything = serde_json::json!({"webhooks": ["validating"], "resources": ["*"]});
    let err = a
        .try_add_guest(
            probe,
            "everything.wasm",
            everything,
            PluginPolicy::default(),
        )
        .await
        .expect_err("`*` in the core group matches Secrets")
        .to_string();
    assert!(err.contains("which includes Secrets"), "{err}");
    assert!(
        a.registry.declarations().is_empty(),
        "no refused policy is served"
    );

    let reads_secrets = PluginPolicy {
        grants: Grants::only(vec![
            ResourcePattern::new("*", "*"),
            ResourcePattern::new("", "Secret"),
        ]),
        ..PluginPolicy::default()
    };
    a.try_add_guest(probe, "secret-reader-granted.wasm", secrets, reads_secrets)
        .await
        .expect("granted Secrets, it loads");
    a.try_add_guest(probe, "cm-mutator-granted.wasm", mutator, test_policy())
        .await
        .expect("granted patch on ConfigMaps, it loads");
    assert_eq!(a.registry.declarations().len(), 2);
}

/// `kubewasm dev`'s configurator on the dev server: each policy gets configurations of its
/// own (the shared one of earlier versions is deleted); a declaration past the size limit is
/// refused at load, saying its size, while the policy already loaded keeps denying and
/// mutating; an unloaded policy's configurations are deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_declaration_is_refused_and_the_other_policies_keep_working() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let a = AdmissionRig::start().await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(a.rig.client.clone());
    // The shared configuration an earlier version stored.
    a.rig
        .server
        .create(serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "kubewasm"},
            "webhooks": [],
        }))
        .expect("the legacy configuration");
    let webhooks = kubewasm::admission::loopback::LoopbackWebhooks::start(
        a.registry.clone(),
        a.metrics.clone(),
        a.rig.client.clone(),
        a.cancel.clone(),
    )
    .await
    .expect("the loopback endpoint");
    tokio::spawn(webhooks.follow(a.registry.clone(), a.cancel.clone()));
    let probe = a
        .add_guest(
            "admission-probe",
            "probe.wasm",
            serde_json::json!({"name": "probe"}),
        )
        .await;
    let api = a.config_maps();
    let names = || async {
        let list = validating.list(&Default::default()).await.expect("list");
        list.items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect::<Vec<_>>()
    };
    assert!(
        super::fixture::eventually(Duration::from_secs(30), || async {
            names().await == ["kubewasm-probe"] && create(&api, "deny-early").await.is_err()
        })
        .await,
        "the probe's own configuration replaces the shared one: {:?}",
        names().await
    );

    let err = a
        .try_add_guest(
            "admission-probe",
            "huge.wasm",
            serde_json::json!({"name": "huge", "padRules": 4}),
            test_policy(),
        )
        .await
        .expect_err("a declaration of ~77 KiB")
        .to_string();
    assert!(err.contains("bytes as JSON, more than 64 KiB"), "{err}");

    let (code, message) = create(&api, "deny-me").await.unwrap_err();
    assert_eq!(code, 422, "{message}");
    let stored = create(&api, "fine").await.expect("allowed");
    assert_eq!(label(&stored, "admitted-by").as_deref(), Some("probe-v0"));
    let status = plugin_status(&a.rig.host, "probe");
    assert_eq!(status.admission_unconfigured, None);
    assert_eq!(names().await, ["kubewasm-probe"]);

    a.rig.host.unload(probe).await;
    assert!(
        super::fixture::eventually(Duration::from_secs(30), || async {
            names().await.is_empty()
        })
        .await,
        "an unloaded policy's configuration is deleted: {:?}",
        names().await
    );
    create(&api, "deny-after-unload")
        .await
        .expect("nothing reviews it any more");
}

/// A mutation that renames the object is garbage: under `Fail` the write is refused with
/// the failure policy's 500, stored under neither name; under `Ignore` (answered by the
/// endpoint directly) it is allowed unmutated, with the warning saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutation_renaming_the_object_is_refused_and_its_failure_policy_answers() {
    let a = AdmissionRig::start().await;
    a.load(
        "renamer.wasm",
        serde_json::json!({"name": "renamer", "rename": true}),
    )
    .await;
    let api = a.config_maps();
    let (code, message) = create(&api, "victim").await.unwrap_err();
    assert_eq!(code, 500, "{message}");
    assert!(
        message.contains("admission policy \\\"renamer\\\" failed (garbage)")
            || message.contains("admission policy \"renamer\" failed (garbage)"),
        "{message}"
    );
    for name in ["victim", "victim-renamed"] {
        assert!(api.get_opt(name).await.unwrap().is_none(), "{name} stored");
    }
    let text = encode(&a.metrics);
    assert!(
        text.contains(
            "kubewasm_admission_policy_failures_total{plugin=\"renamer\",webhook=\"mutating\",reason=\"garbage\"}"
        ),
        "{text}"
    );

    a.add_guest(
        "admission-probe",
        "lenient-renamer.wasm",
        serde_json::json!({"name": "lenient-renamer", "rename": true, "failurePolicy": "ignore"}),
    )
    .await;
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-rename",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default",
            "name": "victim",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "victim", "namespace": "default"}},
        },
    });
    let (allowed, warnings, object) =
        mutation(&https_client(&a.ca), &a.url, "lenient-renamer", &review).await;
    assert!(allowed, "{warnings}");
    assert_eq!(
        object, review["request"]["object"],
        "not renamed, not mutated"
    );
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.contains("failed (garbage)")),
        "{warnings}"
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

/// A policy that declares another policy's name (issue 32, finding 2) is registered, served and
/// configured under its own key, its file's name: the real policy keeps its webhook, and a
/// taken host is still denied by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_declaring_anothers_name_cannot_take_its_webhook() {
    let a = AdmissionRig::start().await;
    a.add_guest(
        "unique-ingress-host",
        "unique-ingress-host.wasm",
        serde_json::json!({}),
    )
    .await;
    // It allows every Ingress: had it replaced the real policy, the duplicate would pass.
    a.add_guest(
        "admission-probe",
        "impostor.wasm",
        serde_json::json!({
            "name": "unique-ingress-host",
            "webhooks": ["validating"],
            "groups": ["networking.k8s.io"],
            "resources": ["ingresses"],
        }),
    )
    .await;
    let keys: Vec<String> = a
        .registry
        .declarations()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(keys, ["impostor", "unique-ingress-host"]);
    let statuses = a.rig.host.plugins();
    assert!(
        statuses
            .iter()
            .all(|s| s.name == "unique-ingress-host" && s.admission.is_some()),
        "{statuses:?}"
    );
    a.configure();
    for ns in ["team-a", "team-b"] {
        a.rig.server.create(namespace(ns)).expect("namespace");
    }
    let client = &a.rig.client;
    create_ingress(
        client,
        &ingress("team-a", "shop", "shop.example.com"),
        false,
    )
    .await
    .expect("the first claim of a host is allowed");
    let duplicate = ingress("team-b", "shop-copy", "shop.example.com");
    let seen = super::fixture::eventually(Duration::from_secs(30), || async {
        create_ingress(client, &duplicate, true).await.is_err()
    })
    .await;
    assert!(seen, "the duplicate is never refused");
    let (code, message) = create_ingress(client, &duplicate, false).await.unwrap_err();
    assert_eq!(code, 409, "{message}");
    assert!(
        message.starts_with("admission webhook \"unique-ingress-host.kubewasm.dev\" denied"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pod_gets_the_requests_it_lacks_except_where_its_namespace_opts_out() {
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

/// A Pod named `name` with `containers` and `init` (name, image) pairs.
fn pod(name: &str, containers: &[(&str, &str)], init: &[(&str, &str)]) -> Pod {
    let list = |pairs: &[(&str, &str)]| -> Vec<serde_json::Value> {
        pairs
            .iter()
            .map(|(name, image)| serde_json::json!({"name": name, "image": image}))
            .collect()
    };
    let mut spec = serde_json::json!({"containers": list(containers)});
    if !init.is_empty() {
        spec["initContainers"] = list(init).into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a Pod")
}

/// What the API server answered creating `pod` in `namespace` (a dry run with `dry_run`).
async fn create_pod(
    client: &kube::Client,
    namespace: &str,
    pod: &Pod,
    dry_run: bool,
) -> Result<Pod, (u16, String)> {
    let params = PostParams {
        dry_run,
        ..PostParams::default()
    };
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&params, pod)
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => (s.code, s.message),
            other => panic!("creating a Pod: {other}"),
        })
}

/// How a denial of the allowed-registries policy starts.
const REGISTRY_DENIAL: &str =
    "admission webhook \"allowed-registries.kubewasm.dev\" denied the request: ";
/// The policy's answer while its ConfigMap does not exist.
const NO_REGISTRY_LIST: &str = "no allowed registries: ConfigMap kubewasm-system/allowed-registries with key 'registries' (one registry prefix per line) does not exist";

/// Waits (with dry runs, which store nothing) until creating `pod` in `namespace` is allowed
/// (`allowed`) or denied: the policy answers from the host's cache, which follows the
/// ConfigMap by a watch.
async fn until_answer(client: &kube::Client, namespace: &str, pod: &Pod, allowed: bool) -> bool {
    super::fixture::eventually(Duration::from_secs(30), || async {
        create_pod(client, namespace, pod, true).await.is_ok() == allowed
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_images_come_only_from_the_registries_a_config_map_lists() {
    let a = AdmissionRig::start().await;
    for ns in ["kubewasm-system", "apps"] {
        a.rig.server.create(namespace(ns)).expect("namespace");
    }
    a.load_guest(
        "allowed-registries",
        "allowed-registries.wasm",
        serde_json::json!({}),
    )
    .await;
    let client = &a.rig.client;
    let web = pod("web", &[("app", "nginx:1.27")], &[]);

    // No list: every image is denied, saying why.
    let (code, message) = create_pod(client, "apps", &web, false).await.unwrap_err();
    assert_eq!(code, 403, "{message}");
    assert_eq!(message, format!("{REGISTRY_DENIAL}{NO_REGISTRY_LIST}"));

    let lists = Api::<ConfigMap>::namespaced(client.clone(), "kubewasm-system");
    let list = config_map(
        "allowed-registries",
        &[],
        &[(
            "registries",
            "# trusted\ndocker.io/library\nghcr.io/acme/\n",
        )],
    );
    super::fixture::create(&lists, &list).await;
    assert!(
        until_answer(client, "apps", &web, true).await,
        "the new list is never seen"
    );
    create_pod(client, "apps", &web, false)
        .await
        .expect("nginx is docker.io/library/nginx");

    let mixed = pod(
        "mixed",
        &[("app", "ghcr.io/acme/app:v1")],
        &[("setup", "quay.io/tools/setup:1")],
    );
    let (code, message) = create_pod(client, "apps", &mixed, false).await.unwrap_err();
    assert_eq!(code, 403, "{message}");
    assert_eq!(
        message,
        format!(
            "{REGISTRY_DENIAL}not from an allowed registry: image 'quay.io/tools/setup:1' \
             (container 'setup'); allowed: docker.io/library, ghcr.io/acme \
             (ConfigMap kubewasm-system/allowed-registries)"
        )
    );
    let lookalike = pod("lookalike", &[("app", "ghcr.io/acme-corp/app:v1")], &[]);
    assert!(
        create_pod(client, "apps", &lookalike, false).await.is_err(),
        "a prefix admits at a `/` only"
    );

    // The list changes at runtime: the cache sees it, no restart or reload.
    replace_data(
        &lists,
        "allowed-registries",
        &[(
            "registries",
            "docker.io/library\nghcr.io/acme\nquay.io/tools",
        )],
    )
    .await;
    assert!(
        until_answer(client, "apps", &mixed, true).await,
        "the longer list is never seen"
    );
    create_pod(client, "apps", &mixed, false)
        .await
        .expect("quay.io/tools is listed now");

    // Shrunk: new Pods from docker.io are denied, the running one still takes updates; an
    // update bringing in a new image is checked.
    replace_data(
        &lists,
        "allowed-registries",
        &[("registries", "ghcr.io/acme")],
    )
    .await;
    let web_2 = pod("web-2", &[("app", "nginx:1.27")], &[]);
    assert!(
        until_answer(client, "apps", &web_2, false).await,
        "the shorter list is never seen"
    );
    let pods = Api::<Pod>::namespaced(client.clone(), "apps");
    let mut running = pods.get("web").await.unwrap();
    running
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "web".into());
    let running = pods
        .replace("web", &PostParams::default(), &running)
        .await
        .expect("an image the Pod already had is not checked again");
    let mut moved = running.clone();
    moved.spec.as_mut().unwrap().containers[0].image = Some("bitnami/redis:7".into());
    let Err(kube::Error::Api(status)) = pods.replace("web", &PostParams::default(), &moved).await
    else {
        panic!("a new image from an unlisted registry is allowed");
    };
    assert_eq!(
        status.message,
        format!(
            "{REGISTRY_DENIAL}not from an allowed registry: image 'bitnami/redis:7' (container \
             'app'); allowed: ghcr.io/acme (ConfigMap kubewasm-system/allowed-registries)"
        )
    );

    // Deleted: back to denying everything.
    lists
        .delete("allowed-registries", &Default::default())
        .await
        .expect("deleted");
    let ghcr = pod("ghcr", &[("app", "ghcr.io/acme/app:v2")], &[]);
    assert!(
        until_answer(client, "apps", &ghcr, false).await,
        "the deletion is never seen"
    );
    let (_, message) = create_pod(client, "apps", &ghcr, false).await.unwrap_err();
    assert_eq!(message, format!("{REGISTRY_DENIAL}{NO_REGISTRY_LIST}"));
}

/// The AdmissionReview of creating `pod` (JSON) in namespace `apps`.
fn pod_review(uid: &str, pod: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "apps",
            "name": pod["metadata"]["name"],
            "operation": "CREATE",
            "userInfo": {"username": "tester"},
            "object": pod,
        },
    })
}

/// What a mutating policy made of `review`'s object: allowed, the warnings, and the object with
/// the host's JSONPatch applied.
async fn mutation(
    client: &HttpsClient,
    url: &str,
    plugin: &str,
    review: &serde_json::Value,
) -> (bool, serde_json::Value, serde_json::Value) {
    let request = http::Request::post(format!("{url}/mutate/{plugin}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .unwrap();
    let response = client.request(request).await.expect("answered");
    assert_eq!(response.status().as_u16(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let response = &answer["response"];
    let mut object = review["request"]["object"].clone();
    if let Some(patch) = response["patch"].as_str() {
        use base64::Engine as _;
        let patch = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSONPatch");
        json_patch::patch(&mut object, &patch).expect("the patch applies");
    }
    (
        response["allowed"].as_bool().expect("allowed"),
        response["warnings"].clone(),
        object,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_default_requests_are_the_rust_ones() {
    let a = AdmissionRig::start().await;
    let config = serde_json::json!({"cpu": "250m", "memory": "64Mi"});
    // Both in one host, each review sent to each policy's endpoint directly.
    a.add_guest("default-requests", "default-requests.wasm", config.clone())
        .await;
    a.add_guest("default-requests-js", "default-requests-js.wasm", config)
        .await;

    let declarations: std::collections::BTreeMap<_, _> = a
        .registry
        .declarations()
        .into_iter()
        .map(|(name, d)| (name, serde_json::to_value(d).unwrap()))
        .collect();
    assert_eq!(
        declarations["default-requests"], declarations["default-requests-js"],
        "the same webhook: rules, Ignore, timeout, the opt-out namespace selector"
    );

    let container = |name: &str, resources: serde_json::Value| {
        let mut c = serde_json::json!({"name": name, "image": "app:1"});
        if !resources.is_null() {
            c["resources"] = resources;
        }
        c
    };
    let raw_pod = |name: &str, containers: Vec<serde_json::Value>, init: Vec<serde_json::Value>| {
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"containers": containers, "initContainers": init},
        })
    };
    let null = serde_json::Value::Null;
    let shapes = [
        raw_pod("bare", vec![container("app", null.clone())], vec![]),
        raw_pod(
            "partial",
            vec![
                container("app", serde_json::json!({"limits": {"memory": "1Gi"}})),
                container("sidecar", serde_json::json!({"requests": {"cpu": "10m"}})),
            ],
            vec![container("setup", null.clone())],
        ),
        raw_pod(
            "complete",
            vec![container(
                "app",
                serde_json::json!({"requests": {"cpu": "1", "memory": "1Gi"}}),
            )],
            vec![],
        ),
        raw_pod("no-containers", vec![], vec![]),
        // Hostile shapes: not what a Pod may hold; both answer alike (an error is Ignored).
        raw_pod(
            "odd-resources",
            vec![container("app", serde_json::json!("plenty"))],
            vec![],
        ),
        raw_pod(
            "odd-containers",
            vec![serde_json::json!("app"), container("ok", null.clone())],
            vec![],
        ),
    ];
    let client = https_client(&a.ca);
    let mut answers = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let review = pod_review(&format!("u-{i}"), shape.clone());
        let rust = mutation(&client, &a.url, "default-requests", &review).await;
        let js = mutation(&client, &a.url, "default-requests-js", &review).await;
        let name = &shape["metadata"]["name"];
        if name == "odd-resources" {
            // The failure policy answered: each warning names its own plugin.
            assert_eq!((rust.0, &rust.2), (js.0, &js.2), "{name}");
        } else {
            assert_eq!(rust, js, "{name}");
        }
        answers.push(rust);
    }
    let requests = |answer: &(bool, serde_json::Value, serde_json::Value), list: &str| {
        answer.2["spec"][list]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["resources"]["requests"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        requests(&answers[0], "containers"),
        [serde_json::json!({"cpu": "250m", "memory": "64Mi"})]
    );
    assert_eq!(
        answers[0].1,
        serde_json::json!(["default requests set: app: cpu=250m, app: memory=64Mi"])
    );
    assert_eq!(
        requests(&answers[1], "containers"),
        [
            serde_json::json!({"cpu": "250m", "memory": "64Mi"}),
            serde_json::json!({"cpu": "10m", "memory": "64Mi"}),
        ]
    );
    assert_eq!(answers[2].2, shapes[2], "nothing to default: unchanged");
    assert_eq!(answers[2].1, serde_json::Value::Null, "and no warning");

    // Through the dev server's admission chain, the JavaScript policy alone.
    let a = AdmissionRig::start().await;
    a.rig.server.create(namespace("apps")).expect("namespace");
    a.load_guest(
        "default-requests-js",
        "default-requests-js.wasm",
        serde_json::json!({"cpu": "250m", "memory": "64Mi"}),
    )
    .await;
    let stored = create_pod(
        &a.rig.client,
        "apps",
        &pod("web", &[("app", "app:1")], &[]),
        false,
    )
    .await
    .expect("created");
    let resources = stored.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap();
    let requests = resources.requests.unwrap();
    assert_eq!(
        (requests["cpu"].0.as_str(), requests["memory"].0.as_str()),
        ("250m", "64Mi")
    );
}

fn role_binding(namespace: &str, name: &str, account: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "app"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })
}

/// A policy that answers from a cache-only subscription is not ready, and neither is the
/// host, until that cache has synced: readiness that ignored such caches sent the API server
/// to a policy still refusing every review ("the RoleBinding cache has not synced yet").
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_is_not_ready_before_the_caches_it_answers_from_have_synced() {
    let a = AdmissionRig::start().await;
    let role_bindings: kubewasm_devserver::ResourceName = "rolebindings.rbac.authorization.k8s.io"
        .parse()
        .expect("resource name");
    a.rig.server.fail_next_on(
        kubewasm_devserver::Verb::List,
        &role_bindings,
        usize::MAX,
        500,
    );
    let path = a.dir.path().join("bound-service-account.wasm");
    a.rig
        .host
        .load(&path, kubewasm_tests::guest_bytes("bound-service-account"))
        .await
        .expect("the policy loads");
    let listed = || {
        a.rig
            .server
            .requests()
            .iter()
            .any(|r| r.verb == kubewasm_devserver::Verb::List && r.resource == "rolebindings")
    };
    assert!(
        kubewasm_tests::wait_until(Duration::from_secs(30), listed).await,
        "the host never lists RoleBindings"
    );
    // Every LIST of RoleBindings fails: the cache cannot have synced.
    assert!(
        !a.rig.host.ready(),
        "ready with the policy's cache unsynced"
    );
    a.rig
        .server
        .fail_next_on(kubewasm_devserver::Verb::List, &role_bindings, 0, 500);
    assert!(
        kubewasm_tests::wait_until(Duration::from_secs(30), || a.rig.host.ready()).await,
        "never ready once RoleBindings list"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_service_account_must_be_bound_in_its_namespace() {
    let a = AdmissionRig::start().await;
    for ns in ["apps", "other"] {
        a.rig.server.create(namespace(ns)).expect("namespace");
    }
    // The account is bound, but only in another namespace.
    a.rig
        .server
        .create(role_binding("other", "builder", "builder"))
        .expect("binding");
    a.load_guest(
        "bound-service-account",
        "bound-service-account.wasm",
        serde_json::json!({}),
    )
    .await;
    let client = &a.rig.client;
    let mut build = pod("build", &[("app", "builder:1")], &[]);
    build.spec.as_mut().unwrap().service_account_name = Some("builder".into());
    let (code, message) = create_pod(client, "apps", &build, false).await.unwrap_err();
    assert_eq!(code, 403, "{message}");
    assert_eq!(
        message,
        "admission webhook \"bound-service-account.kubewasm.dev\" denied the request: service account apps/builder is the subject of no RoleBinding in apps"
    );
    // A Pod without an account runs as `default`, bound nowhere either.
    let plain = pod("plain", &[("app", "app:1")], &[]);
    assert!(create_pod(client, "apps", &plain, false).await.is_err());
    // Once bound in the Pod's namespace (the host's cache follows by a watch), it is allowed.
    a.rig
        .server
        .create(role_binding("apps", "builder", "builder"))
        .expect("binding");
    assert!(
        until_answer(client, "apps", &build, true).await,
        "the new binding is never seen"
    );
    create_pod(client, "apps", &build, false)
        .await
        .expect("a bound account is allowed");
    assert!(
        create_pod(client, "apps", &plain, false).await.is_err(),
        "default is still bound nowhere"
    );
}

/// The same reviews on the dev server and on the real kube-apiserver of the test tier, each
/// calling the host's webhook endpoint on loopback: the same answers.
mod real {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
    use kube::Api;
    use kube::api::PostParams;
    use kubewasm::admission::AdmissionMetrics;
    use kubewasm_informer::SharedInformerFactory;
    use kubewasm_runtime::admission::registry::AdmissionRegistry;
    use kubewasm_runtime::{HostOptions, PluginHost, PluginId, PluginPolicy, PolicyLookup};
    use tokio_util::sync::CancellationToken;

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::networking::v1::Ingress;
    use kube::api::DeleteParams;

    use super::{
        AdmissionRig, NO_REGISTRY_LIST, REGISTRY_DENIAL, create, create_ingress, create_pod,
        ingress, label, pod, until_answer,
    };

    /// What each scenario's create answered: the `admitted-by` label, or the error.
    async fn answers(api: &Api<ConfigMap>) -> Vec<Result<Option<String>, (u16, String)>> {
        answers_for(api, &["fine", "deny-me", "trap-1", "err-1", "garbage-1"]).await
    }

    /// What creating a ConfigMap of each of `names` answered: the `admitted-by` label, or the
    /// error.
    async fn answers_for(
        api: &Api<ConfigMap>,
        names: &[&str],
    ) -> Vec<Result<Option<String>, (u16, String)>> {
        let mut out = Vec::new();
        for name in names {
            out.push(create(api, name).await.map(|cm| label(&cm, "admitted-by")));
        }
        out
    }

    /// Waits (with dry runs, which store nothing) until the API server calls both of the
    /// probe's webhooks: it picks each webhook configuration up from its own watch.
    async fn until_probe_called(api: &Api<ConfigMap>) -> bool {
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        super::super::fixture::eventually(Duration::from_secs(30), || async {
            let validated = api
                .create(&dry, &super::config_map("deny-me", &[], &[]))
                .await
                .is_err();
            let mutated = api
                .create(&dry, &super::config_map("probe-ready", &[], &[]))
                .await
                .is_ok_and(|cm| label(&cm, "admitted-by").is_some());
            validated && mutated
        })
        .await
    }

    /// Creates namespace `name` with `labels` (JSON object or null) and its `default`
    /// ServiceAccount (a real API server without a controller manager refuses Pods without it).
    async fn namespace_with_account(client: &kube::Client, name: &str, labels: serde_json::Value) {
        let mut namespace = super::super::fixture::namespace(name);
        namespace["metadata"]["labels"] = labels;
        let namespace: Namespace = serde_json::from_value(namespace).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace");
        let account: ServiceAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"},
        }))
        .unwrap();
        Api::<ServiceAccount>::namespaced(client.clone(), name)
            .create(&PostParams::default(), &account)
            .await
            .expect("service account");
    }

    /// A plugin host on a real API server, serving one policy's webhooks on loopback.
    struct RealHost {
        _factory: SharedInformerFactory,
        host: PluginHost,
        /// The policy's plugin, for a reload.
        id: PluginId,
        metrics: AdmissionMetrics,
        cancel: CancellationToken,
    }

    impl Drop for RealHost {
        fn drop(&mut self) {
            self.cancel.cancel();
        }
    }

    /// A real kube-apiserver (with etcd) of the test's own.
    async fn real_server() -> kubewasm_tests::envtest::Envtest {
        kubewasm_tests::envtest::Envtest::start()
            .await
            .unwrap_or_else(|e| panic!("the real API server does not start: {e}"))
    }

    /// `answers` taken on the dev server with the example policy `package` loaded, then on a
    /// real API server calling the same policy: (dev, real), for the caller to compare.
    async fn on_both<T, F>(
        package: &str,
        config: serde_json::Value,
        answers: impl Fn(kube::Client) -> F,
    ) -> (T, T)
    where
        F: std::future::Future<Output = T>,
    {
        let dev = AdmissionRig::start().await;
        dev.load_guest(package, &format!("{package}.wasm"), config.clone())
            .await;
        let on_dev = answers(dev.rig.client.clone()).await;
        let server = real_server().await;
        let client = server.admin();
        let served = serve_policy(&client, package, &config).await;
        let on_real = answers(client).await;
        drop(served);
        (on_dev, on_real)
    }

    /// Loads the guest `package` with `config` into a host on `client`, waits until its
    /// informers have synced, serves its webhooks on loopback and stores their configurations.
    async fn serve_policy(
        client: &kube::Client,
        package: &str,
        config: &serde_json::Value,
    ) -> RealHost {
        let policy = kubewasm_runtime::StaticPolicy(PluginPolicy {
            config: config.to_string(),
            ..super::test_policy()
        });
        serve_policy_with(client, package, Arc::new(policy)).await
    }

    /// [`serve_policy`] with the policy (and so the config string) looked up at every load.
    async fn serve_policy_with(
        client: &kube::Client,
        package: &str,
        policy: Arc<dyn PolicyLookup>,
    ) -> RealHost {
        serve_policies_with(client, &[(package, &format!("{package}.wasm"))], policy).await
    }

    /// [`serve_policy_with`] for several plugins, each a guest package loaded as a file; the
    /// host's `id` is the first one's.
    async fn serve_policies_with(
        client: &kube::Client,
        plugins: &[(&str, &str)],
        policy: Arc<dyn PolicyLookup>,
    ) -> RealHost {
        let registry = AdmissionRegistry::default();
        let (factory, host) = super::super::fixture::plugin_host(
            client,
            HostOptions {
                admission: registry.clone(),
                cache_dir: super::super::fixture::shared_compile_cache(),
                policy,
                ..HostOptions::default()
            },
        );
        let mut ids = Vec::new();
        for (package, file) in plugins {
            let id = host
                .load(
                    std::path::Path::new(file),
                    kubewasm_tests::guest_bytes(package),
                )
                .await
                .expect("the policy loads");
            ids.push(id);
        }
        let id = ids[0];
        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(30), || host.ready()).await,
            "the policy's informers never sync"
        );
        // Served and configured as `kubewasm test` and `kubewasm dev` do for their API server.
        let cancel = CancellationToken::new();
        let metrics = AdmissionMetrics::default();
        let webhooks = kubewasm::admission::loopback::LoopbackWebhooks::start(
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
            .expect("the webhook configurations are stored");
        RealHost {
            _factory: factory,
            host,
            id,
            metrics,
            cancel,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_real_api_server_gives_the_dev_servers_answers() {
        let config = serde_json::json!({"name": "probe"});
        let dev = AdmissionRig::start().await;
        dev.load("admission-probe.wasm", config.clone()).await;
        let on_dev = answers(&dev.config_maps()).await;

        let server = real_server().await;
        let client = server.admin();
        let served = serve_policy(&client, "admission-probe", &config).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        assert!(
            until_probe_called(&api).await,
            "the real API server never called the webhook"
        );
        let on_real = answers(&api).await;
        drop(served);
        assert_eq!(on_dev, on_real);
        assert_eq!(on_dev[0], Ok(Some("probe-v0".into())));
        assert!(matches!(&on_dev[1], Err((422, _))), "{:?}", on_dev[1]);
    }

    /// The allowed-registries policy's answers on the API server of `client`, its webhook
    /// configured there: a Pod before the list exists, then Pods of listed, unlisted and
    /// look-alike registries.
    async fn registry_answers(client: &kube::Client) -> Vec<Result<(), (u16, String)>> {
        for ns in ["kubewasm-system", "apps"] {
            let namespace: Namespace =
                serde_json::from_value(super::super::fixture::namespace(ns)).unwrap();
            Api::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &namespace)
                .await
                .expect("namespace");
        }
        // A real API server (no controller manager here) refuses Pods without it.
        let account: ServiceAccount = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"},
        }))
        .unwrap();
        Api::<ServiceAccount>::namespaced(client.clone(), "apps")
            .create(&PostParams::default(), &account)
            .await
            .expect("service account");
        let web = pod("web", &[("app", "nginx:1.27")], &[]);
        // The API server picks its webhook configurations up from a watch.
        assert!(
            until_answer(client, "apps", &web, false).await,
            "the API server never called the webhook"
        );
        let mut out = vec![create_pod(client, "apps", &web, false).await.map(drop)];
        let list = super::config_map(
            "allowed-registries",
            &[],
            &[("registries", "docker.io/library\nghcr.io/acme")],
        );
        super::super::fixture::create(&Api::namespaced(client.clone(), "kubewasm-system"), &list)
            .await;
        assert!(
            until_answer(client, "apps", &web, true).await,
            "the list is never seen"
        );
        for pod in [
            web,
            pod(
                "mixed",
                &[("app", "ghcr.io/acme/app:v1")],
                &[("setup", "quay.io/tools/setup:1")],
            ),
            pod("lookalike", &[("app", "ghcr.io/acme-corp/app:v1")], &[]),
            pod(
                "pinned",
                &[(
                    "app",
                    &format!("ghcr.io/acme/app@sha256:{}", "a".repeat(64)),
                )],
                &[],
            ),
            pod("hub", &[("app", "bitnami/redis:7")], &[]),
        ] {
            out.push(create_pod(client, "apps", &pod, false).await.map(drop));
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_real_api_server_gives_the_python_policys_answers() {
        let (on_dev, on_real) = on_both(
            "allowed-registries",
            serde_json::json!({}),
            |c| async move { registry_answers(&c).await },
        )
        .await;
        assert_eq!(on_dev, on_real);
        assert_eq!(
            on_dev[0],
            Err((403, format!("{REGISTRY_DENIAL}{NO_REGISTRY_LIST}")))
        );
        let allowed: Vec<bool> = on_dev.iter().map(Result::is_ok).collect();
        assert_eq!(allowed, [false, true, false, false, true, false]);
    }

    /// The unique-ingress-host policy's answers on the API server of `client`, its webhook
    /// configured there: the first claim of a host, the same host claimed from another
    /// namespace, and that claim again once the first Ingress is deleted.
    async fn ingress_answers(client: &kube::Client) -> Vec<Result<(), (u16, String)>> {
        for ns in ["team-a", "team-b"] {
            namespace_with_account(client, ns, serde_json::Value::Null).await;
        }
        let first = ingress("team-a", "shop", "shop.example.com");
        let mut out = vec![create_ingress(client, &first, false).await.map(drop)];
        // The policy answers from the host's cache (and the API server finds its webhook by a
        // watch): wait, with dry runs, until the duplicate is refused.
        let duplicate = ingress("team-b", "shop-copy", "shop.example.com");
        let refused = super::super::fixture::eventually(Duration::from_secs(30), || async {
            create_ingress(client, &duplicate, true).await.is_err()
        })
        .await;
        assert!(refused, "the duplicate is never refused");
        out.push(create_ingress(client, &duplicate, false).await.map(drop));
        Api::<Ingress>::namespaced(client.clone(), "team-a")
            .delete("shop", &DeleteParams::default())
            .await
            .expect("the holder is deleted");
        let freed = super::super::fixture::eventually(Duration::from_secs(30), || async {
            create_ingress(client, &duplicate, true).await.is_ok()
        })
        .await;
        assert!(freed, "the freed host is never allowed");
        out.push(create_ingress(client, &duplicate, false).await.map(drop));
        out
    }

    /// A policy declaring the unique-host policy's name beside it (issue 32, finding 2): the
    /// real API server calls each under its own key, and the taken host is still denied.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_the_real_api_server_a_policy_declaring_anothers_name_cannot_take_its_webhook() {
        let server = real_server().await;
        let client = server.admin();
        let impostor = serde_json::json!({
            "name": "unique-ingress-host",
            "webhooks": ["validating"],
            "groups": ["networking.k8s.io"],
            "resources": ["ingresses"],
        })
        .to_string();
        let lookup = move |path: &std::path::Path| PluginPolicy {
            config: if path.file_stem().is_some_and(|s| s == "impostor") {
                impostor.clone()
            } else {
                String::new()
            },
            ..super::test_policy()
        };
        let served = serve_policies_with(
            &client,
            &[
                ("unique-ingress-host", "unique-ingress-host.wasm"),
                ("admission-probe", "impostor.wasm"),
            ],
            Arc::new(lookup),
        )
        .await;
        let answers = ingress_answers(&client).await;
        drop(served);
        assert_eq!(
            answers,
            [
                Ok(()),
                Err((
                    409,
                    "admission webhook \"unique-ingress-host.kubewasm.dev\" denied the request: host \"shop.example.com\" is already used by Ingress team-a/shop".into()
                )),
                Ok(()),
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_real_api_server_gives_the_unique_host_policys_answers() {
        let (on_dev, on_real) = on_both(
            "unique-ingress-host",
            serde_json::json!({}),
            |c| async move { ingress_answers(&c).await },
        )
        .await;
        assert_eq!(on_dev, on_real);
        assert_eq!(
            on_dev,
            [
                Ok(()),
                Err((
                    409,
                    "admission webhook \"unique-ingress-host.kubewasm.dev\" denied the request: host \"shop.example.com\" is already used by Ingress team-a/shop".into()
                )),
                Ok(()),
            ]
        );
    }

    /// Each container's (cpu, memory) requests.
    type Requests = Vec<(Option<String>, Option<String>)>;

    fn requests(pod: &Pod) -> Requests {
        let spec = pod.spec.as_ref().expect("a Pod has a spec");
        spec.containers
            .iter()
            .map(|c| {
                let r = c
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.clone())
                    .unwrap_or_default();
                (
                    r.get("cpu").map(|q| q.0.clone()),
                    r.get("memory").map(|q| q.0.clone()),
                )
            })
            .collect()
    }

    /// The requests of the Pods stored on the API server of `client` with the default-requests
    /// webhook configured there: one Pod in a namespace that takes the defaults, one in a
    /// namespace that opts out.
    async fn stored_requests(client: &kube::Client) -> Vec<Requests> {
        namespace_with_account(client, "apps", serde_json::Value::Null).await;
        namespace_with_account(
            client,
            "quiet",
            serde_json::json!({"kubewasm.dev/default-requests": "off"}),
        )
        .await;
        let web: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web"},
            "spec": {"containers": [
                {"name": "app", "image": "app:1"},
                {"name": "sidecar", "image": "proxy:1", "resources": {"requests": {"cpu": "10m"}}},
            ]},
        }))
        .unwrap();
        // The API server finds its webhook by a watch: wait, with dry runs, until it mutates.
        let mutated = super::super::fixture::eventually(Duration::from_secs(30), || async {
            create_pod(client, "apps", &web, true)
                .await
                .is_ok_and(|p| requests(&p)[0].0.is_some())
        })
        .await;
        assert!(mutated, "the API server never called the webhook");
        let mut out = Vec::new();
        for ns in ["apps", "quiet"] {
            create_pod(client, ns, &web, false)
                .await
                .unwrap_or_else(|e| panic!("creating the Pod in {ns}: {e:?}"));
            let stored = Api::<Pod>::namespaced(client.clone(), ns)
                .get("web")
                .await
                .expect("stored");
            out.push(requests(&stored));
        }
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_real_api_server_stores_the_pods_the_mutating_policy_makes_on_the_dev_server() {
        let config = serde_json::json!({"cpu": "250m", "memory": "64Mi"});
        let (on_dev, on_real) = on_both("default-requests", config, |c| async move {
            stored_requests(&c).await
        })
        .await;
        assert_eq!(on_dev, on_real);
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(
            on_dev,
            [
                vec![(some("250m"), some("64Mi")), (some("10m"), some("64Mi"))],
                vec![(None, None), (some("10m"), None)],
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_trapping_policy_under_ignore_is_passed_by_both_servers() {
        let config = serde_json::json!({"name": "lenient", "failurePolicy": "ignore"});
        let names = ["trap-2", "err-2", "garbage-2", "fine"];
        let dev = AdmissionRig::start().await;
        dev.load("lenient.wasm", config.clone()).await;
        let on_dev = answers_for(&dev.config_maps(), &names).await;

        let server = real_server().await;
        let client = server.admin();
        let served = serve_policy(&client, "admission-probe", &config).await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        assert!(
            until_probe_called(&api).await,
            "the real API server never called the webhook"
        );
        let on_real = answers_for(&api, &names).await;
        let failures = super::encode(&served.metrics);
        drop(served);
        assert_eq!(on_dev, on_real);
        assert_eq!(
            on_dev,
            [Ok(None), Ok(None), Ok(None), Ok(Some("lenient-v0".into()))],
            "the faults are let through unmutated, the rest mutated"
        );
        assert!(
            failures.contains("reason=\"trap\""),
            "the host counted the real server's trap: {failures}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reload_under_a_stream_of_reviews_through_the_real_api_server_refuses_none() {
        let server = real_server().await;
        let client = server.admin();
        let config = Arc::new(parking_lot::Mutex::new(
            serde_json::json!({"name": "reloaded", "version": "v1"}).to_string(),
        ));
        let lookup = config.clone();
        let served = serve_policy_with(
            &client,
            "admission-probe",
            Arc::new(move |_: &std::path::Path| PluginPolicy {
                config: lookup.lock().clone(),
                ..super::test_policy()
            }),
        )
        .await;
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        assert!(
            until_probe_called(&api).await,
            "the real API server never called the webhook"
        );
        // The writer goes on until 20 reviews have had the last version (bounded).
        let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer = {
            let api = api.clone();
            let answered = answered.clone();
            tokio::spawn(async move {
                let mut versions: Vec<String> = Vec::new();
                for i in 0..5000 {
                    let stored = create(&api, &format!("stream-{i}"))
                        .await
                        .unwrap_or_else(|e| panic!("review {i} refused: {e:?}"));
                    versions.push(label(&stored, "admitted-by").expect("mutated"));
                    answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if versions.iter().filter(|v| *v == "reloaded-v3").count() >= 20 {
                        break;
                    }
                }
                versions
            })
        };
        // Reload while the writer runs (after its first answers), twice. The dry runs above
        // were answered too: wait for the writer's own.
        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(30), || {
                answered.load(std::sync::atomic::Ordering::Relaxed) >= 3
            })
            .await
        );
        for version in ["v2", "v3"] {
            *config.lock() =
                serde_json::json!({"name": "reloaded", "version": version}).to_string();
            served
                .host
                .replace(served.id, kubewasm_tests::guest_bytes("admission-probe"))
                .await
                .expect("replaced");
        }
        let versions = writer.await.expect("every review answered");
        assert_eq!(versions.first().map(String::as_str), Some("reloaded-v1"));
        assert_eq!(versions.last().map(String::as_str), Some("reloaded-v3"));
        assert!(
            versions.windows(2).all(|w| w[0] <= w[1]),
            "no review went back to an older version: {versions:?}"
        );
        assert!(!super::encode(&served.metrics).contains("result=\"failed\""));
    }

    /// On a real kube-apiserver: a policy matching Secrets without the grant does not load,
    /// so nothing configures it there (a Secret is created unreviewed); of two policies
    /// loaded, the one whose configuration kube-apiserver refuses (its rule names `*` beside
    /// another resource, which it finds invalid) is the only one not configured: the
    /// registry says why (`/plugins`) and readiness names it (its failure policy is Fail),
    /// and the other policy denies and mutates.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_the_real_api_server_a_refused_policy_is_not_configured_and_the_others_work() {
        use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
        use k8s_openapi::api::core::v1::Secret;
        let server = real_server().await;
        let client = server.admin();
        let registry = AdmissionRegistry::default();
        let configs = [
            (
                "secret-reader.wasm",
                serde_json::json!({"webhooks": ["validating"], "resources": ["secrets"]}),
            ),
            ("probe.wasm", serde_json::json!({"name": "probe"})),
            (
                "invalid.wasm",
                serde_json::json!({"name": "invalid", "webhooks": ["validating"],
                                   "groups": ["apps"], "resources": ["*", "deployments"]}),
            ),
        ];
        let lookup = move |path: &std::path::Path| PluginPolicy {
            config: configs
                .iter()
                .find(|(f, _)| path.ends_with(f))
                .map(|(_, c)| c.to_string())
                .unwrap_or_default(),
            ..super::test_policy()
        };
        let (_factory, host) = super::super::fixture::plugin_host(
            &client,
            HostOptions {
                admission: registry.clone(),
                cache_dir: super::super::fixture::shared_compile_cache(),
                policy: Arc::new(lookup),
                ..HostOptions::default()
            },
        );
        let load = |file: &'static str| {
            host.load(
                std::path::Path::new(file),
                kubewasm_tests::guest_bytes("admission-probe"),
            )
        };
        let err = load("secret-reader.wasm")
            .await
            .expect_err("Secrets are not granted")
            .to_string();
        assert!(
            err.contains("grants = [..., \"Secret\"] in [plugins.secret-reader]"),
            "{err}"
        );
        load("probe.wasm").await.expect("the probe loads");
        load("invalid.wasm")
            .await
            .expect("its rule is within its grants");
        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(30), || host.ready()).await,
            "the policies' informers never sync"
        );
        let cancel = CancellationToken::new();
        let _stop = cancel.clone().drop_guard();
        let webhooks = kubewasm::admission::loopback::LoopbackWebhooks::start(
            registry.clone(),
            AdmissionMetrics::default(),
            client.clone(),
            cancel.clone(),
        )
        .await
        .expect("the webhook endpoint starts");
        tokio::spawn(webhooks.follow(registry.clone(), cancel.clone()));

        assert!(
            kubewasm_tests::wait_until(Duration::from_secs(30), || {
                registry.unconfigured("invalid").is_some()
            })
            .await,
            "kube-apiserver refuses the invalid rule"
        );
        let why = registry.unconfigured("invalid").unwrap();
        assert!(
            why.contains("ValidatingWebhookConfiguration kubewasm-invalid"),
            "{why}"
        );
        assert_eq!(registry.unconfigured("probe"), None);
        let not_ready = registry.readiness().unwrap_err();
        assert!(not_ready.contains("\"invalid\""), "{not_ready}");
        assert!(!not_ready.contains("\"probe\""), "{not_ready}");
        let status = super::super::fixture::plugin_status(&host, "invalid");
        assert_eq!(status.admission_unconfigured.as_deref(), Some(why.as_str()));

        let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        assert!(until_probe_called(&api).await, "the probe is configured");
        let (code, message) = create(&api, "deny-me").await.unwrap_err();
        assert_eq!(code, 422, "{message}");
        let stored = create(&api, "fine").await.expect("allowed");
        assert_eq!(label(&stored, "admitted-by").as_deref(), Some("probe-v0"));

        let secret: Secret = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "deny-me"},
        }))
        .unwrap();
        Api::<Secret>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &secret)
            .await
            .expect("no policy reviews Secrets");
        let stored: Vec<String> = Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        assert_eq!(stored, ["kubewasm-probe"]);
    }
}
