//! The development API server driven only through kube's client, as every other crate uses it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::runtime::watcher;
use kubewasm_devserver::{DevServer, Options, Verb};
use serde_json::json;

/// Generous bound for anything a test waits for, so slow CI does not flake.
const WAIT: Duration = Duration::from_secs(30);

async fn server() -> DevServer {
    DevServer::start(Options::default()).await.unwrap()
}

fn config_map(name: &str, labels: &[(&str, &str)], value: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        },
        "data": {"value": value},
    }))
    .unwrap()
}

fn api_error(err: kube::Error) -> Box<Status> {
    match err {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn next<S, T>(stream: &mut S) -> T
where
    S: Stream<Item = T> + Unpin,
{
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("timed out waiting for the next stream item")
        .expect("stream ended")
}

/// The next watch event that is not a bookmark.
async fn next_change<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        match next(stream).await.unwrap() {
            WatchEvent::Bookmark(_) => continue,
            event => return event,
        }
    }
}

fn name_of(event: &WatchEvent<ConfigMap>) -> (&'static str, String) {
    match event {
        WatchEvent::Added(o) => ("ADDED", o.metadata.name.clone().unwrap()),
        WatchEvent::Modified(o) => ("MODIFIED", o.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(o) => ("DELETED", o.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(_) => ("BOOKMARK", String::new()),
        WatchEvent::Error(e) => panic!("unexpected error event {e:?}"),
    }
}

/// As a cluster's API server does, every Namespace carries `kubernetes.io/metadata.name` with
/// its name, set on create and kept on update whatever the request says.
#[tokio::test]
async fn namespaces_are_labelled_with_their_name() {
    let server = server().await;
    let api: Api<Namespace> = Api::all(server.client());
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "team-a", "labels": {"tier": "web"}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    let label = |ns: &Namespace| {
        ns.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/metadata.name"))
            .cloned()
    };
    assert_eq!(label(&created).as_deref(), Some("team-a"));
    assert_eq!(
        created
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tier"))
            .map(String::as_str),
        Some("web")
    );
    let mut changed = created.clone();
    changed
        .metadata
        .labels
        .get_or_insert_default()
        .insert("kubernetes.io/metadata.name".into(), "other".into());
    let updated = api
        .replace("team-a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(label(&updated).as_deref(), Some("team-a"));
    let selected = api
        .list(&ListParams::default().labels("kubernetes.io/metadata.name=team-a"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1);
}

#[tokio::test]
async fn config_map_crud_round_trips_with_server_metadata() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(
            &PostParams::default(),
            &config_map("a", &[("app", "web")], "1"),
        )
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();

    let fetched = api.get("a").await.unwrap();
    assert_eq!(fetched.data.unwrap()["value"], "1");

    let mut changed = created.clone();
    changed.data = Some(BTreeMap::from([("value".to_string(), "2".to_string())]));
    let replaced = api
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"extra": "x"}})),
        )
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!((data["value"].as_str(), data["extra"].as_str()), ("2", "x"));

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let err = api_error(api.get("a").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
    server.shutdown().await;
}

#[tokio::test]
async fn generate_name_and_duplicate_names() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut template = config_map("", &[], "1");
    template.metadata.name = None;
    template.metadata.generate_name = Some("gen-".into());
    let a = api.create(&PostParams::default(), &template).await.unwrap();
    let b = api.create(&PostParams::default(), &template).await.unwrap();
    let (a, b) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(a.starts_with("gen-") && a.len() == 9 && a != b);

    api.create(&PostParams::default(), &config_map("dup", &[], "1"))
        .await
        .unwrap();
    let err = api_error(
        api.create(&PostParams::default(), &config_map("dup", &[], "2"))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(api.get("dup").await.unwrap().data.unwrap()["value"], "1");
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for (name, app, tier) in [
        ("a", "web", "front"),
        ("b", "web", "back"),
        ("c", "db", "back"),
    ] {
        api.create(
            &PostParams::default(),
            &config_map(name, &[("app", app), ("tier", tier)], "1"),
        )
        .await
        .unwrap();
    }
    api.create(&PostParams::default(), &config_map("d", &[], "1"))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|o| o.metadata.name.unwrap())
            .collect()
    };
    let cases = [
        ("app=web", vec!["a", "b"]),
        ("app!=web", vec!["c", "d"]),
        ("tier in (front,back),app notin (db)", vec!["a", "b"]),
        ("app", vec!["a", "b", "c"]),
        ("!app", vec!["d"]),
    ];
    for (selector, expected) in cases {
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        assert_eq!(names(list), expected, "{selector}");
    }
    let list = api
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(names(list), ["c"]);
    let all: Api<ConfigMap> = Api::all(server.client());
    let list = all
        .list(&ListParams::default().fields("metadata.namespace=default,metadata.name!=a"))
        .await
        .unwrap();
    assert_eq!(names(list), ["b", "c", "d"]);
    let err = api_error(
        api.list(&ListParams::default().labels("app in ("))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
}

#[tokio::test]
async fn pagination_returns_every_object_once_at_one_version() {
    let server = server().await;
    for i in 0..25 {
        server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("cm-{i:02}"), "namespace": "ns"}}))
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "ns");
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut versions = Vec::new();
    let mut pages = 0;
    loop {
        let mut params = ListParams::default().limit(10);
        if let Some(t) = token.take() {
            params = params.continue_token(&t);
        }
        let page = api.list(&params).await.unwrap();
        pages += 1;
        if pages == 1 {
            // A write between pages must not show up in later pages.
            api.create(&PostParams::default(), &config_map("cm-99", &[], "1"))
                .await
                .unwrap();
        }
        versions.push(page.metadata.resource_version.clone().unwrap());
        seen.extend(page.items.into_iter().map(|o| o.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(seen, expected);
    assert!(versions.windows(2).all(|w| w[0] == w[1]));
}

#[tokio::test]
async fn list_at_exact_version_shows_that_state_until_compacted() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &config_map("b", &[], "1"))
        .await
        .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let old = api
        .list(
            &ListParams::default()
                .at(&rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    let names: Vec<_> = old
        .items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a"]);
    server.compact();
    let err = api_error(
        api.list(
            &ListParams::default()
                .at(&rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn expired_continue_token_answers_gone() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &config_map(name, &[], "1"))
            .await
            .unwrap();
    }
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    let token = page.metadata.continue_.unwrap();
    server.compact();
    let err = api_error(
        api.list(&ListParams::default().limit(1).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 410);
}

#[tokio::test]
async fn watch_from_a_version_replays_later_changes_in_order() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("before", &[], "1"))
        .await
        .unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "2"}})),
    )
    .await
    .unwrap();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(name_of(&next_change(&mut stream).await));
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "a".into()),
            ("MODIFIED", "a".into()),
            ("DELETED", "a".into())
        ]
    );
    // Live events follow the replay.
    api.create(&PostParams::default(), &config_map("live", &[], "1"))
        .await
        .unwrap();
    assert_eq!(
        name_of(&next_change(&mut stream).await),
        ("ADDED", "live".into())
    );
}

#[tokio::test]
async fn watch_with_selector_sees_objects_enter_and_leave() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut stream = api
        .watch(&WatchParams::default().labels("app=web"), "0")
        .await
        .unwrap()
        .boxed();
    api.create(
        &PostParams::default(),
        &config_map("other", &[("app", "db")], "1"),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &config_map("a", &[("app", "db")], "1"),
    )
    .await
    .unwrap();
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"app": v}}}));
    api.patch("a", &PatchParams::default(), &label("web"))
        .await
        .unwrap();
    assert_eq!(
        name_of(&next_change(&mut stream).await),
        ("ADDED", "a".into())
    );
    api.patch("a", &PatchParams::default(), &label("db"))
        .await
        .unwrap();
    let event = next_change(&mut stream).await;
    assert_eq!(name_of(&event), ("DELETED", "a".into()));
}

#[tokio::test]
async fn bookmarks_arrive_periodically_when_allowed() {
    let server = DevServer::start(Options {
        bookmark_interval: Duration::from_millis(50),
        ..Options::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let mut last_rv = 0u64;
    let mut saw_added = false;
    loop {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(o) => {
                saw_added = true;
                last_rv = o.metadata.resource_version.unwrap().parse().unwrap();
            }
            WatchEvent::Bookmark(b) if saw_added => {
                let rv: u64 = b.metadata.resource_version.parse().unwrap();
                assert!(
                    rv >= last_rv,
                    "bookmark {rv} older than delivered event {last_rv}"
                );
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn streaming_list_sends_initial_events_then_end_bookmark() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for name in ["a", "b"] {
        api.create(&PostParams::default(), &config_map(name, &[], "1"))
            .await
            .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default().initial_events(), "")
        .await
        .unwrap()
        .boxed();
    let mut added = Vec::new();
    loop {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(o) => added.push(o.metadata.name.unwrap()),
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, ["a", "b"]);
}

#[tokio::test]
async fn watch_from_compacted_version_gets_gone_error_event() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let created = api
        .create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    server.compact();
    let rv = created.metadata.resource_version.unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"))
        }
        other => panic!("expected a 410 error event, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(WAIT, stream.next())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn history_size_bounds_how_far_back_a_watch_can_start() {
    let server = DevServer::start(Options {
        history_size: 2,
        ..Options::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = api
        .create(&PostParams::default(), &config_map("a", &[], "0"))
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for i in 1..=3 {
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"value": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let mut stream = api
        .watch(&WatchParams::default(), &first)
        .await
        .unwrap()
        .boxed();
    assert!(matches!(next(&mut stream).await.unwrap(), WatchEvent::Error(e) if e.code == 410));
}

#[tokio::test]
async fn stale_update_conflicts_and_changes_nothing() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let original = api
        .create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let mut first = original.clone();
    first.data = Some(BTreeMap::from([("value".into(), "first".into())]));
    api.replace("a", &PostParams::default(), &first)
        .await
        .unwrap();
    let mut stale = original.clone();
    stale.data = Some(BTreeMap::from([("value".into(), "stale".into())]));
    let err = api_error(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["value"], "first");
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut cm = config_map("held", &[], "1");
    cm.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let rv = api
        .get("held")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = api.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(matches!(
        next_change(&mut stream).await,
        WatchEvent::Modified(_)
    ));

    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("held").await.unwrap_err()).code, 404);
    assert_eq!(
        name_of(&next_change(&mut stream).await),
        ("DELETED", "held".into())
    );
}

#[tokio::test]
async fn status_subresource_is_separate_from_the_main_endpoint() {
    let server = server().await;
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    api.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let after_main = api
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Failed"}, "metadata": {"labels": {"x": "y"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(after_main.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(after_main.metadata.labels.unwrap()["x"], "y");
    let status = api.get_status("p").await.unwrap();
    assert_eq!(status.status.unwrap().phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn generation_changes_only_with_the_spec() {
    let server = server().await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        server.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        ),
    );
    let deploy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d"}, "spec": {"replicas": 1},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &deploy).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let scaled = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));
    // A patch that changes nothing writes nothing.
    let same = api
        .patch(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        scaled.metadata.resource_version
    );
}

#[tokio::test]
async fn crd_makes_namespaced_and_cluster_resources_servable() {
    let server = server().await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    for (plural, kind, scope) in [
        ("widgets", "Widget", "Namespaced"),
        ("gizmos", "Gizmo", "Cluster"),
    ] {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "metadata": {"name": format!("{plural}.example.com")},
            "spec": {
                "group": "example.com",
                "scope": scope,
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": true}}}],
            },
        }))
        .unwrap();
        let created = crds.create(&PostParams::default(), &crd).await.unwrap();
        let conditions = created.status.unwrap().conditions.unwrap();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        );
    }
    let discovery = kube::Discovery::new(server.client()).run().await.unwrap();
    let group = discovery
        .get("example.com")
        .expect("example.com is discoverable");
    let (widget, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.kind == "Widget")
        .unwrap();
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);

    let widgets: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widget);
    let mut obj = DynamicObject::new("w1", &widget);
    obj.data = json!({"spec": {"size": 3}});
    widgets.create(&PostParams::default(), &obj).await.unwrap();
    let got = widgets.get("w1").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 3);

    let gizmo = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gizmo"),
        "gizmos",
    );
    let gizmos: Api<DynamicObject> = Api::all_with(server.client(), &gizmo);
    gizmos
        .create(&PostParams::default(), &DynamicObject::new("g1", &gizmo))
        .await
        .unwrap();
    let listed = gizmos.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.namespace, None);

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    assert_eq!(api_error(widgets.get("w1").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn injected_faults_hit_only_the_chosen_verb_and_count() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();

    server.fail_next(Verb::List, 1, 500);
    assert_eq!(
        api.get("a").await.unwrap().metadata.name.as_deref(),
        Some("a")
    );
    let err = api_error(api.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (500, "InternalError"));
    assert!(api.list(&ListParams::default()).await.is_ok());

    // kube retries 429 by itself: the request succeeds and the log shows the retries.
    server.clear_requests();
    server.fail_next(Verb::Get, 2, 429);
    assert!(api.get("a").await.is_ok());
    let gets = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::Get)
        .count();
    assert_eq!(gets, 3);

    server.fail_next(Verb::Create, 1, 422);
    let err = api_error(
        api.create(&PostParams::default(), &config_map("b", &[], "1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(api_error(api.get("b").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn request_log_records_verb_resource_and_query() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "ns1");
    server.clear_requests();
    api.list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    api.get_opt("x").await.unwrap();
    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].verb, Verb::List);
    assert_eq!(log[0].resource, "configmaps");
    assert_eq!(log[0].version, "v1");
    assert_eq!(log[0].namespace.as_deref(), Some("ns1"));
    assert!(
        log[0].query.contains("labelSelector=app%3Dweb"),
        "{}",
        log[0].query
    );
    assert_eq!(log[1].verb, Verb::Get);
}

#[tokio::test]
async fn latency_is_added_to_requests() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    server.set_latency(Duration::from_millis(300));
    let started = std::time::Instant::now();
    api.get_opt("x").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn close_watches_ends_streams_and_watcher_recovers() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut raw = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut informer = watcher(api.clone(), watcher::Config::default()).boxed();
    assert!(matches!(
        next(&mut informer).await.unwrap(),
        watcher::Event::Init
    ));
    assert!(matches!(
        next(&mut informer).await.unwrap(),
        watcher::Event::InitDone
    ));
    server.close_watches();
    assert!(
        tokio::time::timeout(WAIT, raw.next())
            .await
            .unwrap()
            .is_none()
    );
    server.clear_requests();
    api.create(&PostParams::default(), &config_map("after", &[], "1"))
        .await
        .unwrap();
    match next(&mut informer).await.unwrap() {
        watcher::Event::Apply(o) => assert_eq!(o.metadata.name.as_deref(), Some("after")),
        other => panic!("unexpected {other:?}"),
    }
    // The watcher resumed from its resourceVersion without listing again.
    assert!(server.requests().iter().all(|r| r.verb != Verb::List));
}

#[tokio::test]
async fn stalled_watches_stay_open_and_silent_while_new_requests_work() {
    let server = DevServer::start(Options {
        bookmark_interval: Duration::from_millis(20),
        ..Options::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let params = WatchParams::default().timeout(1);
    let mut stalled = api.watch(&params, "0").await.unwrap().boxed();
    // Live before the stall: bookmarks flow.
    assert!(matches!(
        next(&mut stalled).await.unwrap(),
        WatchEvent::Bookmark(_)
    ));
    server.stall_watches();
    api.create(&PostParams::default(), &config_map("after", &[], "1"))
        .await
        .unwrap();
    let mut fresh = api.watch(&params, "0").await.unwrap().boxed();
    let mut saw_after = false;
    while !saw_after {
        if let WatchEvent::Added(cm) = next(&mut fresh).await.unwrap() {
            saw_after = cm.metadata.name.as_deref() == Some("after");
        }
    }
    // The stalled watch sent nothing more: no event, no bookmark, and no end at its 1 s
    // timeout (bookmarks it had already buffered may still be read at once).
    let silent = async {
        while let Some(event) = stalled.next().await {
            assert!(
                matches!(event, Ok(WatchEvent::Bookmark(_))),
                "only earlier bookmarks: {event:?}"
            );
        }
    };
    assert!(
        tokio::time::timeout(Duration::from_millis(1500), silent)
            .await
            .is_err(),
        "the stalled watch ended or kept talking"
    );
    server.close_watches();
    assert!(
        tokio::time::timeout(WAIT, stalled.next())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn watcher_relists_after_compaction() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let mut informer = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut events = Vec::new();
    while !matches!(events.last(), Some(watcher::Event::InitDone)) {
        events.push(next(&mut informer).await.unwrap());
    }
    server.clear_requests();
    server.compact();
    server.close_watches();
    // The resumed watch gets 410, so the watcher lists again.
    let mut relisted = false;
    for _ in 0..10 {
        if let Ok(watcher::Event::InitDone) = next(&mut informer).await {
            relisted = true;
            break;
        }
    }
    assert!(relisted);
    assert!(server.requests().iter().any(|r| r.verb == Verb::List));
}

#[tokio::test]
async fn watcher_with_streaming_lists_syncs_and_follows() {
    let server = server().await;
    for i in 0..30 {
        server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("cm-{i}"), "namespace": "default"}}))
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut informer = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = 0;
    loop {
        match next(&mut informer).await.unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(_) => initial += 1,
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(initial, 30);
    api.delete("cm-3", &DeleteParams::default()).await.unwrap();
    match next(&mut informer).await.unwrap() {
        watcher::Event::Delete(o) => assert_eq!(o.metadata.name.as_deref(), Some("cm-3")),
        other => panic!("unexpected {other:?}"),
    }
    assert!(server.requests().iter().all(|r| r.verb != Verb::List));
}

#[tokio::test]
async fn paged_watcher_lists_everything_once() {
    let server = server().await;
    for i in 0..1200 {
        server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": format!("cm-{i:04}"), "namespace": "default"}}))
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::all(server.client());
    let objects: Vec<ConfigMap> = watcher(api, watcher::Config::default())
        .try_take_while(|e| std::future::ready(Ok(!matches!(e, watcher::Event::InitDone))))
        .try_filter_map(|e| async move {
            Ok(match e {
                watcher::Event::InitApply(o) => Some(o),
                _ => None,
            })
        })
        .try_collect()
        .await
        .unwrap();
    assert_eq!(objects.len(), 1200);
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.verb == Verb::List)
        .count();
    assert_eq!(lists, 3, "500 per page");
}

#[tokio::test]
async fn bad_requests_answer_status_errors_and_keep_data() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("keep", &[], "1"))
        .await
        .unwrap();
    let client = server.client();
    let send = |method: &str, path: &str, body: &str, content_type: &str| {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(body.as_bytes().to_vec())
            .unwrap();
        let client = client.clone();
        async move {
            api_error(
                client
                    .request::<serde_json::Value>(request)
                    .await
                    .unwrap_err(),
            )
        }
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let malformed = send("POST", cms, "{not json", json).await;
    assert_eq!(malformed.code, 400);
    let wrong_kind = send(
        "POST",
        cms,
        r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#,
        json,
    )
    .await;
    assert_eq!(wrong_kind.code, 400);
    assert!(
        wrong_kind.message.contains("kind"),
        "{}",
        wrong_kind.message
    );
    let no_name = send(
        "POST",
        cms,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#,
        json,
    )
    .await;
    assert_eq!((no_name.code, no_name.reason.as_str()), (422, "Invalid"));
    let unknown = send("GET", "/api/v1/namespaces/default/widgets", "", json).await;
    assert_eq!(unknown.code, 404);
    let bad_patch = send(
        "PATCH",
        &format!("{cms}/keep"),
        r#"[{"op":"replace","path":"/data/missing/x","value":"2"}]"#,
        "application/json-patch+json",
    )
    .await;
    assert_eq!(bad_patch.code, 422);
    let unknown_type = send("PATCH", &format!("{cms}/keep"), "{}", "text/plain").await;
    assert_eq!(unknown_type.code, 415);
    let renamed = send(
        "PUT",
        &format!("{cms}/keep"),
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}"#,
        json,
    )
    .await;
    assert_eq!(renamed.code, 400);

    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].data.as_ref().unwrap()["value"], "1");
}

#[tokio::test]
async fn json_patch_applies_operations() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let operations: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/value", "value": "2"},
        {"op": "add", "path": "/data/b", "value": "3"},
    ]))
    .unwrap();
    let patched = api
        .patch("a", &PatchParams::default(), &Patch::Json::<()>(operations))
        .await
        .unwrap();
    let data = patched.data.unwrap();
    assert_eq!((data["value"].as_str(), data["b"].as_str()), ("2", "3"));
}

#[tokio::test]
async fn secret_string_data_is_stored_as_base64_data() {
    let server = server().await;
    let api: Api<Secret> = Api::namespaced(server.client(), "default");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "data": {"kept": "aGk="},
        "stringData": {"a": "f", "b": "fo", "c": "hello world", "empty": ""},
    }))
    .unwrap();
    api.create(&PostParams::default(), &secret).await.unwrap();
    // As the API server stores it: standard base64 with padding, `stringData` gone.
    let raw: DynamicObject = Api::namespaced_with(
        server.client(),
        "default",
        &ApiResource::erase::<Secret>(&()),
    )
    .get("creds")
    .await
    .unwrap();
    assert_eq!(
        raw.data["data"],
        json!({"kept": "aGk=", "a": "Zg==", "b": "Zm8=", "c": "aGVsbG8gd29ybGQ=", "empty": ""})
    );
    assert!(raw.data.get("stringData").is_none(), "{:?}", raw.data);
    let typed = api.get("creds").await.unwrap().data.unwrap();
    assert_eq!(typed["c"].0, b"hello world");
}

#[tokio::test]
async fn delete_collection_removes_selected_objects() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(
            &PostParams::default(),
            &config_map(name, &[("app", app)], "1"),
        )
        .await
        .unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=web"),
    )
    .await
    .unwrap();
    let left: Vec<_> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| o.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn initial_namespaces_exist_and_manifests_load() {
    let server = server().await;
    let namespaces: Api<Namespace> = Api::all(server.client());
    let names: Vec<_> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert!(names.contains(&"default".to_string()) && names.contains(&"kube-system".to_string()));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  namespace: apps\ndata:\n  k: v\n\
         ---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ignored.txt"), "not a manifest").unwrap();
    assert_eq!(server.load_manifests(dir.path()).unwrap(), 2);
    let cm: Api<ConfigMap> = Api::namespaced(server.client(), "apps");
    assert_eq!(cm.get("one").await.unwrap().data.unwrap()["k"], "v");
    assert!(namespaces.get("apps").await.is_ok());
}

#[tokio::test]
async fn manifests_get_owner_uids_filled_in_and_keep_their_status() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rs.yaml"),
        [
            "apiVersion: apps/v1",
            "kind: ReplicaSet",
            "metadata: {name: web, namespace: default}",
            "spec:",
            "  selector: {matchLabels: {app: web}}",
            "  template:",
            "    metadata: {labels: {app: web}}",
            "    spec: {containers: [{name: c, image: nginx}]}",
            "---",
            "apiVersion: v1",
            "kind: Pod",
            "metadata:",
            "  name: web-1",
            "  namespace: default",
            "  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: ''}]",
            "spec: {containers: [{name: c, image: nginx}]}",
            "status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}",
        ]
        .join("\n"),
    )
    .unwrap();
    assert_eq!(server.load_manifests(dir.path()).unwrap(), 2);
    let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let uid = rs.get("web").await.unwrap().metadata.uid.unwrap();
    let pod = pods.get("web-1").await.unwrap();
    assert_eq!(pod.metadata.owner_references.unwrap()[0].uid, uid);
    let status = pod.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.conditions.unwrap()[0].type_, "Ready");
}

/// A manifest names its controller with the `dev.kubewasm.io/controlled-by` annotation (which
/// a real API server accepts, unlike an owner reference without a uid): seeding turns it into a
/// controller owner reference with the owner's uid, and drops the annotation.
#[tokio::test]
async fn manifests_name_their_controller_by_annotation() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("rs.yaml"),
        [
            "apiVersion: apps/v1",
            "kind: ReplicaSet",
            "metadata: {name: web, namespace: default}",
            "spec:",
            "  selector: {matchLabels: {app: web}}",
            "  template:",
            "    metadata: {labels: {app: web}}",
            "    spec: {containers: [{name: c, image: nginx}]}",
            "---",
            "apiVersion: v1",
            "kind: Pod",
            "metadata:",
            "  name: web-1",
            "  namespace: default",
            "  annotations: {dev.kubewasm.io/controlled-by: apps/v1/ReplicaSet/web, keep: me}",
            "spec: {containers: [{name: c, image: nginx}]}",
        ]
        .join("\n"),
    )
    .unwrap();
    assert_eq!(server.load_manifests(dir.path()).unwrap(), 2);
    let rs: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(server.client(), "default");
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let uid = rs.get("web").await.unwrap().metadata.uid.unwrap();
    let pod = pods.get("web-1").await.unwrap();
    let owner = &pod.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("ReplicaSet", "web", uid.as_str())
    );
    assert_eq!(owner.controller, Some(true));
    let annotations = pod.metadata.annotations.unwrap();
    assert_eq!(annotations.keys().collect::<Vec<_>>(), ["keep"]);
}

#[tokio::test]
async fn kubeconfig_yaml_configures_a_working_client() {
    let server = server().await;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    assert_eq!(client.default_namespace(), "default");
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

#[tokio::test]
async fn watch_ends_after_timeout_seconds() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut stream = api
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(event) = stream.next().await {
            assert!(matches!(event.unwrap(), WatchEvent::Bookmark(_)));
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch outlived timeoutSeconds");
}

#[tokio::test]
async fn every_verb_can_be_made_to_fail() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(&PostParams::default(), &config_map("a", &[], "1"))
        .await
        .unwrap();
    let merge = Patch::Merge(json!({"data": {"value": "2"}}));
    let current = api.get("a").await.unwrap();

    server.fail_next(Verb::Watch, 1, 500);
    let err = api.watch(&WatchParams::default(), "0").await.err().unwrap();
    assert_eq!(api_error(err).code, 500);
    server.fail_next(Verb::Update, 1, 409);
    let err = api
        .replace("a", &PostParams::default(), &current)
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 409);
    server.fail_next(Verb::Patch, 1, 500);
    let err = api
        .patch("a", &PatchParams::default(), &merge)
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 500);
    server.fail_next(Verb::Delete, 1, 500);
    let err = api.delete("a", &DeleteParams::default()).await.unwrap_err();
    assert_eq!(api_error(err).code, 500);

    // None of the failed writes happened; the faults are used up.
    let after = api.get("a").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        current.metadata.resource_version
    );
    assert!(api.watch(&WatchParams::default(), "0").await.is_ok());
    api.delete("a", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn watcher_retries_after_injected_watch_failure() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    server.fail_next(Verb::Watch, 1, 500);
    let mut informer = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut saw_error = false;
    loop {
        match next(&mut informer).await {
            Err(_) => saw_error = true,
            Ok(watcher::Event::InitDone) => break,
            Ok(_) => {}
        }
    }
    api.create(&PostParams::default(), &config_map("later", &[], "1"))
        .await
        .unwrap();
    loop {
        match next(&mut informer).await {
            Err(_) => saw_error = true,
            Ok(watcher::Event::Apply(o)) => {
                assert_eq!(o.metadata.name.as_deref(), Some("later"));
                break;
            }
            Ok(_) => {}
        }
    }
    assert!(saw_error, "the injected watch failure reached the watcher");
}

#[tokio::test]
async fn custom_resource_status_subresource() {
    let server = server().await;
    server
        .create(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "subresources": {"status": {}}}]},
        }))
        .unwrap();
    let widget = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &widget);
    let mut obj = DynamicObject::new("w", &widget);
    obj.data = json!({"spec": {"size": 1}, "status": {"ready": true}});
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    let status = Patch::Merge(json!({"status": {"ready": true}}));
    let updated = api
        .patch_status("w", &PatchParams::default(), &status)
        .await
        .unwrap();
    assert_eq!(updated.data["status"]["ready"], true);
    assert_eq!(updated.data["spec"]["size"], 1);
    assert_eq!(updated.metadata.generation, Some(1));
}

#[tokio::test]
async fn metadata_only_lists_and_watches_work() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(
        &PostParams::default(),
        &config_map("a", &[("app", "web")], "1"),
    )
    .await
    .unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        list.items[0].metadata.labels.as_ref().unwrap()["app"],
        "web"
    );
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.delete("a", &DeleteParams::default()).await.unwrap();
    loop {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Deleted(o) => {
                assert_eq!(o.metadata.name.as_deref(), Some("a"));
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_are_seen_by_every_watcher_in_order() {
    const WRITERS: usize = 4;
    const WRITES: usize = 50;
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..3 {
        let stream = api.watch(&WatchParams::default(), &rv).await.unwrap();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut versions = Vec::new();
            while versions.len() < WRITERS * WRITES {
                match next_change(&mut stream).await {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                        versions.push(o.metadata.resource_version.unwrap().parse::<u64>().unwrap())
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            versions
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            let name = format!("w{w}");
            api.create(&PostParams::default(), &config_map(&name, &[], "0"))
                .await
                .unwrap();
            for i in 1..WRITES {
                let patch = Patch::Merge(json!({"data": {"value": i.to_string()}}));
                api.patch(&name, &PatchParams::default(), &patch)
                    .await
                    .unwrap();
            }
        }));
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let mut seen = Vec::new();
    for watcher in watchers {
        let versions = watcher.await.unwrap();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "out of order: {versions:?}"
        );
        seen.push(versions);
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "watchers saw different events"
    );
}

#[tokio::test]
async fn pods_select_by_node_name_and_phase() {
    let server = server().await;
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod = |name: &str, node: Option<&str>| -> Pod {
        let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
        if let Some(node) = node {
            spec["nodeName"] = json!(node);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    api.create(&PostParams::default(), &pod("on-a", Some("node-a")))
        .await
        .unwrap();
    api.create(&PostParams::default(), &pod("pending", None))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect()
    };
    let on_a = api
        .list(&ListParams::default().fields("spec.nodeName=node-a"))
        .await
        .unwrap();
    assert_eq!(names(on_a), ["on-a"]);
    let unscheduled = api
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(names(unscheduled), ["pending"]);
    let pending = api
        .list(&ListParams::default().fields("status.phase=Pending"))
        .await
        .unwrap();
    assert_eq!(pending.items.len(), 2);

    // Scheduling a pod makes it appear in the node's watch.
    let mut stream = api
        .watch(&WatchParams::default().fields("spec.nodeName=node-a"), "0")
        .await
        .unwrap()
        .boxed();
    let scheduled = Patch::Merge(json!({"spec": {"nodeName": "node-a"}}));
    api.patch("pending", &PatchParams::default(), &scheduled)
        .await
        .unwrap();
    let mut added = Vec::new();
    while added.len() < 2 {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(p) => added.push(p.metadata.name.unwrap()),
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, ["on-a", "pending"]);

    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let err = api_error(
        cms.list(&ListParams::default().fields("spec.nodeName=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
}

#[tokio::test]
async fn dry_run_writes_answer_without_storing() {
    let server = server().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answered = api
        .create(&dry, &config_map("ghost", &[], "1"))
        .await
        .unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("ghost"));
    assert!(api.get_opt("ghost").await.unwrap().is_none());

    let real = api
        .create(&PostParams::default(), &config_map("real", &[], "1"))
        .await
        .unwrap();
    let patched = api
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"value": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["value"], "2");
    let delete = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    api.delete("real", &delete).await.unwrap();
    let stored = api.get("real").await.unwrap();
    assert_eq!(stored.data.unwrap()["value"], "1");
    assert_eq!(
        stored.metadata.resource_version,
        real.metadata.resource_version
    );
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_objects() {
    let server = server().await;
    let namespaces: Api<Namespace> = Api::all(server.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    for name in ["a", "b"] {
        server
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "doomed"}}))
            .unwrap();
    }
    server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "a", "namespace": "doomed-not"}}))
        .unwrap();
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let doomed: Api<ConfigMap> = Api::namespaced(server.client(), "doomed");
    assert!(
        doomed
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let other: Api<ConfigMap> = Api::namespaced(server.client(), "doomed-not");
    assert_eq!(
        other
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn in_process_create_reports_status_errors() {
    let server = server().await;
    let unknown = server
        .create(
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
        )
        .unwrap_err();
    assert_eq!(unknown.code, 404);
    let unnamed = server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}))
        .unwrap_err();
    assert_eq!((unnamed.code, unnamed.reason.as_str()), (422, "Invalid"));
    let created = server
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}))
        .unwrap();
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(created["metadata"]["resourceVersion"].is_string());
}

#[tokio::test]
async fn bad_manifests_fail_with_the_file_named() {
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("broken.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
    )
    .unwrap();
    let err = server.load_manifests(dir.path()).unwrap_err();
    assert!(format!("{err:#}").contains("broken.yaml"), "{err:#}");
    assert!(server.load_manifests(&dir.path().join("missing")).is_err());
}

#[tokio::test]
async fn shutdown_ends_watches_and_stops_serving() {
    let server = server().await;
    let client = server.client();
    let api: Api<ConfigMap> = Api::namespaced(client, "default");
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    server.clone().shutdown().await;
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(ended.is_ok(), "the watch outlived shutdown");
    let fresh: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    assert!(fresh.list(&ListParams::default()).await.is_err());
}

#[tokio::test]
async fn scale_subresource_reads_and_sets_replicas() {
    use k8s_openapi::api::apps::v1::Deployment;
    let server = server().await;
    let api: Api<Deployment> = Api::namespaced(server.client(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    }))
    .unwrap();
    api.create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let scaled = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(4));
    let stored = api.get("web").await.unwrap();
    assert_eq!(stored.spec.unwrap().replicas, Some(4));
    assert_eq!(stored.metadata.generation, Some(2));

    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let err = api_error(pods.get_scale("web").await.unwrap_err());
    assert_eq!(err.code, 404);
}

#[tokio::test]
async fn subresources_accept_only_get_update_and_patch() {
    let server = server().await;
    let api: Api<Pod> = Api::namespaced(server.client(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let request = http::Request::builder()
        .method("DELETE")
        .uri("/api/v1/namespaces/default/pods/p/status")
        .body(Vec::new())
        .unwrap();
    let err = api_error(
        server
            .client()
            .request::<serde_json::Value>(request)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 405);
    assert!(api.get_opt("p").await.unwrap().is_some());
}
