//! Integration tests: informers through kube's client against the project's dev API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kubewasm_devserver::{DevServer, Options, Verb};
use kubewasm_informer::{
    BackoffOptions, FactoryOptions, InformerKey, ListStrategy, ListWatchOptions, ObjectRef,
    ReflectorOptions, ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
    index_funcs,
};
use kubewasm_labels::Selector;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Records every call and keeps the view a controller would rebuild from them.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    view: Mutex<BTreeMap<String, String>>,
    delay: Duration,
}

impl Recorder {
    fn slow(delay: Duration) -> Recorder {
        Recorder {
            delay,
            ..Recorder::default()
        }
    }
    fn events(&self) -> Vec<String> {
        self.events.lock().clone()
    }
    fn view(&self) -> BTreeMap<String, String> {
        self.view.lock().clone()
    }
    fn count(&self, prefix: &str) -> usize {
        self.events
            .lock()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
    fn pause(&self) {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }
}

impl ResourceEventHandler for Recorder {
    fn on_add(&self, obj: &ObjectRef, in_initial_list: bool) {
        self.pause();
        self.view
            .lock()
            .insert(obj.key().into(), obj.resource_version().into());
        self.events
            .lock()
            .push(format!("add {} initial={in_initial_list}", obj.name()));
    }
    fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
        self.pause();
        assert_eq!(old.key(), new.key());
        self.view
            .lock()
            .insert(new.key().into(), new.resource_version().into());
        self.events.lock().push(format!("update {}", new.name()));
    }
    fn on_delete(&self, obj: &ObjectRef, final_state_unknown: bool) {
        self.pause();
        self.view.lock().remove(obj.key());
        self.events.lock().push(format!(
            "delete {} unknown={final_state_unknown}",
            obj.name()
        ));
    }
}

fn config_map(name: &str, value: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "demo"}},
        "data": {"value": value},
    })
}

fn fast_options() -> FactoryOptions {
    FactoryOptions {
        list_watch: ListWatchOptions::default(),
        reflector: ReflectorOptions {
            backoff: BackoffOptions {
                initial: Duration::from_millis(50),
                cap: Duration::from_millis(500),
                jitter: 0.2,
                ..BackoffOptions::default()
            },
            min_healthy_watch: Duration::from_millis(10),
            ..ReflectorOptions::default()
        },
        default_resync: None,
    }
}

fn config_maps_key() -> InformerKey {
    InformerKey::all(kube::discovery::ApiResource::erase::<ConfigMap>(&()))
}

async fn start_server() -> DevServer {
    DevServer::start(Options::default())
        .await
        .expect("dev server starts")
}

/// Counts the list/watch errors of `informer` that `matches` picks.
fn count_errors(
    informer: &SharedIndexInformer,
    matches: impl Fn(&kubewasm_informer::Error) -> bool + Send + Sync + 'static,
) -> Arc<Mutex<usize>> {
    let count = Arc::new(Mutex::new(0));
    informer.set_watch_error_handler({
        let count = count.clone();
        Arc::new(move |err| {
            if matches(err) {
                *count.lock() += 1;
            }
        })
    });
    count
}

/// Polls `cond` every 20 ms for up to 30 s.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..1500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out after 30 s waiting for: {what}");
}

/// The server's ConfigMaps in `default` as key -> resourceVersion.
async fn server_view(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|cm| {
            (
                format!("default/{}", cm.metadata.name.unwrap_or_default()),
                cm.metadata.resource_version.unwrap_or_default(),
            )
        })
        .collect()
}

fn store_view(informer: &SharedIndexInformer) -> BTreeMap<String, String> {
    informer
        .indexer()
        .list()
        .iter()
        .map(|o| (o.key().to_string(), o.resource_version().to_string()))
        .collect()
}

/// Waits until the informer's watch is open: an object created now reaches its cache. (After a
/// LIST, the watch opens a moment after the informer reports synced.)
async fn wait_watching(server: &DevServer, informer: &SharedIndexInformer) {
    server.create(config_map("watching", "v")).unwrap();
    eventually("the watch to deliver an object", || {
        informer.indexer().get("default/watching").is_some()
    })
    .await;
}

async fn wait_synced(informer: &SharedIndexInformer) {
    tokio::time::timeout(Duration::from_secs(30), informer.wait_synced())
        .await
        .expect("informer syncs within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_sync_then_live_add_update_delete_in_order() {
    let server = start_server().await;
    for i in 0..5 {
        server.create(config_map(&format!("cm-{i}"), "v0")).unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let rec = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(rec.clone(), None);
    factory.start();
    assert!(
        tokio::time::timeout(Duration::from_secs(30), factory.wait_for_cache_sync())
            .await
            .unwrap()
    );
    assert_eq!(informer.indexer().len(), 5);
    assert!(
        tokio::time::timeout(Duration::from_secs(30), reg.wait_synced())
            .await
            .unwrap()
    );
    assert!(reg.has_synced());
    assert_eq!(rec.count("add cm-"), 5);
    assert!(rec.events().iter().all(|e| e.ends_with("initial=true")));
    // The default list: one LIST at resourceVersion=0, then a watch from its version.
    let requests = server.requests();
    assert_eq!(requests[0].verb, Verb::List);
    assert!(requests[0].query.contains("resourceVersion=0"));
    assert!(requests[1..].iter().all(|r| r.verb == Verb::Watch));

    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.create(
        &PostParams::default(),
        &serde_json::from_value(config_map("live", "a")).unwrap(),
    )
    .await
    .unwrap();
    api.patch(
        "live",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "b"}})),
    )
    .await
    .unwrap();
    api.delete("live", &DeleteParams::default()).await.unwrap();
    eventually("the live events", || rec.count("delete live") == 1).await;
    let live: Vec<_> = rec
        .events()
        .into_iter()
        .filter(|e| e.contains(" live"))
        .collect();
    assert_eq!(
        live,
        vec![
            "add live initial=false",
            "update live",
            "delete live unknown=false"
        ]
    );
    assert!(informer.indexer().get("default/live").is_none());
    assert_eq!(store_view(&informer), server_view(&api).await);
    assert!(informer.last_sync_resource_version().is_some());
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falls_back_to_a_paginated_list_when_streaming_is_rejected() {
    let server = start_server().await;
    for i in 0..7 {
        server.create(config_map(&format!("cm-{i}"), "v")).unwrap();
    }
    server.fail_next(Verb::Watch, 1, 422);
    let mut options = fast_options();
    options.reflector.list = ListStrategy::Streaming;
    options.list_watch.page_size = 3;
    let factory = SharedInformerFactory::new(server.client(), options);
    let informer = factory.informer_for(config_maps_key());
    factory.start();
    wait_synced(&informer).await;
    assert_eq!(informer.indexer().len(), 7);
    let lists: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::List)
        .collect();
    assert_eq!(lists.len(), 3, "7 objects in pages of 3");
    assert!(lists[0].query.contains("limit=3"));
    assert!(lists[1].query.contains("continue="));
    assert!(!informer.stats().streaming_list);
    // And it watches from the list's version: a new object arrives.
    server.create(config_map("after", "v")).unwrap();
    eventually("the new object", || {
        informer.indexer().get("default/after").is_some()
    })
    .await;
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_list_strategy_syncs_then_watches_from_the_lists_version() {
    let server = start_server().await;
    for i in 0..7 {
        server.create(config_map(&format!("cm-{i}"), "v")).unwrap();
    }
    for (round, strategy) in [
        ListStrategy::AnyVersion,
        ListStrategy::Streaming,
        ListStrategy::Paginated,
    ]
    .into_iter()
    .enumerate()
    {
        server.clear_requests();
        let mut options = fast_options();
        options.reflector.list = strategy;
        options.list_watch.page_size = 3;
        let factory = SharedInformerFactory::new(server.client(), options);
        let informer = factory.informer_for(config_maps_key());
        factory.start();
        wait_synced(&informer).await;
        // 7, plus one created after each earlier round's sync.
        assert_eq!(informer.indexer().len(), 7 + round, "{strategy:?}");
        let name = format!("after-{strategy:?}").to_lowercase();
        server.create(config_map(&name, "v")).unwrap();
        eventually("the object created after the sync", || {
            informer.indexer().get(&format!("default/{name}")).is_some()
        })
        .await;
        let requests = server.requests();
        let lists: Vec<&str> = requests
            .iter()
            .filter(|r| r.verb == Verb::List)
            .map(|r| r.query.as_str())
            .collect();
        match strategy {
            ListStrategy::AnyVersion => {
                assert_eq!(lists.len(), 1, "one answer: {lists:?}");
                assert!(lists[0].contains("resourceVersion=0") && !lists[0].contains("limit"));
            }
            ListStrategy::Streaming => {
                assert!(lists.is_empty());
                assert!(requests[0].query.contains("sendInitialEvents=true"));
            }
            ListStrategy::Paginated => {
                assert_eq!(lists.len(), 3, "9 objects in pages of 3");
                assert!(lists.iter().all(|q| !q.contains("resourceVersion=0")));
            }
        }
        assert!(
            requests
                .iter()
                .filter(|r| r.verb == Verb::Watch)
                .all(|r| r.query.contains("resourceVersion=")
                    || r.query.contains("sendInitialEvents")),
            "{strategy:?}: watches resume from a version"
        );
        factory.shutdown().await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_resumes_without_relist_or_lost_events() {
    let server = start_server().await;
    server.create(config_map("first", "v")).unwrap();
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let rec = Arc::new(Recorder::default());
    informer.add_event_handler(rec.clone(), None);
    factory.start();
    wait_synced(&informer).await;
    wait_watching(&server, &informer).await;
    server.clear_requests();
    for round in 0..3 {
        server.close_watches();
        server
            .create(config_map(&format!("during-{round}"), "v"))
            .unwrap();
    }
    eventually("all three objects", || rec.count("add during-") == 3).await;
    let stats = informer.stats();
    assert_eq!(stats.lists, 1, "no relist");
    assert!(stats.watch_restarts >= 1);
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.verb == Verb::Watch));
    assert!(
        requests
            .iter()
            .all(|r| !r.query.contains("sendInitialEvents=true")),
        "re-watches resume from a version, they do not list again"
    );
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_does_not_answer_is_given_up_at_its_idle_limit_and_retried() {
    let server = start_server().await;
    server.create(config_map("first", "v")).unwrap();
    // Every request waits 10 minutes before it is answered: without an idle limit the first
    // LIST would hang for all of them.
    server.set_latency(Duration::from_secs(600));
    let mut options = fast_options();
    options.list_watch.list_idle_limit = Duration::from_millis(300);
    let factory = SharedInformerFactory::new(server.client(), options);
    let informer = factory.informer_for(config_maps_key());
    let idle_errors = count_errors(&informer, |err| {
        matches!(err, kubewasm_informer::Error::ListIdle(_))
    });
    factory.start();
    eventually("a LIST given up twice", || *idle_errors.lock() >= 2).await;
    assert!(!informer.has_synced());
    server.set_latency(Duration::ZERO);
    wait_synced(&informer).await;
    assert!(informer.indexer().get("default/first").is_some());
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watch_is_dropped_at_its_idle_limit_and_resumed_without_relist() {
    let server = start_server().await;
    server.create(config_map("first", "v")).unwrap();
    let mut options = fast_options();
    // Watches ask for 1 to 2 s; silence longer than that plus 0.5 s drops them.
    options.reflector.min_watch_timeout = Duration::from_secs(1);
    options.reflector.watch_idle_margin = Duration::from_millis(500);
    let factory = SharedInformerFactory::new(server.client(), options);
    let informer = factory.informer_for(config_maps_key());
    let idle_errors = count_errors(&informer, |err| {
        matches!(err, kubewasm_informer::Error::WatchIdle(_))
    });
    factory.start();
    wait_synced(&informer).await;
    wait_watching(&server, &informer).await;
    let before = informer.stats();
    server.clear_requests();
    // A watch ends every 1 to 2 s here; one that ended just before the stall is replaced by a
    // watch the stall does not reach, which sees the object at once. Stall again until a
    // stalled watch had to be given up (without the idle limit the object would never arrive).
    for round in 0..5 {
        server.stall_watches();
        let name = format!("after-stall-{round}");
        server.create(config_map(&name, "v")).unwrap();
        eventually("the object created after the stall", || {
            informer.indexer().get(&format!("default/{name}")).is_some()
        })
        .await;
        if *idle_errors.lock() > 0 {
            break;
        }
    }
    let stats = informer.stats();
    assert!(*idle_errors.lock() >= 1, "a silent watch was dropped");
    assert!(stats.watch_restarts > before.watch_restarts, "counted");
    assert_eq!(stats.lists, 1, "no relist");
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.verb == Verb::Watch));
    assert!(
        requests
            .iter()
            .all(|r| r.query.contains("resourceVersion=") && !r.query.contains("sendInitialEvents")),
        "re-watched from the last resourceVersion: {requests:?}"
    );
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_whose_bookmarks_stop_is_restarted_at_the_bookmark_idle_limit() {
    // Bookmarks every 200 ms; a watch that sends nothing for 3 s once bookmarks have come is
    // dropped. The watches' own idle limit (their 300 to 600 s timeout plus 30 s) would leave
    // a silenced watch in place far longer than the 30 s this test waits.
    let server = DevServer::start(Options {
        bookmark_interval: Duration::from_millis(200),
        ..Options::default()
    })
    .await
    .expect("dev server starts");
    server.create(config_map("first", "v")).unwrap();
    let mut options = fast_options();
    options.reflector.bookmark_idle_limit = Duration::from_secs(3);
    let factory = SharedInformerFactory::new(server.client(), options);
    let informer = factory.informer_for(config_maps_key());
    let stopped = count_errors(&informer, |err| {
        matches!(err, kubewasm_informer::Error::BookmarksStopped(_))
    });
    factory.start();
    wait_synced(&informer).await;
    eventually("a bookmark", || informer.stats().bookmarks > 0).await;
    server.clear_requests();
    server.stall_watches();
    server.create(config_map("after-stall", "v")).unwrap();
    eventually("the object created after the stall", || {
        informer.indexer().get("default/after-stall").is_some()
    })
    .await;
    assert!(*stopped.lock() >= 1, "the silenced watch was given up");
    let stats = informer.stats();
    assert_eq!(stats.lists, 1, "no relist");
    let requests = server.requests();
    assert!(
        !requests.is_empty()
            && requests.iter().all(|r| r.verb == Verb::Watch
                && r.query.contains("resourceVersion=")
                && !r.query.contains("sendInitialEvents")),
        "re-watched from the last resourceVersion: {requests:?}"
    );
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_while_disconnected_relists_with_tombstones_and_updates() {
    let server = start_server().await;
    for name in ["stays", "changes", "goes"] {
        server.create(config_map(name, "v0")).unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let rec = Arc::new(Recorder::default());
    informer.add_event_handler(rec.clone(), None);
    factory.start();
    wait_synced(&informer).await;
    eventually("the initial adds", || rec.count("add ") == 3).await;
    server.clear_requests();

    // Disconnect: the watch ends and the next re-watches fail while the world changes.
    server.fail_next(Verb::Watch, 6, 500);
    server.close_watches();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.delete("goes", &DeleteParams::default()).await.unwrap();
    api.patch(
        "changes",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"value": "v1"}})),
    )
    .await
    .unwrap();
    server.create(config_map("new", "v0")).unwrap();
    server.compact();

    eventually("the relist's tombstone", || {
        rec.count("delete goes unknown=true") == 1
    })
    .await;
    eventually("the rest of the relist", || {
        rec.count("update changes") == 1 && rec.count("add new") == 1
    })
    .await;
    assert_eq!(
        rec.count("update stays"),
        0,
        "unchanged objects are not re-announced"
    );
    let stats = informer.stats();
    assert_eq!(stats.relists, 1);
    assert!(stats.errors >= 6);
    let relists: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::List)
        .collect();
    assert!(
        relists
            .iter()
            .all(|r| !r.query.contains("resourceVersion=0") && r.query.contains("limit=")),
        "a relist after 410 is consistent and paginated, never at any version: {relists:?}"
    );
    assert_eq!(store_view(&informer), server_view(&api).await);
    assert_eq!(rec.view(), server_view(&api).await);
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_and_failing_answers_back_off_and_recover() {
    let server = start_server().await;
    server.create(config_map("a", "v")).unwrap();
    server.fail_next(Verb::Watch, 2, 429);
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let codes = Arc::new(Mutex::new(Vec::new()));
    let seen = codes.clone();
    informer.set_watch_error_handler(Arc::new(move |err| {
        seen.lock().push(err.status_code());
    }));
    factory.start();
    wait_synced(&informer).await;
    // kube's client retries 429 itself (its default retry policy), so the informer only sees
    // the answer that finally succeeded; the server saw all three requests.
    let watches = |server: &DevServer| {
        server
            .requests()
            .into_iter()
            .filter(|r| r.verb == Verb::Watch)
            .count()
    };
    eventually("the throttled watch retried by the client", || {
        watches(&server) == 3
    })
    .await;
    assert!(codes.lock().is_empty());

    server.fail_next(Verb::Watch, 3, 500);
    server.close_watches();
    server.create(config_map("b", "v")).unwrap();
    eventually("recovery after three 500s", || {
        informer.indexer().get("default/b").is_some()
    })
    .await;
    assert_eq!(codes.lock().iter().filter(|c| **c == Some(500)).count(), 3);
    assert_eq!(informer.stats().relists, 0);
    let watches = watches(&server);
    assert!(
        watches >= 7,
        "2 throttled + 1 good + 3 failed + 1 good, saw {watches}"
    );
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_added_late_gets_the_cache_then_live_events() {
    let server = start_server().await;
    for i in 0..50 {
        server.create(config_map(&format!("cm-{i}"), "v")).unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    factory.start();
    wait_synced(&informer).await;

    // Writes keep flowing while the late handler joins.
    let writer = {
        let server = server.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                server
                    .create(config_map(&format!("late-{i}"), "v"))
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let rec = Arc::new(Recorder::default());
    let reg = informer.add_event_handler(rec.clone(), None);
    writer.await.unwrap();
    assert!(
        tokio::time::timeout(Duration::from_secs(30), reg.wait_synced())
            .await
            .unwrap()
    );
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let expected = server_view(&api).await;
    eventually("the late handler's view to match the server", || {
        rec.view() == expected
    })
    .await;
    // Nothing doubled: exactly one add per object, the replayed ones flagged initial.
    assert_eq!(rec.count("add "), 100);
    assert!(
        rec.count("add cm-") == 50
            && rec.events()[..50]
                .iter()
                .all(|e| e.ends_with("initial=true"))
    );
    assert_eq!(rec.count("update "), 0);
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handler_does_not_delay_a_fast_one() {
    let server = start_server().await;
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let slow = Arc::new(Recorder::slow(Duration::from_millis(200)));
    let fast = Arc::new(Recorder::default());
    let slow_reg = informer.add_event_handler(slow.clone(), None);
    informer.add_event_handler(fast.clone(), None);
    factory.start();
    wait_synced(&informer).await;
    for i in 0..20 {
        server.create(config_map(&format!("cm-{i}"), "v")).unwrap();
    }
    eventually("the fast handler to see all 20", || {
        fast.count("add ") == 20
    })
    .await;
    // 20 events at 200 ms each take the slow handler 4 s.
    assert!(slow.count("add ") < 20);
    assert!(slow_reg.pending() > 0);
    informer.remove_event_handler(&slow_reg);
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_index_through_the_containers_list_files_pods_under_each_image() {
    let server = start_server().await;
    let pod = |name: &str, images: &[&str]| {
        let containers: Vec<_> = images
            .iter()
            .enumerate()
            .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
            .collect();
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": containers},
        })
    };
    server.create(pod("web", &["nginx:1", "envoy:2"])).unwrap();
    server
        .create(pod("db", &["postgres:16", "envoy:2"]))
        .unwrap();
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let pods = factory.informer_for(InformerKey::all(kube::discovery::ApiResource::erase::<
        k8s_openapi::api::core::v1::Pod,
    >(&())));
    pods.add_indexers(vec![(
        "image".into(),
        index_funcs::field_path("spec.containers.image"),
    )])
    .unwrap();
    factory.start();
    wait_synced(&pods).await;
    let keys = |image: &str| {
        let mut keys = pods.indexer().index_keys("image", image).unwrap();
        keys.sort();
        keys
    };
    assert_eq!(keys("envoy:2"), ["default/db", "default/web"]);
    assert_eq!(keys("nginx:1"), ["default/web"]);
    let mut images = pods.indexer().list_index_func_values("image").unwrap();
    images.sort();
    assert_eq!(images, ["envoy:2", "nginx:1", "postgres:16"]);
    // An update that changes one image moves the pod between values.
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(server.client(), "default");
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(
                json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}]),
            )
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    eventually("the new image indexed", || {
        keys("nginx:2") == ["default/web"]
    })
    .await;
    assert!(keys("nginx:1").is_empty());
    assert_eq!(keys("envoy:2"), ["default/db", "default/web"]);
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_listers_and_typed_informers_share_one_cache() {
    let server = start_server().await;
    for (name, app, ns) in [
        ("a", "web", "default"),
        ("b", "db", "default"),
        ("c", "web", "kube-system"),
    ] {
        let mut cm = config_map(name, "v");
        cm["metadata"]["labels"]["app"] = json!(app);
        cm["metadata"]["namespace"] = json!(ns);
        server.create(cm).unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let typed = factory.typed::<ConfigMap>(None);
    let generic = factory.for_resource(config_maps_key());
    assert_eq!(factory.informers().len(), 1, "same key, same informer");
    generic
        .informer
        .add_indexers(vec![("label:app".into(), index_funcs::label("app"))])
        .unwrap();
    factory.start();
    assert!(factory.wait_for_cache_sync().await);
    let web = generic
        .informer
        .indexer()
        .by_index("label:app", "web")
        .unwrap();
    assert_eq!(web.len(), 2);
    let in_default = typed
        .lister()
        .by_namespace("default")
        .list(&Selector::parse("app in (web,db)").unwrap())
        .unwrap();
    assert_eq!(in_default.len(), 2);
    let a = typed
        .lister()
        .by_namespace("default")
        .get("a")
        .unwrap()
        .unwrap();
    assert_eq!(a.data.unwrap()["value"], "v");
    // managedFields never reach the cache; apiVersion and kind are always there.
    let raw = generic.lister.by_namespace("default").get("b").unwrap();
    let value: serde_json::Value = raw.deserialize().unwrap();
    assert_eq!(value["kind"], "ConfigMap");
    assert!(value["metadata"].get("managedFields").is_none());
    // Adding an index after start indexes what is cached.
    generic
        .informer
        .add_indexers(vec![("ns2".into(), index_funcs::namespace())])
        .unwrap();
    assert_eq!(
        generic
            .informer
            .indexer()
            .index_keys("ns2", "kube-system")
            .unwrap(),
        vec!["kube-system/c"]
    );
    assert!(
        generic
            .informer
            .add_indexers(vec![("ns2".into(), index_funcs::namespace())])
            .is_err()
    );
    factory.stop_informer(&config_maps_key()).await;
    assert!(factory.informers().is_empty());
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_and_stores_converge_under_random_writes_and_faults() {
    let server = start_server().await;
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let informer = factory.informer_for(config_maps_key());
    let early = Arc::new(Recorder::default());
    informer.add_event_handler(early.clone(), None);
    let namespaced = factory.informer_for(config_maps_key().in_namespace("default"));
    factory.start();
    wait_synced(&informer).await;

    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut rng = StdRng::seed_from_u64(7);
    let mut late = None;
    for step in 0..300 {
        let name = format!("cm-{}", rng.random_range(0..40));
        match rng.random_range(0..10) {
            0..=3 => {
                let _ = server.create(config_map(&name, "v"));
            }
            4..=6 => {
                let value = format!("v{step}");
                let _ = api
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"data": {"value": value}})),
                    )
                    .await;
            }
            _ => {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        }
        match rng.random_range(0..40) {
            0 => server.close_watches(),
            1 => server.fail_next(Verb::Watch, rng.random_range(1..3), 500),
            2 => server.fail_next(Verb::Watch, 1, 429),
            3 => {
                server.close_watches();
                server.compact();
            }
            _ => {}
        }
        if step == 150 {
            let rec = Arc::new(Recorder::default());
            informer.add_event_handler(rec.clone(), None);
            late = Some(rec);
        }
    }
    let late = late.unwrap();
    let expected = server_view(&api).await;
    eventually("every store and handler to equal the server", || {
        store_view(&informer) == expected
            && store_view(&namespaced) == expected
            && early.view() == expected
            && late.view() == expected
    })
    .await;
    factory.shutdown().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolved_keys_with_selectors_get_their_own_filtered_informers() {
    let server = start_server().await;
    let (resource, namespaced) = kubewasm_informer::KindResolver::new(server.client())
        .resolve(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"))
        .await
        .unwrap();
    assert!(namespaced);
    assert_eq!(resource.plural, "configmaps");
    for (name, app) in [("w1", "web"), ("w2", "web"), ("d1", "db")] {
        let mut cm = config_map(name, "v");
        cm["metadata"]["labels"]["app"] = json!(app);
        server.create(cm).unwrap();
    }
    let factory = SharedInformerFactory::new(server.client(), fast_options());
    let web_key = InformerKey::all(resource.clone()).with_label_selector("app=web");
    let by_name_key = InformerKey::all(resource.clone()).with_field_selector("metadata.name=d1");
    let web = factory.informer_for(web_key.clone());
    let by_name = factory.informer_for(by_name_key);
    let all = factory.informer_for(InformerKey::all(resource));
    assert_eq!(
        factory.informers().len(),
        3,
        "different selectors, different informers"
    );
    factory.start();
    assert!(factory.wait_for_cache_sync().await);
    assert_eq!(web.indexer().len(), 2);
    assert_eq!(by_name.indexer().len(), 1);
    assert_eq!(all.indexer().len(), 3);
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.query.contains("labelSelector=app%3Dweb")),
        "the selector is applied by the server"
    );
    // Relabeling an object out of the selector removes it from the filtered cache.
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    api.patch(
        "w2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    eventually("w2 to leave the web cache", || web.indexer().len() == 1).await;
    factory.shutdown().await;
    server.shutdown().await;
}
