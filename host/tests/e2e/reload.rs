//! Hot reload end to end: a plugins directory watched by the reloader, driving a real plugin host
//! over shared informers against the dev API server. The server's request log proves that no
//! reload makes a new LIST or WATCH for resources whose informers were already running.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm::app::HostLoader;
use kubewasm::reload::{Action, ReloadEvent, Reloader};
use kubewasm_devserver::{DevServer, Verb};
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{HostOptions, PluginHost, PluginPolicy};
use kubewasm_tests::{
    guest_bytes, probe_events as events, variant, wait_probe_event as wait_event, wait_until,
    write_settled,
};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fixture::{DevRig, config_map, create, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

struct Env {
    server: DevServer,
    informers: SharedInformerFactory,
    host: PluginHost,
    config_maps: Api<ConfigMap>,
    dir: tempfile::TempDir,
    staging: tempfile::TempDir,
    reports: mpsc::UnboundedReceiver<ReloadEvent>,
    cancel: CancellationToken,
    watcher: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Env {
    /// Every (re)load of a file is initialised as the probe named `{stem}-v{N}`, N counting the
    /// policy lookups, subscribed to ConfigMaps in `default`: each version has its own name
    /// (a 0.2 `reconciler-v0-2` gets the same name and namespace).
    async fn new() -> Env {
        Env::with_grace(Duration::ZERO, None).await
    }

    /// As [`Env::new`], with the informer grace period and optionally a label selector on the
    /// probe's subscription (so that its informer is not shared with anything else).
    async fn with_grace(informer_grace: Duration, selector: Option<&'static str>) -> Env {
        let versions = Arc::new(AtomicUsize::new(0));
        let policy = move |path: &Path| {
            let n = versions.fetch_add(1, Ordering::SeqCst) + 1;
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            // `namespace` is for 0.2 test guests (`reconciler-v0-2`), which take their
            // ConfigMaps' namespace from it: the probe's subscription and theirs share one
            // informer.
            let config = json!({
                "name": format!("{stem}-v{n}"),
                "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap",
                                   "namespace": "default", "labelSelector": selector}],
                "namespace": "default",
            });
            PluginPolicy {
                config: config.to_string(),
                ..PluginPolicy::default()
            }
        };
        let rig = DevRig::start(HostOptions {
            informer_grace,
            ..policy_by_file(policy)
        })
        .await;
        let (server, informers, host) = (rig.server, rig.factory, rig.host);
        let dir = tempfile::tempdir().expect("plugins dir");
        let reloader = Reloader::new(
            dir.path().to_path_buf(),
            HostLoader(host.clone()),
            Duration::from_millis(50),
        );
        let (tx, reports) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let watcher = tokio::spawn(reloader.run(cancel.clone(), move |event, _| {
            let _ = tx.send(event.clone());
        }));
        Env {
            server,
            informers,
            host,
            config_maps: Api::namespaced(rig.client, "default"),
            dir,
            staging: tempfile::tempdir().expect("staging dir"),
            reports,
            cancel,
            watcher,
        }
    }

    /// Writes `bytes` beside the plugins dir and renames it into place, as an installer would:
    /// the file appears complete.
    fn install(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let staged = self.staging.path().join(name);
        write_settled(&staged, bytes);
        let target = self.dir.path().join(name);
        std::fs::rename(&staged, &target).expect("rename into the plugins dir");
        target
    }

    async fn next_report(&mut self) -> ReloadEvent {
        tokio::time::timeout(PATIENCE, self.reports.recv())
            .await
            .expect("the reloader reacted to the change")
            .expect("the reloader is running")
    }

    /// The name of the only plugin loaded.
    fn running(&self) -> String {
        let plugins = self.host.plugins();
        assert_eq!(plugins.len(), 1, "{plugins:?}");
        plugins[0].name.clone()
    }

    async fn create(&self, name: &str) -> String {
        create(&self.config_maps, &config_map(name, &[], &[])).await
    }

    /// LIST and WATCH requests for ConfigMaps the server has seen since the log was cleared.
    fn config_map_list_watches(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| matches!(r.verb, Verb::List | Verb::Watch) && r.resource == "configmaps")
            .count()
    }

    /// Waits until the ConfigMap informer's WATCH has reached the server, then clears the
    /// request log: a plugin hears of the LIST's objects before its informer sends the WATCH,
    /// and a log cleared in between would hold that first WATCH.
    async fn clear_requests_once_watching(&self) {
        let watching = wait_until(PATIENCE, || {
            self.server
                .requests()
                .iter()
                .any(|r| matches!(r.verb, Verb::Watch) && r.resource == "configmaps")
        })
        .await;
        assert!(watching, "the ConfigMap informer never watched");
        self.server.clear_requests();
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.watcher
            .await
            .expect("watcher task")
            .expect("watcher ran");
        self.host.shutdown(Duration::from_secs(5)).await;
    }
}

/// Creates ConfigMaps `{prefix}0`, `{prefix}1`, ... one after another until stopped.
struct Writer {
    writing: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Writer {
    fn start(api: &Api<ConfigMap>, prefix: &'static str, pause: Duration) -> Writer {
        let writing = Arc::new(AtomicBool::new(true));
        let (api, flag) = (api.clone(), writing.clone());
        let task = tokio::spawn(async move {
            let mut names = Vec::new();
            while flag.load(Ordering::Acquire) {
                let name = format!("{prefix}{}", names.len());
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..ObjectMeta::default()
                    },
                    ..ConfigMap::default()
                };
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create while reloading");
                names.push(name);
                tokio::time::sleep(pause).await;
            }
            names
        });
        Writer { writing, task }
    }

    /// Stops writing; the names of every ConfigMap created.
    async fn stop(self) -> BTreeSet<String> {
        self.writing.store(false, Ordering::Release);
        let names = self.task.await.expect("writer task");
        assert!(!names.is_empty(), "the writer created nothing");
        names.into_iter().collect()
    }
}

/// The ConfigMap names `plugin` has heard of through adds (replayed or live).
fn added(plugin: &str) -> BTreeSet<String> {
    events(plugin)
        .iter()
        .filter_map(|e| e.strip_prefix("EVENT add default/"))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_change_break_fix_delete_keeps_the_informer_warm() {
    let mut env = Env::new().await;
    let probe = guest_bytes("probe");
    let rv1 = env.create("a1").await;

    // Drop in.
    env.install("hot.wasm", &probe);
    let report = env.next_report().await;
    assert_eq!(report.action, Action::Load);
    assert_eq!(report.result, Ok(()));
    let v1 = env.running();
    wait_event(&v1, &format!("EVENT add default/a1 rv={rv1} flag=true")).await;
    env.clear_requests_once_watching().await;

    // Change, while a writer keeps creating objects: the new version is replayed the cache,
    // then hears of everything created during and after the swap.
    let writer = Writer::start(&env.config_maps, "w", Duration::from_millis(5));
    env.install("hot.wasm", &variant(&probe, 2));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    let v2 = env.running();
    assert_ne!(v1, v2);
    wait_event(&v2, &format!("EVENT add default/a1 rv={rv1} flag=true")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let written = writer.stop().await;
    let rv2 = env.create("a2").await;
    wait_event(&v2, &format!("EVENT add default/a2 rv={rv2} flag=false")).await;
    let seen = added(&v2);
    let lost: Vec<_> = written.difference(&seen).collect();
    assert!(lost.is_empty(), "the new version never heard of {lost:?}");
    assert!(
        !added(&v1).contains("a2"),
        "the old version still received events"
    );

    // Break it twice: garbage, then a component of another world. The old version keeps running.
    env.install("hot.wasm", b"\0asm garbage");
    let report = env.next_report().await;
    assert_eq!(report.action, Action::Replace);
    let reason = report.result.expect_err("garbage is refused");
    assert!(reason.contains("hot.wasm"), "{reason}");
    env.install("hot.wasm", &guest_bytes("other-world"));
    let report = env.next_report().await;
    let reason = report.result.expect_err("another world is refused");
    assert!(reason.contains("hot.wasm"), "{reason}");
    assert_eq!(env.running(), v2);
    let rv3 = env.create("a3").await;
    wait_event(&v2, &format!("EVENT add default/a3 rv={rv3} flag=false")).await;

    // Fix it.
    env.install("hot.wasm", &variant(&probe, 3));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    let v3 = env.running();
    wait_event(&v3, &format!("EVENT add default/a3 rv={rv3} flag=true")).await;
    let rv4 = env.create("a4").await;
    wait_event(&v3, &format!("EVENT add default/a4 rv={rv4} flag=false")).await;
    assert!(!added(&v2).contains("a4"));

    assert_eq!(
        env.config_map_list_watches(),
        0,
        "a reload listed or watched ConfigMaps again: {:?}",
        env.server.requests()
    );

    // Delete it.
    std::fs::remove_file(env.dir.path().join("hot.wasm")).expect("delete plugin file");
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Unload, Ok(())));
    assert!(env.host.plugins().is_empty());
    let rv5 = env.create("a5").await;
    // Nothing runs any more to hear of a5; the last version must not have.
    tokio::task::yield_now().await;
    assert!(!events(&v3).iter().any(|e| e.contains(&rv5)));
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configmap_volume_symlink_swap_and_mv_reload() {
    let mut env = Env::new().await;
    let probe = guest_bytes("probe");
    let rv1 = env.create("s1").await;
    let dir = env.dir.path().to_path_buf();

    // The layout the kubelet gives a ConfigMap volume: vol.wasm -> ..data/vol.wasm, ..data -> ..v1
    for (version, bytes) in [("..v1", probe.clone()), ("..v2", variant(&probe, 2))] {
        std::fs::create_dir(dir.join(version)).expect("version dir");
        write_settled(&dir.join(version).join("vol.wasm"), &bytes);
    }
    std::os::unix::fs::symlink("..v1", dir.join("..data")).expect("..data link");
    std::os::unix::fs::symlink("..data/vol.wasm", dir.join("vol.wasm")).expect("file link");
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Load, Ok(())));
    let v1 = env.running();
    wait_event(&v1, &format!("EVENT add default/s1 rv={rv1} flag=true")).await;

    // The kubelet's atomic swap: a new link renamed over `..data`.
    std::os::unix::fs::symlink("..v2", dir.join("..data_tmp")).expect("new link");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("swap");
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    let v2 = env.running();
    assert_ne!(v1, v2);
    wait_event(&v2, &format!("EVENT add default/s1 rv={rv1} flag=true")).await;

    // A finished file moved in beside it is a second plugin.
    env.install("moved.wasm", &probe);
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Load, Ok(())));
    assert_eq!(env.host.plugins().len(), 2);
    env.stop().await;
}

/// Sockets this process has open. The dev server and the kube client run in the test's own
/// runtime, and each TCP connection between them is a socket and a task on either side: the
/// client's pool opens one more whenever a request finds its connections busy (a reload's
/// requests beside the writer's) and keeps it idle for longer than any wait here.
fn open_sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(Result::ok)
        .filter(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .count()
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_reloads_under_writes_lose_nothing_and_leak_nothing() {
    let mut env = Env::new().await;
    let probe = guest_bytes("probe");
    env.install("many.wasm", &probe);
    let report = env.next_report().await;
    assert_eq!(report.result, Ok(()));
    // Warm up: one reload so that lazily built state exists before the baseline is taken.
    env.install("many.wasm", &variant(&probe, 1));
    assert_eq!(env.next_report().await.result, Ok(()));
    let runtime = tokio::runtime::Handle::current();
    let metrics = runtime.metrics();
    let tasks_before = metrics.num_alive_tasks();
    let sockets_before = open_sockets();
    let rss_before = rss_bytes();
    env.clear_requests_once_watching().await;

    let writer = Writer::start(&env.config_maps, "m", Duration::from_millis(2));
    for n in 2..52 {
        env.install("many.wasm", &variant(&probe, n));
        let report = env.next_report().await;
        assert_eq!(
            (report.action, report.result),
            (Action::Replace, Ok(())),
            "reload {n}"
        );
    }
    let written = writer.stop().await;
    let last = env.running();
    let rv = env.create("final").await;
    wait_event(
        &last,
        &format!("EVENT add default/final rv={rv} flag=false"),
    )
    .await;
    let seen = added(&last);
    let lost: Vec<_> = written.difference(&seen).collect();
    assert!(lost.is_empty(), "the last version never heard of {lost:?}");
    assert_eq!(
        env.config_map_list_watches(),
        0,
        "{:?}",
        env.server.requests()
    );

    // Old instances and their tasks are gone once their actors stop. A connection the client's
    // pool opened meanwhile is a task on either side of it, and a socket on either side.
    let unexplained = || {
        let connections = open_sockets().saturating_sub(sockets_before);
        metrics.num_alive_tasks().saturating_sub(connections)
    };
    let settled = wait_until(PATIENCE, || unexplained() <= tasks_before + 2).await;
    assert!(
        settled,
        "tasks went from {tasks_before} to {} over 50 reloads ({} sockets before, {} after)",
        metrics.num_alive_tasks(),
        sockets_before,
        open_sockets()
    );
    let grown = rss_bytes().saturating_sub(rss_before);
    assert!(
        grown < 64 << 20,
        "RSS grew by {} MiB over 50 reloads",
        grown >> 20
    );
    env.stop().await;
}

/// Discovery is asked once per kind, not once per plugin: a host loading a thousand plugins
/// asked the API server for `/api/v1` thousands of times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_of_one_kind_discover_it_once_whatever_their_number_and_reloads() {
    let mut env = Env::new().await;
    let probe = guest_bytes("probe");
    let before = env.server.resource_list_requests();
    let started = std::time::Instant::now();
    for n in 0..10 {
        env.install(&format!("p{n}.wasm"), &probe);
        let report = env.next_report().await;
        assert_eq!(
            (report.action, report.result),
            (Action::Load, Ok(())),
            "p{n}"
        );
    }
    env.install("p0.wasm", &variant(&probe, 1));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    assert_eq!(env.host.plugins().len(), 10);
    // An answer is kept for `MAX_AGE`: a slow machine may have needed one more look.
    let ages = started.elapsed().as_secs() / kubewasm_informer::KindResolver::MAX_AGE.as_secs();
    let lists = env.server.resource_list_requests() - before;
    assert!(
        (1..=1 + ages as usize).contains(&lists),
        "ten plugins subscribed to ConfigMaps and one was replaced: {lists} looks at /api/v1"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_informer_keeps_its_cache_for_the_grace_period_then_stops() {
    let mut env = Env::with_grace(Duration::from_secs(2), Some("tier=grace")).await;
    let probe = guest_bytes("probe");
    let running = |env: &Env| {
        env.informers
            .informers()
            .iter()
            .any(|(k, _)| k.label_selector.as_deref() == Some("tier=grace"))
    };
    env.install("g.wasm", &probe);
    assert_eq!(env.next_report().await.result, Ok(()));
    let synced = wait_until(PATIENCE, || {
        env.informers
            .informers()
            .iter()
            .any(|(k, i)| k.label_selector.as_deref() == Some("tier=grace") && i.has_synced())
    })
    .await;
    assert!(synced, "the informer never synced");
    env.clear_requests_once_watching().await;

    // Deleted and dropped in again within the grace period: the cache is still there.
    std::fs::remove_file(env.dir.path().join("g.wasm")).expect("delete");
    assert_eq!(env.next_report().await.action, Action::Unload);
    assert!(running(&env), "stopped before the grace period ended");
    env.install("g.wasm", &probe);
    assert_eq!(env.next_report().await.result, Ok(()));
    assert_eq!(
        env.config_map_list_watches(),
        0,
        "{:?}",
        env.server.requests()
    );

    // Deleted for good: stopped once the grace period is over.
    std::fs::remove_file(env.dir.path().join("g.wasm")).expect("delete");
    assert_eq!(env.next_report().await.action, Action::Unload);
    let stopped = wait_until(PATIENCE, || !running(&env)).await;
    assert!(stopped, "the unused informer was never stopped");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_file_changes_contract_version_by_hot_reload_without_a_list() {
    let mut env = Env::new().await;
    let mut created = Vec::new();
    for i in 0..3 {
        created.push(env.create(&format!("c{i}")).await);
    }
    let probe = guest_bytes("probe");
    env.install("shift.wasm", &probe);
    assert_eq!(env.next_report().await.result, Ok(()));
    let v1 = env.running();
    wait_event(
        &v1,
        &format!("EVENT add default/c0 rv={} flag=true", created[0]),
    )
    .await;
    let id = env.host.plugins()[0].id;
    env.clear_requests_once_watching().await;
    let host = env.host.clone();
    let status = || host.plugins().into_iter().next().expect("one plugin");

    // 0.1 -> 0.2: the same plugin, now a reconciler with a workqueue the replay filled.
    env.install("shift.wasm", &guest_bytes("reconciler-v0-2"));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    assert!(
        wait_until(PATIENCE, || status().reconciles >= 3).await,
        "{:?}",
        status()
    );
    let s = status();
    assert_eq!(s.id, id);
    assert!(s.workqueue.is_some(), "{s:?}");

    // 0.2 -> 0.2 keeps the queue and what it counted.
    let before = status().reconciles;
    env.install("shift.wasm", &variant(&guest_bytes("reconciler-v0-2"), 2));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    assert!(
        wait_until(PATIENCE, || status().reconciles >= before + 3).await,
        "the new version took over the old context: {:?}",
        status()
    );

    // 0.2 -> 0.1: a probe again, replayed the cache, then live events; no workqueue.
    env.install("shift.wasm", &variant(&probe, 3));
    let report = env.next_report().await;
    assert_eq!((report.action, report.result), (Action::Replace, Ok(())));
    let v4 = env.running();
    assert_ne!(v4, v1);
    wait_event(
        &v4,
        &format!("EVENT add default/c2 rv={} flag=true", created[2]),
    )
    .await;
    let rv = env.create("late").await;
    wait_event(&v4, &format!("EVENT add default/late rv={rv} flag=false")).await;
    let s = status();
    assert_eq!(s.id, id);
    assert!(s.workqueue.is_none(), "{s:?}");
    assert_eq!(s.reconciles, 0, "{s:?}");

    assert_eq!(
        env.config_map_list_watches(),
        0,
        "a contract change listed or watched ConfigMaps again: {:?}",
        env.server.requests()
    );
    env.stop().await;
}
