//! The controller loop of a 0.2 plugin against the dev server: reconcile workers wait for the
//! caches of every subscription before they take a key; keys of shards another replica leads
//! wait in the workqueue; a queue rule's generation predicate (contract 0.2.2) keeps status
//! writes from reconciling.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kubewasm::leader::{Balance, ElectionOptions, LeaderElector};
use kubewasm::metrics::Metrics;
use kubewasm_runtime::HostOptions;
use kubewasm_runtime::LeaderGate;
use tokio_util::sync::CancellationToken;

use kube::api::GroupVersionKind;
use kubewasm_devserver::Verb;
use kubewasm_informer::InformerKey;
use kubewasm_runtime::{PluginPolicy, ResourcePattern, WriteGrant, WriteGrants};
use kubewasm_tests::{guest_bytes, wait_until, workspace_root};
use serde_json::json;

use crate::fixture::{DevRig, config_map, create, namespace, plugin_status, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(60);

/// The sample-controller's write grants (as `examples/kubewasm-dev.toml` gives them).
fn sample_controller_policy() -> PluginPolicy {
    let writes = [
        ("apps", "Deployment"),
        ("samplecontroller.k8s.io", "Foo"),
        ("", "Event"),
    ]
    .iter()
    .map(|&(group, kind)| WriteGrant::new(ResourcePattern::new(group, kind), None).expect("grant"))
    .collect();
    PluginPolicy {
        writes: WriteGrants::only(writes),
        ..PluginPolicy::default()
    }
}

/// The Foo CRD of `examples/manifests/50-foo-crd.yaml`, without the example Foo after it.
fn load_foo_crd(rig: &DevRig) {
    let manifest =
        std::fs::read_to_string(workspace_root().join("examples/manifests/50-foo-crd.yaml"))
            .expect("the Foo CRD manifest");
    let crd = manifest.split("\n---").next().expect("a first document");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("foo-crd.yaml"), crd).expect("writing the CRD");
    rig.server.load_manifests(dir.path()).expect("the Foo CRD");
}

/// Foo `name` in namespace `ns` and the Deployment it owns, as the sample-controller would have
/// made them, created in the dev server's store.
fn foo_with_its_deployment(rig: &DevRig, ns: &str, name: &str) {
    let owner = rig
        .server
        .create(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"deploymentName": name, "replicas": 1},
        }))
        .expect("Foo");
    let uid = owner["metadata"]["uid"].as_str().expect("uid").to_owned();
    let labels = json!({"app": "nginx", "controller": name});
    rig.server
        .create(json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name, "namespace": ns,
                "ownerReferences": [{
                    "apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                    "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true,
                }],
            },
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
                },
            },
        }))
        .expect("Deployment");
}

/// A two-informer controller (the Rust sample-controller: Foos, and the Deployments they own)
/// started while its Foo cache is warm and its Deployment cache is not (the API server fails
/// its first LISTs; the Foo informer was synced beforehand, as another plugin's would be) reconciles
/// every Foo and creates nothing: each Deployment exists, and the workers waited for the
/// Deployment cache before taking a key. Without the wait, the first reconciles read an empty
/// Deployment cache and POST a Deployment that is already there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_wait_for_every_cache_before_the_first_reconcile() {
    const FOOS: usize = 4;
    const NS: &str = "warm-start";
    let policy = sample_controller_policy();
    let rig = DevRig::start(policy_by_file(move |_: &Path| policy.clone())).await;
    load_foo_crd(&rig);
    rig.server.create(namespace(NS)).expect("namespace");
    for i in 0..FOOS {
        foo_with_its_deployment(&rig, NS, &format!("foo-{i}"));
    }

    // The Foo informer the plugin will share, started and synced before it loads.
    let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    let (resource, _) = kubewasm_informer::KindResolver::new(rig.client.clone())
        .resolve(&gvk)
        .await
        .expect("Foo resource");
    let foos = rig.factory.informer_for(InformerKey::all(resource));
    rig.factory.start();
    assert!(foos.wait_synced().await, "the Foo informer syncs");

    // The Deployment informer's first LISTs fail: its cache syncs seconds (of its backoff)
    // after the Foo keys are queued from the warm Foo cache.
    rig.server.clear_requests();
    rig.server.fail_next(Verb::List, 3, 500);
    let id = rig
        .host
        .load(
            Path::new("sample-controller.wasm"),
            guest_bytes("sample-controller"),
        )
        .await
        .expect("loading the sample-controller");
    let reconciled = wait_until(PATIENCE, || {
        plugin_status(&rig.host, "sample-controller").reconciles >= FOOS as u64
    })
    .await;
    assert!(
        reconciled,
        "every Foo is reconciled: {:?}",
        plugin_status(&rig.host, "sample-controller")
    );
    let creates: Vec<_> = rig
        .server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::Create && r.resource == "deployments")
        .collect();
    assert!(
        creates.is_empty(),
        "no Deployment is created at start-up: they all exist ({creates:?})"
    );
    let lists = rig
        .server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::List)
        .count();
    assert!(
        lists > 3,
        "the Deployment cache synced after failed LISTs ({lists} LISTs)"
    );
    rig.host.unload(id).await;
}

/// A replica leading one shard of two: a key of the other shard's namespace is parked in the
/// plugin's workqueue, counted in its depth (`/plugins` and `workqueue_depth`), while a key of
/// the led shard is reconciled; unloading the plugin drops the parked key with its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_a_shard_led_elsewhere_is_parked_in_the_queue_and_freed_on_unload() {
    let gate = LeaderGate::sharded("kubewasm-parking", "me", 2);
    let metrics = Arc::new(Metrics::new(Arc::new(Vec::new)));
    let policy = PluginPolicy {
        config: "parking".into(),
        ..PluginPolicy::default()
    };
    let rig = DevRig::start(HostOptions {
        leader: gate.clone(),
        observer: metrics.clone(),
        ..policy_by_file(move |_: &Path| policy.clone())
    })
    .await;
    // A namespace in each shard; this replica contends for the first one's only.
    let names: Vec<String> = (0..64).map(|i| format!("parking-{i}")).collect();
    let led_ns = names[0].clone();
    let led = gate.shard_of(Some(&led_ns), "");
    let other_ns = names
        .iter()
        .find(|n| gate.shard_of(Some(n), "") != led)
        .expect("a namespace of the other shard")
        .clone();
    for ns in [&led_ns, &other_ns] {
        rig.server.create(namespace(ns)).expect("namespace");
    }
    let cancel = CancellationToken::new();
    let elector = LeaderElector::for_shard(
        rig.client.clone(),
        ElectionOptions::new("kubewasm-parking", "default", "me"),
        gate.clone(),
        led,
        Arc::new(Balance::new("me", 2)),
    )
    .expect("elector");
    let election = tokio::spawn(elector.run(cancel.clone()));
    assert!(wait_until(PATIENCE, || gate.leads_shard(led)).await);

    let id = rig
        .host
        .load(Path::new("mirror.wasm"), guest_bytes("mirror-v0-2"))
        .await
        .expect("loading the mirror");
    for ns in [&led_ns, &other_ns] {
        let api: Api<ConfigMap> = Api::namespaced(rig.client.clone(), ns);
        create(&api, &config_map("settings", &[], &[("v", "1")])).await;
    }
    let reconciled = format!("RECONCILED {led_ns}/settings");
    assert!(
        wait_until(PATIENCE, || {
            rig.logs
                .lines("mirror")
                .iter()
                .any(|l| l.contains(&reconciled))
        })
        .await,
        "the led shard's key is reconciled"
    );
    let parked = || {
        plugin_status(&rig.host, "parking")
            .workqueue
            .map_or(0, |q| q.parked)
    };
    assert!(
        wait_until(PATIENCE, || parked() >= 1).await,
        "the other shard's key is parked: {:?}",
        plugin_status(&rig.host, "parking")
    );
    let status = plugin_status(&rig.host, "parking");
    assert!(status.queue_depth >= parked(), "{status:?}");
    let depth = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("workqueue_depth{name=\"mirror\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    assert!(
        depth(&metrics.encode()).is_some_and(|d| d >= 1.0),
        "workqueue_depth counts the parked key:\n{}",
        metrics.encode()
    );
    let other = format!("RECONCILED {other_ns}/settings");
    assert!(
        !rig.logs.lines("mirror").iter().any(|l| l.contains(&other)),
        "a key of a shard led elsewhere is not reconciled here"
    );

    rig.host.unload(id).await;
    assert!(rig.host.plugins().is_empty());
    assert_eq!(
        depth(&metrics.encode()),
        None,
        "the unloaded plugin's queue depth is gone"
    );
    cancel.cancel();
    let _ = election.await;
}

/// The Rust sample-controller queues a Foo on a generation change only (contract 0.2.2's
/// predicate, declared through the Rust SDK): see [`status_writes_cause_no_reconcile`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_generation_predicate_status_writes_cause_no_reconcile() {
    status_writes_cause_no_reconcile("sample-controller").await;
}

/// The Go sample-controller declares the same predicate through its `kube` helper
/// (`kube.When(kube.OwnKey(), kube.Generation)`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_generation_predicate_status_writes_cause_no_reconcile_go() {
    status_writes_cause_no_reconcile("sample-controller-go").await;
}

/// The Python sample-controller declares the same predicate through its `kube` helper
/// (`kube.when(types.QueueRule_OwnKey(), Predicate.GENERATION)`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_generation_predicate_status_writes_cause_no_reconcile_python() {
    status_writes_cause_no_reconcile("sample-controller-python").await;
}

/// A sample-controller (the example component `plugin`, whose `init` gives it that name) that
/// queues a Foo on a generation change only: status writes to a Foo reconcile nothing,
/// while a spec change still does. Without the predicate each status write queues the Foo (and
/// the controller writes its status back, which queues it again).
async fn status_writes_cause_no_reconcile(plugin: &str) {
    const NS: &str = "predicates";
    const WRITES: i64 = 10;
    let policy = sample_controller_policy();
    let rig = DevRig::start(HostOptions {
        // The Go and Python components compile once for every test that loads them.
        cache_dir: crate::fixture::shared_compile_cache(),
        ..policy_by_file(move |_: &Path| policy.clone())
    })
    .await;
    load_foo_crd(&rig);
    rig.server.create(namespace(NS)).expect("namespace");
    rig.server
        .create(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"deploymentName": "web", "replicas": 1},
        }))
        .expect("Foo");
    let id = rig
        .host
        .load(Path::new(&format!("{plugin}.wasm")), guest_bytes(plugin))
        .await
        .unwrap_or_else(|e| panic!("loading {plugin}: {e}"));
    let gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    let foos: Api<DynamicObject> =
        Api::namespaced_with(rig.client.clone(), NS, &ApiResource::from_gvk(&gvk));
    let deployments: Api<Deployment> = Api::namespaced(rig.client.clone(), NS);
    let available = |object: &DynamicObject| object.data["status"]["availableReplicas"].as_i64();
    let settled = |rig: &DevRig| {
        let status = plugin_status(&rig.host, plugin);
        status
            .workqueue
            .is_some_and(|q| q.depth == 0 && q.waiting == 0 && q.processing == 0)
    };
    // Started: the Deployment is created and the Foo's status written.
    assert!(
        crate::fixture::eventually(PATIENCE, || async {
            deployments.get_opt("web").await.ok().flatten().is_some()
                && foos
                    .get("web")
                    .await
                    .is_ok_and(|f| available(&f) == Some(0))
        })
        .await,
        "the Foo is reconciled"
    );
    assert!(wait_until(PATIENCE, || settled(&rig)).await);
    let before = plugin_status(&rig.host, plugin).reconciles;

    for i in 1..=WRITES {
        foos.patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 100 + i}})),
        )
        .await
        .expect("status write");
    }
    // A spec change after the status writes: reconciled (the Deployment follows), and the
    // queue has long taken in every write before it.
    foos.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("spec change");
    assert!(
        crate::fixture::eventually(PATIENCE, || async {
            deployments
                .get("web")
                .await
                .is_ok_and(|d| d.spec.and_then(|s| s.replicas) == Some(3))
                && foos
                    .get("web")
                    .await
                    .is_ok_and(|f| available(&f) == Some(0))
        })
        .await,
        "the spec change is reconciled and the status put right"
    );
    assert!(wait_until(PATIENCE, || settled(&rig)).await);
    let spent = plugin_status(&rig.host, plugin).reconciles - before;
    // The spec change (its Foo update, and the Deployment update it causes): at most three.
    assert!(
        spent <= 3,
        "{plugin}: {spent} reconciles for {WRITES} status writes and one spec change"
    );
    rig.host.unload(id).await;
}
