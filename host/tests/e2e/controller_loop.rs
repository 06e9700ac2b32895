//! The controller loop of a 0.2 plugin against the dev server: reconcile workers wait for the
//! caches of every subscription before they take a key.

use std::path::Path;
use std::time::Duration;

use kube::api::GroupVersionKind;
use kubewasm::plugin::{PluginPolicy, ResourcePattern, WriteGrant, WriteGrants};
use kubewasm_devserver::Verb;
use kubewasm_informer::InformerKey;
use kubewasm_tests::{guest_bytes, wait_until, workspace_root};
use serde_json::json;

use crate::fixture::{DevRig, namespace, plugin_status, policy_by_file};

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
    let (resource, _) = kubewasm_informer::resolve(&rig.client, &gvk)
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
