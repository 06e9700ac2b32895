//! The dev server's garbage collector, driven through kube's client: dependents follow their
//! owners by `ownerReferences` in background, foreground and orphan propagation.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kubewasm_devserver::{DevServer, Options};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

async fn server() -> DevServer {
    DevServer::start(Options::default()).await.unwrap()
}

/// A ConfigMap owned by each `(name, uid, block)` owner ConfigMap, with `finalizers`.
fn owned(name: &str, owners: &[(&str, &str, bool)], finalizers: &[&str]) -> ConfigMap {
    let refs: Vec<Value> = owners
        .iter()
        .map(|(owner, uid, block)| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": uid,
                   "blockOwnerDeletion": block})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers},
    }))
    .unwrap()
}

async fn create(api: &Api<ConfigMap>, object: ConfigMap) -> ConfigMap {
    api.create(&PostParams::default(), &object).await.unwrap()
}

async fn plain(api: &Api<ConfigMap>, name: &str) -> String {
    let object: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    create(api, object).await.metadata.uid.unwrap()
}

async fn names(api: &Api<ConfigMap>) -> BTreeSet<String> {
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

async fn remove_finalizers(api: &Api<ConfigMap>, name: &str) {
    let patch = json!({"metadata": {"finalizers": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The names of the next `n` DELETED events on `stream`, skipping other events.
async fn deleted<S>(stream: &mut S, n: usize) -> BTreeSet<String>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let mut seen = BTreeSet::new();
    while seen.len() < n {
        let event = tokio::time::timeout(WAIT, stream.next())
            .await
            .expect("timed out waiting for a watch event")
            .expect("watch ended")
            .unwrap();
        if let WatchEvent::Deleted(object) = event {
            seen.insert(object.metadata.name.unwrap());
        }
    }
    seen
}

#[tokio::test]
async fn background_deletion_collects_dependents_recursively_with_watch_events() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    let child = create(&api, owned("child", &[("owner", &owner, false)], &[])).await;
    let child_uid = child.metadata.uid.unwrap();
    create(
        &api,
        owned("grandchild", &[("child", &child_uid, true)], &[]),
    )
    .await;
    plain(&api, "bystander").await;
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    api.delete("owner", &DeleteParams::default()).await.unwrap();

    assert_eq!(
        deleted(&mut watch, 3).await,
        set(&["owner", "child", "grandchild"])
    );
    assert_eq!(names(&api).await, set(&["bystander"]));
    server.shutdown().await;
}

#[tokio::test]
async fn background_deletion_waits_for_the_owners_finalizers() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "owner", "finalizers": ["x.io/hold"]}}))
            .unwrap();
    let owner = create(&api, owner).await.metadata.uid.unwrap();
    create(&api, owned("child", &[("owner", &owner, false)], &[])).await;

    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(names(&api).await, set(&["owner", "child"]));

    remove_finalizers(&api, "owner").await;
    assert_eq!(names(&api).await, BTreeSet::new());
    server.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    let held = owned("held", &[("owner", &owner, true)], &["x.io/hold"]);
    create(&api, held).await;
    create(&api, owned("free", &[("owner", &owner, true)], &[])).await;

    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();

    let waiting = api.get("owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(names(&api).await, set(&["owner", "held"]));

    remove_finalizers(&api, "held").await;
    assert_eq!(names(&api).await, BTreeSet::new());
    server.shutdown().await;
}

#[tokio::test]
async fn foreground_deletion_does_not_wait_for_non_blocking_dependents() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    create(
        &api,
        owned("held", &[("owner", &owner, false)], &["x.io/hold"]),
    )
    .await;

    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();

    assert_eq!(names(&api).await, set(&["held"]));
    assert!(
        api.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn removing_the_reference_releases_a_foreground_owner() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    create(
        &api,
        owned("held", &[("owner", &owner, true)], &["x.io/hold"]),
    )
    .await;
    api.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    assert_eq!(names(&api).await, set(&["owner", "held"]));

    let patch = json!({"metadata": {"ownerReferences": null}});
    api.patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    assert_eq!(names(&api).await, set(&["held"]));
    server.shutdown().await;
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_reference() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    let other = plain(&api, "other").await;
    create(&api, owned("only", &[("owner", &owner, true)], &[])).await;
    create(
        &api,
        owned(
            "shared",
            &[("owner", &owner, true), ("other", &other, false)],
            &[],
        ),
    )
    .await;

    api.delete("owner", &DeleteParams::orphan()).await.unwrap();

    assert_eq!(names(&api).await, set(&["other", "only", "shared"]));
    assert_eq!(
        api.get("only").await.unwrap().metadata.owner_references,
        None
    );
    let shared = api.get("shared").await.unwrap().metadata.owner_references;
    let shared: Vec<String> = shared.unwrap().into_iter().map(|r| r.name).collect();
    assert_eq!(shared, vec!["other"]);
    server.shutdown().await;
}

#[tokio::test]
async fn the_orphan_finalizer_orphans_on_a_plain_delete() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "owner", "finalizers": ["orphan"]}}))
            .unwrap();
    let owner = create(&api, owner).await.metadata.uid.unwrap();
    create(&api, owned("child", &[("owner", &owner, true)], &[])).await;

    api.delete("owner", &DeleteParams::default()).await.unwrap();

    assert_eq!(names(&api).await, set(&["child"]));
    server.shutdown().await;
}

#[tokio::test]
async fn dependents_of_absent_owners_are_collected() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let owner = plain(&api, "owner").await;
    let mut watch = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();

    create(
        &api,
        owned("never", &[("ghost", "no-such-uid", false)], &[]),
    )
    .await;
    create(
        &api,
        owned("wrong-uid", &[("owner", "another-uid", false)], &[]),
    )
    .await;
    create(
        &api,
        owned(
            "half",
            &[("owner", &owner, false), ("ghost", "x", false)],
            &[],
        ),
    )
    .await;

    assert_eq!(deleted(&mut watch, 2).await, set(&["never", "wrong-uid"]));
    assert_eq!(names(&api).await, set(&["owner", "half"]));
    let half = api.get("half").await.unwrap().metadata.owner_references;
    let half: Vec<String> = half.unwrap().into_iter().map(|r| r.uid).collect();
    assert_eq!(half, vec![owner]);
    server.shutdown().await;
}

#[tokio::test]
async fn owners_of_another_kind_and_cluster_scoped_owners_are_resolved() {
    let server = server().await;
    let client = server.client();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "creds"}})).unwrap();
    let secret = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let node_like: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    let team = ns.create(&PostParams::default(), &node_like).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let dependent: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "by-secret",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Secret", "name": "creds",
                             "uid": secret.metadata.uid.unwrap()}],
    }}))
    .unwrap();
    create(&api, dependent).await;
    let dependent: ConfigMap = serde_json::from_value(json!({"metadata": {
        "name": "by-namespace",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Namespace", "name": "team",
                             "uid": team.metadata.uid.unwrap()}],
    }}))
    .unwrap();
    create(&api, dependent).await;
    assert_eq!(names(&api).await, set(&["by-secret", "by-namespace"]));

    secrets
        .delete("creds", &DeleteParams::default())
        .await
        .unwrap();
    ns.delete("team", &DeleteParams::default()).await.unwrap();

    assert_eq!(names(&api).await, BTreeSet::new());
    server.shutdown().await;
}

#[tokio::test]
async fn an_unknown_propagation_policy_is_rejected_and_nothing_is_deleted() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    plain(&api, "owner").await;
    let request = http::Request::delete("/api/v1/namespaces/default/configmaps/owner")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"propagationPolicy": "Later"})).unwrap())
        .unwrap();
    let err = server
        .client()
        .request::<ConfigMap>(request)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 422),
        other => panic!("expected an API error, got {other:?}"),
    }
    assert_eq!(names(&api).await, set(&["owner"]));
    server.shutdown().await;
}
