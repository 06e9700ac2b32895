//! End-to-end test of the sample-controller example (contract 0.2) on the dev server seeded with
//! `examples/manifests`, with the write grants of `examples/kubewasm-dev.toml`'s entry.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kubewasm::plugin::{
    HostOptions, PluginHost, PluginPolicy, ResourcePattern, WriteGrant, WriteGrants,
};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_tests::{devserver, guest_bytes, guest_logs, wait_until, workspace_root};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(30);

async fn eventually<F: std::future::Future<Output = bool>>(mut check: impl FnMut() -> F) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn replicas(d: &Option<Deployment>) -> Option<i32> {
    d.as_ref()?.spec.as_ref()?.replicas
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foos_own_their_deployments_and_report_their_status() {
    guest_logs();
    let (server, client) = devserver().await;
    server
        .load_manifests(&workspace_root().join("examples/manifests"))
        .expect("manifests");
    let writes = ["apps/Deployment", "samplecontroller.k8s.io/Foo", "Event"]
        .iter()
        .map(|w| {
            let (group, kind) = w.split_once('/').unwrap_or(("", w));
            WriteGrant::new(ResourcePattern::new(group, kind), None).expect("grant")
        })
        .collect();
    let policy = PluginPolicy {
        writes: WriteGrants::only(writes),
        ..PluginPolicy::default()
    };
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(
        factory,
        client.clone(),
        HostOptions {
            policy: Arc::new(move |_: &Path| policy.clone()),
            ..HostOptions::default()
        },
    )
    .expect("host");
    host.load(
        Path::new("sample-controller.wasm"),
        guest_bytes("sample-controller"),
    )
    .await
    .expect("loads");

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let foo_resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "samplecontroller.k8s.io",
        "v1alpha1",
        "Foo",
    ));
    let foos: Api<DynamicObject> = Api::namespaced_with(client.clone(), "shop", &foo_resource);

    // The seeded Foo gets its Deployment, owned by it.
    assert!(
        eventually(|| async {
            replicas(&deployments.get_opt("example-foo").await.unwrap()) == Some(1)
        })
        .await
    );
    let foo = foos.get("example-foo").await.expect("foo");
    let d = deployments.get("example-foo").await.expect("deployment");
    let owner = &d.metadata.owner_references.expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Foo", Some(true)));
    assert_eq!(Some(owner.uid.clone()), foo.metadata.uid);

    // Changing spec.replicas updates the Deployment.
    let pp = PatchParams::default();
    foos.patch(
        "example-foo",
        &pp,
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("patch foo");
    assert!(
        eventually(|| async {
            replicas(&deployments.get_opt("example-foo").await.unwrap()) == Some(3)
        })
        .await
    );

    // The Foo's status follows the Deployment's.
    deployments
        .patch_status(
            "example-foo",
            &pp,
            &Patch::Merge(json!({"status": {"availableReplicas": 2}})),
        )
        .await
        .expect("deployment status");
    assert!(
        eventually(|| async {
            let foo = foos.get("example-foo").await.unwrap();
            foo.data["status"]["availableReplicas"] == json!(2)
        })
        .await,
        "the Foo's status follows"
    );

    // A Deployment deleted by hand comes back.
    deployments
        .delete("example-foo", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        eventually(|| async {
            replicas(&deployments.get_opt("example-foo").await.unwrap()) == Some(3)
        })
        .await
    );

    // A Foo naming a Deployment it does not own leaves it alone.
    let other: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "metadata": {"name": "squatter", "namespace": "shop"},
        "spec": {"deploymentName": "web", "replicas": 5},
    }))
    .expect("foo");
    foos.create(&Default::default(), &other)
        .await
        .expect("create foo");
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "shop",
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
    );
    assert!(
        eventually(|| async {
            events
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|e| {
                    e.data["reason"] == json!("ErrResourceExists")
                        && e.data["involvedObject"]["name"] == json!("squatter")
                })
        })
        .await,
        "an Event says the Deployment is not the Foo's"
    );
    assert_ne!(
        replicas(&deployments.get_opt("web").await.unwrap()),
        Some(5)
    );
    assert!(wait_until(PATIENCE, || host.ready()).await);
}
