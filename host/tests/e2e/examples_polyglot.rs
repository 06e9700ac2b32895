//! The C, Go, Python and JavaScript example guests (`examples-guests/{c,go,python,js}/`), as
//! built by `cargo xtask build-guests` into `target/plugins/`: the C one compiles cold and loads
//! from the compile cache, and all four, run as plugins over the shared informers against the
//! development API server, log the same line for every ConfigMap event: the ConfigMaps
//! in its namespace and those sharing its `app` label, counted from the events (O(1) per event).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kubewasm_devserver::DevServer;
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{HostOptions, PluginHost};
use kubewasm_tests::{GuestLogs, guest_path, wait_until};
use serde_json::json;

use crate::fixture::{self, DevRig, namespace};

/// The four examples, by component name; all implement the same controller.
const EXAMPLES: [&str; 4] = [
    "configmap-counter-c",
    "configmap-counter-go",
    "configmap-counter-python",
    "configmap-counter-js",
];

/// The component `name` (see [`kubewasm_tests::guest_path`]), with its bytes.
fn example(name: &str) -> (PathBuf, Vec<u8>) {
    let path = guest_path(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"));
    (path, bytes)
}

/// A cold compile (no compile cache) and a load from the cache, on the small C component only:
/// the Python and JavaScript components take about 30 s each to compile cold on a loaded
/// machine, and their compile times are measured by the `controller_languages` benchmark. Every
/// example still compiles and links against the host in the tests below, through the shared
/// compile cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_c_example_compiles_cold_then_loads_from_the_compile_cache() {
    let name = "configmap-counter-c";
    let (path, bytes) = example(name);
    crate::fixture::compiles_then_loads_from_the_cache(vec![(name.to_owned(), path, bytes)]).await;
}

/// How long any one expectation may take to come true; only bounds a wait (the Python and
/// JavaScript components take many seconds to compile in a debug build).
const PATIENCE: Duration = Duration::from_secs(30);

/// A development API server with the four examples loaded as plugins of one host, with the
/// default limits (`kubewasm dev` runs them with those too).
struct Rig {
    server: DevServer,
    host: PluginHost,
    factory: SharedInformerFactory,
    logs: Arc<GuestLogs>,
}

impl Rig {
    /// Starts the server, lets `seed` prepare it, then loads the four examples (compiled in
    /// parallel) and waits until each has handled its replay of the cache.
    async fn start(seed: impl FnOnce(&DevServer)) -> Rig {
        let DevRig {
            server,
            factory,
            host,
            logs,
            ..
        } = DevRig::start(HostOptions {
            // Compiled code is keyed by content hash: sharing it between runs only saves time.
            cache_dir: fixture::shared_compile_cache(),
            ..HostOptions::default()
        })
        .await;
        // Before any load: the informers the examples subscribe to list what is seeded here.
        seed(&server);
        let loads = EXAMPLES.map(|name| {
            let host = host.clone();
            tokio::spawn(async move {
                let (path, bytes) = example(name);
                host.load(&path, bytes)
                    .await
                    .unwrap_or_else(|e| panic!("loading {name}: {e}"));
            })
        });
        for load in loads {
            load.await.expect("load task");
        }
        assert!(
            wait_until(PATIENCE, || host.ready()).await,
            "the examples never finished their replay: {:?}",
            host.plugins()
        );
        Rig {
            server,
            host,
            factory,
            logs,
        }
    }

    /// Waits until every example has logged exactly `line`.
    async fn expect_everywhere(&self, line: &str) {
        for name in EXAMPLES {
            let seen =
                wait_until(PATIENCE, || self.logs.lines(name).iter().any(|l| l == line)).await;
            assert!(
                seen,
                "{name} never logged {line:?}; it logged {:#?}; host: {:#?}; status: {:?}",
                self.logs.lines(name),
                self.logs.host_lines(name),
                self.host.plugins()
            );
        }
    }

    /// Fails if any example was restarted after a fault or reported a handler error.
    fn assert_no_faults(&self) {
        for status in self.host.plugins() {
            assert_eq!(
                (
                    status.errors,
                    status.traps,
                    status.timeouts,
                    status.memory_faults,
                    status.restarts
                ),
                (0, 0, 0, 0, 0),
                "{} (errors, traps, timeouts, memory faults, restarts); last error: {:?}",
                status.name,
                status.last_error
            );
        }
    }

    async fn stop(self) {
        self.host.shutdown(Duration::from_secs(5)).await;
        self.factory.shutdown().await;
        self.server.shutdown().await;
    }
}

fn config_map(name: &str, app: Option<&str>) -> ConfigMap {
    let labels: Vec<(&str, &str)> = app.map(|app| ("app", app)).into_iter().collect();
    fixture::config_map(name, &labels, &[("greeting", "hello")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_polyglot_example_logs_the_same_counts_for_each_configmap_event() {
    let rig = Rig::start(|server| {
        for ns in ["team-a", "team-b"] {
            server.create(namespace(ns)).expect("creating a namespace");
        }
        server
            .create(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "seed", "namespace": "team-a", "labels": {"app": "web"}}
            }))
            .expect("creating the seed ConfigMap");
    })
    .await;
    // The replay of the initial list.
    rig.expect_everywhere("event=add ns=team-a name=seed ns_count=1 app=web app_peers=1")
        .await;

    let client = rig.server.client();
    let team_a: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let team_b: Api<ConfigMap> = Api::namespaced(client, "team-b");
    let create = PostParams::default();

    // Each step waits for all four before the next change, so every answer is exact.
    team_a
        .create(&create, &config_map("web-2", Some("web")))
        .await
        .expect("create");
    rig.expect_everywhere("event=add ns=team-a name=web-2 ns_count=2 app=web app_peers=2")
        .await;
    // The label count spans namespaces; the namespace count does not.
    team_b
        .create(&create, &config_map("web-3", Some("web")))
        .await
        .expect("create");
    rig.expect_everywhere("event=add ns=team-b name=web-3 ns_count=1 app=web app_peers=3")
        .await;
    team_b
        .create(&create, &config_map("db", Some("db")))
        .await
        .expect("create");
    rig.expect_everywhere("event=add ns=team-b name=db ns_count=2 app=db app_peers=1")
        .await;
    team_a
        .create(&create, &config_map("plain", None))
        .await
        .expect("create");
    rig.expect_everywhere("event=add ns=team-a name=plain ns_count=3 app=- app_peers=0")
        .await;

    // Labelling moves the object into the `web` count (the update carries the old state too).
    let label = json!({"metadata": {"labels": {"app": "web"}}});
    team_a
        .patch("plain", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("labelling");
    rig.expect_everywhere("event=update ns=team-a name=plain ns_count=3 app=web app_peers=4")
        .await;

    // After a delete the counts no longer include the object.
    team_a
        .delete("web-2", &DeleteParams::default())
        .await
        .expect("deleting");
    rig.expect_everywhere("event=delete ns=team-a name=web-2 ns_count=2 app=web app_peers=3")
        .await;

    for name in EXAMPLES {
        // The log record is shared by every test of this process: keep this test's namespaces.
        let lines: Vec<String> = rig
            .logs
            .lines_starting(name, "event=")
            .into_iter()
            .filter(|line| line.contains(" ns=team-"))
            .collect();
        assert_eq!(
            lines.len(),
            7,
            "{name} logged one line per event: {lines:#?}"
        );
    }
    rig.assert_no_faults();
    rig.stop().await;
}

/// Hundreds of events on large objects (32 KiB each, old and new state copied in and parsed on
/// every update) make each guest allocate over ten MiB during the test: the Go example's garbage
/// collector must run (between calls, never inside `cabi_realloc`) and no example may trap, time
/// out or run out of memory; the counts stay exact across the replay and every update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_polyglot_example_handles_hundreds_of_events_without_faults() {
    const OBJECTS: usize = 40;
    const UPDATES: usize = 200;
    const PAYLOAD: usize = 32 * 1024;
    let rig = Rig::start(|server| {
        server
            .create(namespace("busy"))
            .expect("creating a namespace");
        for i in 0..OBJECTS {
            server
                .create(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i}"), "namespace": "busy",
                                 "labels": {"app": "busy"}},
                    "data": {"payload": "x".repeat(PAYLOAD)}
                }))
                .expect("creating a ConfigMap");
        }
    })
    .await;

    let config_maps: Api<ConfigMap> = Api::namespaced(rig.server.client(), "busy");
    for i in 0..UPDATES {
        let change = json!({"data": {"payload": "y".repeat(PAYLOAD), "round": i.to_string()}});
        config_maps
            .patch(
                &format!("cm-{}", i % OBJECTS),
                &PatchParams::default(),
                &Patch::Merge(&change),
            )
            .await
            .expect("patching");
    }
    for name in EXAMPLES {
        let updates = || rig.logs.lines_starting(name, "event=update ns=busy").len();
        let done = wait_until(PATIENCE, || updates() >= UPDATES).await;
        assert!(
            done,
            "{name} handled {} of {UPDATES} updates; host: {:#?}; status: {:?}",
            updates(),
            rig.logs.host_lines(name),
            rig.host.plugins()
        );
        let expected = format!("ns_count={OBJECTS} app=busy app_peers={OBJECTS}");
        let lines = rig.logs.lines_starting(name, "event=update ns=busy");
        assert_eq!(lines.len(), UPDATES, "{name} handled each update once");
        assert!(
            lines.iter().all(|line| line.ends_with(&expected)),
            "{name} counted every object of the replay, once: {lines:#?}"
        );
    }
    rig.assert_no_faults();
    rig.stop().await;
}
