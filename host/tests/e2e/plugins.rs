//! End-to-end tests of the plugin runtime: the probe guest (and hostile configurations of it)
//! loaded into a `PluginHost` over shared informers, against the dev API server through kube's
//! client.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kubewasm_devserver::{DevServer, Verb};
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{
    FailureKind, Grants, HostOptions, Limits, PluginError, PluginHost, PluginPolicy, PluginState,
    PluginStatus, ResourcePattern,
};
use kubewasm_tests::{
    guest_bytes, guest_logs, probe_events as events, wait_probe_event as wait_event, wait_until,
};
use serde_json::{Value, json};

use crate::fixture::{DevRig, create, plugin_status, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

struct Env {
    server: DevServer,
    factory: SharedInformerFactory,
    host: PluginHost,
    config_maps: Api<ConfigMap>,
}

impl Env {
    /// A dev server, a factory and a host whose policy is looked up by the plugin file's stem.
    async fn new(policies: Vec<(&str, PluginPolicy)>) -> Env {
        let policies: HashMap<String, PluginPolicy> = policies
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        Env::with_policy(move |p: &Path| {
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            policies.get(stem.as_ref()).cloned().unwrap_or_default()
        })
        .await
    }

    async fn with_policy(policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static) -> Env {
        Env::with_observer(policy, Arc::new(kubewasm_runtime::NoopObserver)).await
    }

    async fn with_observer(
        policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static,
        observer: Arc<dyn kubewasm_runtime::Observer>,
    ) -> Env {
        let rig = DevRig::start(HostOptions {
            observer,
            ..policy_by_file(policy)
        })
        .await;
        Env {
            config_maps: rig.config_maps(),
            server: rig.server,
            factory: rig.factory,
            host: rig.host,
        }
    }

    /// Loads the probe from `file` and waits until every plugin has handled its replay, so
    /// objects created afterwards arrive as live events.
    async fn load(&self, file: &str) -> kubewasm_runtime::PluginId {
        let id = self
            .host
            .load(Path::new(file), guest_bytes("probe"))
            .await
            .unwrap_or_else(|e| panic!("loading {file}: {e}"));
        assert!(
            wait_until(PATIENCE, || self.host.ready()).await,
            "{file} never got ready"
        );
        id
    }

    fn status(&self, name: &str) -> PluginStatus {
        plugin_status(&self.host, name)
    }

    /// Creates a ConfigMap in `default` and returns its resourceVersion.
    async fn create(&self, name: &str, labels: &[(&str, &str)], data: Value) -> String {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            data: serde_json::from_value(data).expect("string data"),
            ..ConfigMap::default()
        };
        create(&self.config_maps, &cm).await
    }

    async fn update(&self, name: &str, data: Value) -> String {
        let mut cm = self.config_maps.get(name).await.expect("get ConfigMap");
        cm.data = serde_json::from_value(data).expect("string data");
        let updated = self
            .config_maps
            .replace(name, &PostParams::default(), &cm)
            .await
            .expect("update ConfigMap");
        updated.metadata.resource_version.expect("resourceVersion")
    }

    async fn delete(&self, name: &str) {
        self.config_maps
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete ConfigMap");
    }
}

fn config_map_subscription(extra: Value) -> Value {
    let mut sub =
        json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "default"});
    if let (Some(s), Some(e)) = (sub.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    sub
}

/// The probe as plugin `name`, subscribed to ConfigMaps in `default`, plus `extra` config.
fn probe(name: &str, extra: Value) -> PluginPolicy {
    let mut config = json!({"name": name, "subscriptions": [config_map_subscription(json!({}))]});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    PluginPolicy {
        config: config.to_string(),
        ..PluginPolicy::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_receives_replay_then_add_update_delete_in_order() {
    let env = Env::new(vec![("rec", probe("e2e-rec", json!({})))]).await;
    let rv_one = env.create("one", &[], json!({"v": "1"})).await;
    let id = env.load("rec.wasm").await;
    wait_event(
        "e2e-rec",
        &format!("EVENT add default/one rv={rv_one} flag=true"),
    )
    .await;
    assert!(wait_until(PATIENCE, || env.host.ready()).await);

    let rv_two = env.create("two", &[], json!({"v": "2"})).await;
    let rv_one_b = env.update("one", json!({"v": "1b"})).await;
    env.delete("two").await;
    // A watched deletion carries the object as deleted (a newer resourceVersion).
    let deleted =
        |e: &String| e.starts_with("EVENT delete default/two rv=") && e.ends_with(" flag=false");
    assert!(
        wait_until(PATIENCE, || events("e2e-rec").iter().any(deleted)).await,
        "{:?}",
        events("e2e-rec")
    );
    let seen = events("e2e-rec");
    assert_eq!(
        seen[..3],
        [
            format!("EVENT add default/one rv={rv_one} flag=true"),
            format!("EVENT add default/two rv={rv_two} flag=false"),
            format!("EVENT update default/one rv={rv_one_b}"),
        ]
    );
    assert!(seen.len() == 4 && deleted(&seen[3]), "{seen:?}");
    assert_eq!(
        guest_logs().lines_starting("e2e-rec", "OLD"),
        [format!("OLD rv={rv_one}")]
    );
    // Counted once the call returned, which is after the guest logged.
    assert!(wait_until(PATIENCE, || env.status("e2e-rec").events_delivered == 4).await);
    let status = env.status("e2e-rec");
    assert_eq!(status.id, id);
    assert_eq!(status.events_delivered, 4);
    assert_eq!(status.state, PluginState::Running);
    assert!(status.replay_done);
    assert_eq!(status.subscriptions, ["v1/ConfigMap ns=default"]);
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_missed_by_the_watch_arrives_as_a_tombstone_after_the_relist() {
    let env = Env::new(vec![("tomb", probe("e2e-tomb", json!({})))]).await;
    env.load("tomb.wasm").await;
    let rv = env.create("gone", &[], json!({})).await;
    wait_event(
        "e2e-tomb",
        &format!("EVENT add default/gone rv={rv} flag=false"),
    )
    .await;

    // Keep the informer from watching while the object is deleted and history compacted:
    // its next watch answers 410 and it must relist.
    env.server.fail_next(Verb::Watch, 3, 500);
    env.server.close_watches();
    env.delete("gone").await;
    env.server.compact();
    wait_event(
        "e2e-tomb",
        &format!("EVENT delete default/gone rv={rv} flag=true"),
    )
    .await;
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_replays_unchanged_objects_as_updates() {
    let sub = config_map_subscription(json!({"resyncSeconds": 1}));
    let env = Env::new(vec![(
        "rs",
        probe("e2e-resync", json!({"subscriptions": [sub]})),
    )])
    .await;
    let rv = env.create("steady", &[], json!({})).await;
    env.load("rs.wasm").await;
    let line = format!("EVENT update default/steady rv={rv}");
    let resynced = wait_until(PATIENCE, || {
        events("e2e-resync").iter().filter(|e| **e == line).count() >= 2
    })
    .await;
    assert!(resynced, "{:?}", events("e2e-resync"));
    assert!(
        guest_logs()
            .lines_starting("e2e-resync", "OLD")
            .iter()
            .all(|l| *l == format!("OLD rv={rv}"))
    );
    env.host.shutdown(Duration::from_secs(5)).await;
}

/// A ConfigMap the probe answers: it runs `query` against its cache view.
async fn ask(env: &Env, name: &str, query: Value) {
    let mut data = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    if let (Some(d), Some(q)) = (data.as_object_mut(), query.as_object()) {
        d.extend(q.clone());
    }
    env.create(name, &[("probe-query", "1")], data).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_answer_from_the_shared_cache_and_declared_indexes() {
    let indexes = json!([
        {"name": "by-app", "group": "", "version": "v1", "kind": "ConfigMap", "label": "app"},
        {"name": "by-color", "group": "", "version": "v1", "kind": "ConfigMap", "field": "data.color"},
    ]);
    let subs = json!([
        config_map_subscription(json!({})),
        {"group": "", "version": "v1", "kind": "Namespace", "cacheOnly": true},
    ]);
    let env = Env::new(vec![
        (
            "qa",
            probe("e2e-qa", json!({"indexes": indexes, "subscriptions": subs})),
        ),
        // Declares the same label index: it is shared, not added twice.
        (
            "qb",
            probe("e2e-qb", json!({"indexes": [indexes[0].clone()]})),
        ),
    ])
    .await;
    env.create("w1", &[("app", "web")], json!({"color": "red"}))
        .await;
    env.create("w2", &[("app", "web")], json!({"color": "blue"}))
        .await;
    env.create("d1", &[("app", "db")], json!({"color": "red"}))
        .await;
    env.load("qa.wasm").await;
    env.load("qb.wasm").await;
    assert!(wait_until(PATIENCE, || env.host.ready()).await);

    ask(
        &env,
        "q1",
        json!({"op": "by-index", "index": "by-app", "value": "web"}),
    )
    .await;
    ask(&env, "q2", json!({"op": "index-values", "index": "by-app"})).await;
    ask(
        &env,
        "q3",
        json!({"op": "by-index", "index": "by-color", "value": "red"}),
    )
    .await;
    ask(
        &env,
        "q4",
        json!({"op": "list", "namespace": "default", "selector": "app in (db)"}),
    )
    .await;
    ask(
        &env,
        "q5",
        json!({"op": "get", "namespace": "default", "name": "w2"}),
    )
    .await;
    ask(&env, "q6", json!({"op": "has-synced"})).await;
    ask(
        &env,
        "q7",
        json!({"op": "list", "kind": "Namespace", "selector": "!nope"}),
    )
    .await;
    ask(
        &env,
        "q8",
        json!({"op": "get", "kind": "Pod", "namespace": "default", "name": "x"}),
    )
    .await;
    ask(&env, "q9", json!({"op": "list", "selector": "app in (("})).await;
    let answers = || guest_logs().lines_starting("e2e-qa", "ANSWER");
    assert!(
        wait_until(PATIENCE, || answers().len() == 9).await,
        "{:?}",
        answers()
    );
    let answers = answers();
    assert_eq!(
        answers[..6],
        [
            "ANSWER q1 ok default/w1,default/w2",
            "ANSWER q2 ok db,web",
            "ANSWER q3 ok default/d1,default/w1",
            "ANSWER q4 ok default/d1",
            "ANSWER q5 ok default/w2",
            "ANSWER q6 ok true",
        ]
    );
    assert!(
        answers[6].starts_with("ANSWER q7 ok default,"),
        "{}",
        answers[6]
    );
    assert_eq!(answers[7], "ANSWER q8 err not-subscribed v1/Pod");
    assert!(
        answers[8].starts_with("ANSWER q9 err invalid"),
        "{}",
        answers[8]
    );
    // Cache-only: no events for namespaces.
    assert!(events("e2e-qa").iter().all(|e| !e.contains(" kube-system")));

    let qb = || guest_logs().lines_starting("e2e-qb", "ANSWER");
    assert!(wait_until(PATIENCE, || qb().len() == 9).await, "{:?}", qb());
    assert_eq!(qb()[0], "ANSWER q1 ok default/w1,default/w2");
    let informers = env.factory.informers();
    let (_, cm) = informers
        .iter()
        .find(|(k, _)| k.resource.kind == "ConfigMap")
        .expect("ConfigMap informer");
    let names = cm.indexer().index_names();
    assert_eq!(
        names.iter().filter(|n| *n == "label:app").count(),
        1,
        "{names:?}"
    );
    assert_eq!(
        informers
            .iter()
            .filter(|(k, _)| k.resource.kind == "ConfigMap")
            .count(),
        1,
        "both plugins share one ConfigMap informer"
    );
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_are_contained_and_others_receive_every_event() {
    let short = Limits {
        call_deadline: Duration::from_millis(500),
        ..Limits::default()
    };
    let small = Limits {
        memory: 16 << 20,
        ..Limits::default()
    };
    let hostile = |name: &str, mode: &str, limits: Limits| PluginPolicy {
        limits: Some(limits),
        ..probe(name, json!({"mode": mode, "trigger": "bad"}))
    };
    let env = Env::new(vec![
        ("rec", probe("iso-rec", json!({}))),
        ("trap", hostile("iso-trap", "trap", Limits::default())),
        ("loop", hostile("iso-loop", "loop", short)),
        ("alloc", hostile("iso-alloc", "alloc", small)),
        ("sleep", hostile("iso-sleep", "sleep", short)),
        ("nosy", hostile("iso-nosy", "ungranted", Limits::default())),
        ("err", hostile("iso-err", "error", Limits::default())),
    ])
    .await;
    for file in ["rec", "trap", "loop", "alloc", "sleep", "nosy", "err"] {
        env.load(&format!("{file}.wasm")).await;
    }
    assert!(wait_until(PATIENCE, || env.host.ready()).await);
    env.create("bad-1", &[], json!({})).await;
    let mut good = Vec::new();
    for i in 0..20 {
        good.push(env.create(&format!("good-{i}"), &[], json!({})).await);
    }
    for (i, rv) in good.iter().enumerate() {
        wait_event(
            "iso-rec",
            &format!("EVENT add default/good-{i} rv={rv} flag=false"),
        )
        .await;
    }
    assert_eq!(events("iso-rec").len(), 21, "{:?}", events("iso-rec"));

    let counted = |name: &str, f: fn(&PluginStatus) -> u64| {
        let env = &env;
        let name = name.to_owned();
        async move { wait_until(PATIENCE, || f(&env.status(&name)) == 1).await }
    };
    assert!(counted("iso-trap", |s| s.traps).await);
    assert!(counted("iso-loop", |s| s.timeouts).await);
    assert!(counted("iso-sleep", |s| s.timeouts).await);
    assert!(counted("iso-alloc", |s| s.memory_faults).await);
    assert!(counted("iso-err", |s| s.errors).await);
    assert!(
        wait_until(PATIENCE, || guest_logs()
            .lines_starting("iso-nosy", "UNGRANTED")
            == ["UNGRANTED err not-granted v1/Secret"])
        .await
    );
    for (name, failure) in [
        ("iso-trap", FailureKind::Trap),
        ("iso-loop", FailureKind::Timeout),
        ("iso-sleep", FailureKind::Timeout),
        ("iso-alloc", FailureKind::Memory),
    ] {
        // The host's lines name the plugin by its key, the file `trap.wasm` for `iso-trap`.
        let logged = guest_logs().host_lines(name.trim_start_matches("iso-"));
        assert!(
            logged
                .iter()
                .any(|l| l.contains("instance dropped") && l.contains("default/bad-1")),
            "{name}: {logged:?}"
        );
        assert!(
            env.status(name)
                .last_error
                .unwrap_or_default()
                .starts_with(failure.as_str())
        );
        // The fresh instance goes on receiving events.
        let last = format!("default/good-19 rv={}", good[19]);
        assert!(
            wait_until(PATIENCE, || events(name).iter().any(|e| e.contains(&last))).await,
            "{name} did not recover: {:?}",
            events(name)
        );
    }
    // The instance that ate up to its cap is gone from the plugin's memory: its fresh one holds
    // about what the same guest holds in a well-behaved plugin.
    let (alloc, rec) = (
        env.status("iso-alloc").memory_bytes,
        env.status("iso-rec").memory_bytes,
    );
    assert!(rec > 0 && alloc > 0, "alloc {alloc}, rec {rec}");
    assert!(
        alloc <= 2 * rec && alloc < small.memory / 2,
        "the faulted instance is still counted: alloc {alloc}, rec {rec}"
    );
    assert!(
        env.status("iso-err")
            .last_error
            .unwrap_or_default()
            .contains("probe refuses bad-1")
    );
    assert!(
        env.host
            .plugins()
            .iter()
            .all(|p| p.state == PluginState::Running)
    );
    assert_eq!(
        env.status("iso-rec").traps + env.status("iso-rec").errors,
        0
    );
    env.host.shutdown(Duration::from_secs(5)).await;
}

/// A file, its bytes, the error it must get and a phrase of the reason.
type BadFile = (
    &'static str,
    Vec<u8>,
    fn(&PluginError) -> bool,
    &'static str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_are_refused_with_the_file_and_reason_and_nothing_else_is_affected() {
    let env = Env::new(vec![
        ("survivor", probe("bad-survivor", json!({}))),
        ("initfail", probe("bad-init", json!({"initError": "missing setting"}))),
        ("inittrap", probe("bad-inittrap", json!({"initTrap": true}))),
        (
            "secrets",
            probe("bad-secrets", json!({"subscriptions": [{"version": "v1", "kind": "Secret"}]})),
        ),
        (
            "unknown",
            probe("bad-unknown", json!({"subscriptions": [{"group": "example.com", "version": "v1", "kind": "Gadget"}]})),
        ),
    ])
    .await;
    env.load("survivor.wasm").await;
    let cases: Vec<BadFile> = vec![
        (
            "notes.wasm",
            b"just text".to_vec(),
            |e| matches!(e, PluginError::NotWasm { .. }),
            "not a WebAssembly file",
        ),
        (
            "core.wasm",
            b"\0asm\x01\0\0\0".to_vec(),
            |e| matches!(e, PluginError::CoreModule { .. }),
            "core WebAssembly module",
        ),
        (
            "other.wasm",
            guest_bytes("other-world"),
            |e| matches!(e, PluginError::WrongWorld { .. }),
            "example:other",
        ),
        (
            "nohandler.wasm",
            guest_bytes("no-handler"),
            |e| matches!(e, PluginError::MissingExports { .. }),
            "missing exports",
        ),
        (
            "initfail.wasm",
            guest_bytes("probe"),
            |e| matches!(e, PluginError::InitFailed { .. }),
            "missing setting",
        ),
        (
            "inittrap.wasm",
            guest_bytes("probe"),
            |e| matches!(e, PluginError::InitTrapped { .. }),
            "trap",
        ),
        (
            "secrets.wasm",
            guest_bytes("probe"),
            |e| matches!(e, PluginError::NotGranted { .. }),
            "v1/Secret",
        ),
        (
            "unknown.wasm",
            guest_bytes("probe"),
            |e| matches!(e, PluginError::UnknownResource { .. }),
            "example.com/v1/Gadget",
        ),
    ];
    for (file, bytes, is, reason) in cases {
        let err = match env.host.load(Path::new(file), bytes).await {
            Ok(_) => panic!("{file} loaded"),
            Err(e) => e,
        };
        let msg = err.to_string();
        assert!(is(&err), "{file}: unexpected error {msg}");
        assert!(msg.contains(file) && msg.contains(reason), "{file}: {msg}");
    }
    assert_eq!(env.host.plugins().len(), 1);
    let rv = env.create("after", &[], json!({})).await;
    wait_event(
        "bad-survivor",
        &format!("EVENT add default/after rv={rv} flag=false"),
    )
    .await;

    // Secrets load once granted explicitly.
    let check = env
        .host
        .check(Path::new("secrets.wasm"), &guest_bytes("probe"))
        .await;
    assert!(matches!(check, Err(PluginError::NotGranted { .. })));
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_served_only_when_granted() {
    let granted = PluginPolicy {
        grants: Grants::only(vec![
            ResourcePattern::new("", "Secret"),
            ResourcePattern::new("", "ConfigMap"),
        ]),
        ..probe(
            "sec-ok",
            json!({"subscriptions": [{"version": "v1", "kind": "Secret", "namespace": "default", "cacheOnly": true}, config_map_subscription(json!({}))]}),
        )
    };
    let env = Env::new(vec![("sec", granted)]).await;
    let info = env
        .host
        .check(Path::new("sec.wasm"), &guest_bytes("probe"))
        .await
        .unwrap();
    assert_eq!(info.name, "sec-ok");
    env.load("sec.wasm").await;
    ask(
        &env,
        "sq",
        json!({"op": "list", "kind": "Secret", "namespace": "default"}),
    )
    .await;
    let answers = || guest_logs().lines_starting("sec-ok", "ANSWER");
    assert!(
        wait_until(PATIENCE, || answers() == ["ANSWER sq ok "]).await,
        "{:?}",
        answers()
    );
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_swaps_versions_with_a_replay_and_a_failed_replace_keeps_the_old_one() {
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    let env = Env::with_policy(move |_p: &Path| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        probe(&format!("rep-v{n}"), json!({}))
    })
    .await;
    let rv1 = env.create("r1", &[], json!({})).await;
    let id = env.load("rep.wasm").await;
    wait_event(
        "rep-v1",
        &format!("EVENT add default/r1 rv={rv1} flag=true"),
    )
    .await;

    env.host
        .replace(id, guest_bytes("probe"))
        .await
        .expect("replace");
    wait_event(
        "rep-v2",
        &format!("EVENT add default/r1 rv={rv1} flag=true"),
    )
    .await;
    let rv2 = env.create("r2", &[], json!({})).await;
    wait_event(
        "rep-v2",
        &format!("EVENT add default/r2 rv={rv2} flag=false"),
    )
    .await;
    assert!(events("rep-v1").iter().all(|e| !e.contains("default/r2")));
    let status = env.status("rep-v2");
    assert_eq!(status.id, id);
    assert_eq!(env.host.plugins().len(), 1);

    let err = env.host.replace(id, b"garbage".to_vec()).await.unwrap_err();
    assert!(matches!(err, PluginError::NotWasm { .. }));
    let status = env.status("rep-v2");
    assert_eq!(status.state, PluginState::Running);
    assert!(
        status
            .last_error
            .unwrap_or_default()
            .contains("not a WebAssembly file")
    );
    let rv3 = env.create("r3", &[], json!({})).await;
    wait_event(
        "rep-v2",
        &format!("EVENT add default/r3 rv={rv3} flag=false"),
    )
    .await;
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unload_removes_the_plugin_and_stops_its_unused_informer() {
    let sub = config_map_subscription(json!({"labelSelector": "only=unload"}));
    let env = Env::new(vec![(
        "un",
        probe("e2e-unload", json!({"subscriptions": [sub]})),
    )])
    .await;
    let id = env.load("un.wasm").await;
    let rv = env.create("u1", &[("only", "unload")], json!({})).await;
    wait_event(
        "e2e-unload",
        &format!("EVENT add default/u1 rv={rv} flag=false"),
    )
    .await;
    let selected = |env: &Env| {
        env.factory
            .informers()
            .iter()
            .any(|(k, _)| k.label_selector.as_deref() == Some("only=unload"))
    };
    assert!(selected(&env));
    env.host.unload(id).await;
    assert!(env.host.plugins().is_empty());
    assert!(!selected(&env));
    env.host.shutdown(Duration::from_secs(5)).await;
    let err = env
        .host
        .load(Path::new("un.wasm"), guest_bytes("probe"))
        .await
        .unwrap_err();
    assert!(matches!(err, PluginError::ShuttingDown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_releases_the_informers_it_created() {
    let subs = json!([
        {"group": "", "version": "v1", "kind": "Pod"},
        {"group": "example.com", "version": "v1", "kind": "Gadget"},
    ]);
    let env = Env::new(vec![(
        "half",
        probe(
            "half-wired",
            json!({"subscriptions": subs, "indexes": [
                {"name": "by-node", "group": "", "version": "v1", "kind": "Pod", "field": "spec.nodeName"}
            ]}),
        ),
    )])
    .await;
    let err = env
        .host
        .load(Path::new("half.wasm"), guest_bytes("probe"))
        .await
        .expect_err("Gadget is not served");
    assert!(matches!(err, PluginError::UnknownResource { .. }), "{err}");
    let pods = env
        .factory
        .informers()
        .into_iter()
        .filter(|(k, _)| k.resource.kind == "Pod")
        .count();
    assert_eq!(
        pods, 0,
        "the Pod informer of the failed load is still running"
    );
    assert!(env.host.plugins().is_empty());
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_no_plugin_declares_any_more_is_removed() {
    let index = json!({"name": "by-app", "group": "", "version": "v1", "kind": "ConfigMap", "label": "app"});
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = loads.clone();
    let env = Env::with_policy(move |p: &Path| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let stem = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // `keep` always declares the index; `drop` declares it in its first version only.
        let declares = stem == "keep" || n < 2;
        let indexes = if declares {
            json!([index.clone()])
        } else {
            json!([])
        };
        probe(&format!("idx-{stem}-{n}"), json!({"indexes": indexes}))
    })
    .await;
    let keep = env.load("keep.wasm").await;
    let dropper = env.load("drop.wasm").await;
    let names = |env: &Env| {
        env.factory
            .informers()
            .into_iter()
            .find(|(k, _)| k.resource.kind == "ConfigMap")
            .map(|(_, i)| i.indexer().index_names())
            .unwrap_or_default()
    };
    assert!(names(&env).contains(&"label:app".to_owned()));
    // Still declared by `drop`: kept.
    env.host.unload(keep).await;
    assert!(names(&env).contains(&"label:app".to_owned()));
    // Replaced by a version without it: nobody declares it, it is removed.
    env.host
        .replace(dropper, guest_bytes("probe"))
        .await
        .expect("replace");
    assert!(
        !names(&env).contains(&"label:app".to_owned()),
        "{:?}",
        names(&env)
    );
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_plugin_shows_its_queue_live_and_an_unloaded_one_leaves_no_series() {
    let metrics = Arc::new(kubewasm::metrics::Metrics::new(Arc::new(Vec::new)));
    let stuck = PluginPolicy {
        limits: Some(Limits {
            // A sleeping guest is waiting on the host: only the wall limit (10 times the
            // deadline) ends its call, after 10 s.
            call_deadline: Duration::from_secs(1),
            ..Limits::default()
        }),
        ..probe("live-q", json!({"mode": "sleep", "trigger": "bad"}))
    };
    let env = Env::with_observer(move |_: &Path| stuck.clone(), metrics.clone()).await;
    metrics.set_plugin_source(kubewasm::app::plugin_source(env.host.clone()));
    let id = env.load("stuck.wasm").await;
    env.create("bad-0", &[], json!({})).await;
    assert!(
        wait_until(PATIENCE, || events("live-q")
            .iter()
            .any(|e| e.contains("bad-0")))
        .await
    );
    for i in 0..3 {
        env.create(&format!("later-{i}"), &[], json!({})).await;
    }
    // The guest is asleep in its call: nothing is dequeued, yet the depth shows.
    let depth = r#"kubewasm_plugin_queue_depth{plugin="stuck"} 3"#;
    assert!(
        wait_until(PATIENCE, || metrics.encode().contains(depth)).await,
        "{}",
        metrics.encode()
    );
    assert!(wait_until(PATIENCE, || env.status("live-q").timeouts == 1).await);
    let handled = r#"kubewasm_plugin_events_total{plugin="stuck",resource="ConfigMap",event="add""#;
    assert!(metrics.encode().contains(handled));
    env.host.unload(id).await;
    let text = metrics.encode();
    assert!(!text.contains(r#"plugin="stuck""#), "{text}");
    env.host.shutdown(Duration::from_secs(5)).await;
}

/// A plugin is its file: one declaring another's name gets its own metric series, log lines and
/// status identity, and a second file with a loaded plugin's file name (from another directory)
/// is refused, naming both files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_is_its_file_and_a_declared_name_takes_nothing() {
    let metrics = Arc::new(kubewasm::metrics::Metrics::new(Arc::new(Vec::new)));
    let env = Env::with_observer(
        |path: &Path| {
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            // Both declare the name `victim`; only the thief refuses its events.
            match stem.as_ref() {
                "thief" => probe("victim", json!({"mode": "error", "trigger": "bad"})),
                _ => probe("victim", json!({})),
            }
        },
        metrics.clone(),
    )
    .await;
    metrics.set_plugin_source(kubewasm::app::plugin_source(env.host.clone()));
    env.load("victim.wasm").await;
    env.load("thief.wasm").await;
    env.create("bad-1", &[], json!({})).await;
    let thief_errors = r#"kubewasm_plugin_events_total{plugin="thief",resource="ConfigMap",event="add",outcome="error"} 1"#;
    assert!(
        wait_until(PATIENCE, || metrics.encode().contains(thief_errors)).await,
        "{}",
        metrics.encode()
    );
    assert!(
        metrics.encode().contains(
            r#"kubewasm_plugin_events_total{plugin="victim",resource="ConfigMap",event="add",outcome="error"} 0"#
        ),
        "the thief's errors went on the victim's series:\n{}",
        metrics.encode()
    );
    // Its guest lines and the host's warning about its error carry its own key.
    assert!(
        wait_until(PATIENCE, || events("thief")
            .iter()
            .any(|e| e.contains("bad-1")))
        .await
    );
    assert!(
        guest_logs()
            .host_lines("thief")
            .iter()
            .any(|l| l.contains("probe refuses bad-1")),
        "{:?}",
        guest_logs().host_lines("thief")
    );
    assert!(
        guest_logs()
            .host_lines("victim")
            .iter()
            .all(|l| !l.contains("probe refuses")),
        "{:?}",
        guest_logs().host_lines("victim")
    );
    let keys: Vec<(String, String)> = env
        .host
        .plugins()
        .into_iter()
        .map(|p| (p.key.to_string(), p.name))
        .collect();
    assert_eq!(
        keys,
        [
            ("victim".to_owned(), "victim".to_owned()),
            ("thief".to_owned(), "victim".to_owned())
        ]
    );
    // The same file name in another directory cannot load beside it.
    let err = env
        .host
        .load(Path::new("elsewhere/victim.wasm"), guest_bytes("probe"))
        .await
        .expect_err("a second victim.wasm is refused");
    assert!(matches!(err, PluginError::DuplicateKey { .. }), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("elsewhere/victim.wasm") && message.contains("from victim.wasm"),
        "{message}"
    );
    assert_eq!(env.host.plugins().len(), 2);
    env.host.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_answering_more_than_the_plugin_can_take_is_an_error_value_not_a_fault() {
    let small = PluginPolicy {
        limits: Some(Limits {
            memory: 8 << 20,
            ..Limits::default()
        }),
        ..probe("big-answer", json!({}))
    };
    let env = Env::new(vec![("big", small)]).await;
    // 10 objects of 900 KB: more than the plugin's whole 8 MiB memory.
    let blob = "x".repeat(900 << 10);
    for i in 0..10 {
        env.create(
            &format!("blob-{i}"),
            &[("size", "big")],
            json!({"blob": blob}),
        )
        .await;
    }
    env.load("big.wasm").await;
    ask(
        &env,
        "q-list",
        json!({"op": "list", "namespace": "default"}),
    )
    .await;
    ask(
        &env,
        "q-index",
        json!({"op": "by-index", "index": "namespace", "value": "default"}),
    )
    .await;
    ask(
        &env,
        "q-small",
        json!({"op": "list", "namespace": "default", "selector": "probe-query"}),
    )
    .await;
    let answers = || guest_logs().lines_starting("big-answer", "ANSWER");
    assert!(
        wait_until(PATIENCE, || answers().len() == 3).await,
        "{:?}",
        answers()
    );
    let answers = answers();
    for answer in &answers[..2] {
        assert!(
            answer.contains("err invalid answer too large") && answer.contains("memory cap"),
            "{answer}"
        );
    }
    assert!(
        answers[2].starts_with("ANSWER q-small ok "),
        "{}",
        answers[2]
    );
    let status = env.status("big-answer");
    assert_eq!(status.memory_faults + status.traps, 0, "{status:?}");
    env.host.shutdown(Duration::from_secs(5)).await;
}
