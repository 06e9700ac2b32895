//! The Rust example guests (`examples-guests/rust/`), built from source for wasm32-wasip2: each
//! loads into the host's engine, and run as a plugin over the shared informers against the
//! development API server it does what its README says (asserted on its log lines).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kubewasm_devserver::DevServer;
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{HostOptions, PluginHost, PluginPolicy, StaticPolicy};
use kubewasm_tests::{GuestLogs, guest_path, wait_until, workspace_root};
use serde_json::{Value, json};

use crate::fixture::{DevRig, namespace};

/// The Rust examples, by package (= component) name.
const EXAMPLES: [&str; 3] = ["pod-diff", "ready-pods", "custom-resource-log"];

/// The config string `cargo xtask dev` gives custom-resource-log (examples/kubewasm-dev.toml).
const BACKUP_KIND: &str = "demo.kubewasm.io/v1/Backup";

/// How long any one expectation may take to come true; only bounds a wait.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rust_example_compiles_and_loads_from_the_compile_cache() {
    let examples = EXAMPLES
        .iter()
        .map(|name| {
            let path = guest_path(name);
            let bytes = std::fs::read(&path).expect("reading the built guest");
            (name.to_string(), path, bytes)
        })
        .collect();
    crate::fixture::compiles_then_loads_from_the_cache(examples).await;
}

/// A development API server with a plugin host over it, and the guest log record.
struct Rig {
    server: DevServer,
    host: PluginHost,
    factory: SharedInformerFactory,
    logs: Arc<GuestLogs>,
}

impl Rig {
    async fn start() -> Rig {
        Rig::with_options(HostOptions::default()).await
    }

    async fn with_options(options: HostOptions) -> Rig {
        let DevRig {
            server,
            factory,
            host,
            logs,
            ..
        } = DevRig::start(options).await;
        Rig {
            server,
            host,
            factory,
            logs,
        }
    }

    /// Creates `object` in-process; returns it as stored (with its uid).
    fn create(&self, object: Value) -> Value {
        self.server
            .create(object.clone())
            .unwrap_or_else(|e| panic!("creating {object}: {e:?}"))
    }

    /// Builds and loads the Rust example `name`, then waits until it has handled its replay.
    async fn load(&self, name: &str) {
        let path: PathBuf = guest_path(name);
        let bytes = std::fs::read(&path).expect("reading the built guest");
        self.host
            .load(&path, bytes)
            .await
            .unwrap_or_else(|e| panic!("loading {name}: {e}"));
        assert!(
            wait_until(PATIENCE, || self.host.ready()).await,
            "{name} never finished its replay: {:?}",
            self.host.plugins()
        );
    }

    /// Waits until `plugin` has logged exactly `line`.
    async fn expect_line(&self, plugin: &str, line: &str) {
        let seen = wait_until(PATIENCE, || {
            self.logs.lines(plugin).iter().any(|l| l == line)
        })
        .await;
        assert!(
            seen,
            "{plugin} never logged {line:?}; it logged {:#?}; host: {:#?}; status: {:?}",
            self.logs.lines(plugin),
            self.logs.host_lines(plugin),
            self.host.plugins()
        );
    }

    /// Patches an annotation on `name` about once a second until `plugin` has logged exactly
    /// `line`: for answers that depend on another informer having caught up.
    async fn touch_until<K>(&self, api: &Api<K>, name: &str, plugin: &str, line: &str)
    where
        K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let deadline = Instant::now() + PATIENCE;
        for touch in 0.. {
            let patch =
                json!({"metadata": {"annotations": {"kubewasm.test/touch": touch.to_string()}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("touching {name}: {e}"));
            let seen = wait_until(Duration::from_secs(1), || {
                self.logs.lines(plugin).iter().any(|l| l == line)
            })
            .await;
            if seen {
                return;
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        panic!(
            "{plugin} never logged {line:?}; it logged {:#?}; host: {:#?}; status: {:?}",
            self.logs.lines(plugin),
            self.logs.host_lines(plugin),
            self.host.plugins()
        );
    }

    async fn stop(self) {
        self.host.shutdown(Duration::from_secs(5)).await;
        self.factory.shutdown().await;
        self.server.shutdown().await;
    }
}

fn uid(object: &Value) -> String {
    object["metadata"]["uid"]
        .as_str()
        .expect("stored objects have a uid")
        .to_owned()
}

fn owner(kind: &str, object: &Value) -> Value {
    json!([{
        "apiVersion": "apps/v1", "kind": kind, "name": object["metadata"]["name"],
        "uid": uid(object), "controller": true
    }])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_diff_logs_one_line_per_change_naming_each_field() {
    let rig = Rig::start().await;
    rig.create(namespace("diffs"));
    rig.create(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "diffs"},
        "data": {"color": "red", "size": "L"}
    }));
    rig.load("pod-diff").await;
    rig.expect_line("pod-diff", "ConfigMap diffs/app added (initial list)")
        .await;

    let client = rig.server.client();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "diffs");
    let change = json!({"data": {"color": "blue", "size": null, "shape": "round"}});
    config_maps
        .patch("app", &PatchParams::default(), &Patch::Merge(&change))
        .await
        .expect("patching the ConfigMap");
    rig.expect_line(
        "pod-diff",
        r#"ConfigMap diffs/app changed: data.color: "red" -> "blue"; -data.size; +data.shape="round""#,
    )
    .await;

    let pods: Api<Pod> = Api::namespaced(client, "diffs");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}
    }))
    .expect("pod");
    pods.create(&Default::default(), &pod)
        .await
        .expect("creating the pod");
    rig.expect_line("pod-diff", "Pod diffs/web-0 added").await;
    let relabel = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
    pods.patch("web-0", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("labelling the pod");
    rig.expect_line(
        "pod-diff",
        r#"Pod diffs/web-0 changed: +metadata.labels.tier="front""#,
    )
    .await;

    config_maps
        .delete("app", &DeleteParams::default())
        .await
        .expect("deleting the ConfigMap");
    rig.expect_line("pod-diff", "ConfigMap diffs/app deleted")
        .await;

    // Nothing but real changes was logged: one line per event above, no resync noise. (Other
    // tests in this process may run pod-diff too, on other namespaces.)
    let lines: Vec<_> = rig
        .logs
        .lines("pod-diff")
        .into_iter()
        .filter(|line| line.contains(" diffs/"))
        .collect();
    assert_eq!(lines.len(), 5, "{lines:#?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_pods_counts_ready_pods_through_the_owner_index() {
    let rig = Rig::start().await;
    rig.create(namespace("shop"));
    let deployment = rig.create(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    }));
    let replica_set = rig.create(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d8f7", "namespace": "shop",
                     "ownerReferences": owner("Deployment", &deployment)},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}
    }));
    for name in ["web-5d8f7-a", "web-5d8f7-b", "web-5d8f7-c"] {
        rig.create(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"},
                         "ownerReferences": owner("ReplicaSet", &replica_set)},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}
        }));
    }
    // A pod of another owner, which must never be counted.
    rig.create(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "loner", "namespace": "shop"},
        "spec": {"containers": [{"name": "sh", "image": "busybox"}]}
    }));
    let client = rig.server.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
    let set_ready = |ready: bool| {
        let status = if ready { "True" } else { "False" };
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}})
    };
    for (name, ready) in [
        ("web-5d8f7-a", true),
        ("web-5d8f7-b", true),
        ("web-5d8f7-c", false),
        ("loner", true),
    ] {
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&set_ready(ready)),
        )
        .await
        .expect("setting pod status");
    }

    rig.load("ready-pods").await;
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "shop");
    let deployments: Api<Deployment> = Api::namespaced(client, "shop");
    // The replay may reach the guest before the pod informer has synced, and pods are
    // cache-only (no event reaches the guest): the owners are touched until a report reads
    // the cache as it is now.
    rig.touch_until(
        &replica_sets,
        "web-5d8f7",
        "ready-pods",
        "ReplicaSet shop/web-5d8f7: 2/3 pods ready (want 3)",
    )
    .await;
    rig.touch_until(
        &deployments,
        "web",
        "ready-pods",
        "Deployment shop/web: 2/3 pods ready across 1 ReplicaSet(s) (want 3)",
    )
    .await;

    pods.patch_status(
        "web-5d8f7-c",
        &PatchParams::default(),
        &Patch::Merge(&set_ready(true)),
    )
    .await
    .expect("making the third pod ready");
    rig.touch_until(
        &replica_sets,
        "web-5d8f7",
        "ready-pods",
        "ReplicaSet shop/web-5d8f7: 3/3 pods ready (want 3)",
    )
    .await;

    replica_sets
        .delete("web-5d8f7", &DeleteParams::default())
        .await
        .expect("deleting the ReplicaSet");
    rig.expect_line("ready-pods", "ReplicaSet shop/web-5d8f7 deleted")
        .await;
    // A report that read a cache still syncing says so; every other one counted all three pods.
    for line in rig.logs.lines("ready-pods") {
        if line.contains(" pods ready ") && !line.ends_with("(cache not synced yet)") {
            assert!(
                line.contains("/3 pods ready"),
                "a partial count passed as final: {line}"
            );
        }
    }
    let status = &rig.host.plugins()[0];
    assert_eq!(status.name, "ready-pods");
    assert_eq!(status.errors, 0, "handler errors: {:?}", status.last_error);
    assert_eq!(status.traps, 0);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_manifests_seed_what_the_rust_examples_report() {
    let rig = Rig::start().await;
    let created = rig
        .server
        .load_manifests(&workspace_root().join("examples/manifests"))
        .expect("the example manifests load");
    assert_eq!(
        created, 20,
        "2 namespaces and their default ServiceAccounts, 5 ConfigMaps, 1 Deployment, 1 ReplicaSet, 4 pods, 1 CRD, 2 Backups, \
         1 CRD, 1 Foo"
    );
    rig.load("pod-diff").await;
    for line in [
        "ConfigMap shop/web-config added (initial list)",
        "ConfigMap tools/ci-settings added (initial list)",
        "ConfigMap default/plain added (initial list)",
        "Pod shop/web-5d8f7c9b4-2xkqp added (initial list)",
        "Pod tools/debug-shell added (initial list)",
    ] {
        rig.expect_line("pod-diff", line).await;
    }
    // Only the manifests' namespaces: other tests in this process may run pod-diff too.
    let seeded: Vec<_> = rig
        .logs
        .lines("pod-diff")
        .into_iter()
        .filter(|line| {
            [" shop/", " tools/", " default/"]
                .iter()
                .any(|ns| line.contains(ns))
        })
        .collect();
    assert_eq!(
        seeded.len(),
        9,
        "one line per seeded ConfigMap and Pod: {seeded:#?}"
    );
    // Owner uids filled in and pod status kept by the seeding: ready-pods sees 2 of 3 ready.
    rig.load("ready-pods").await;
    rig.expect_line(
        "ready-pods",
        "ReplicaSet shop/web-5d8f7c9b4: 2/3 pods ready (want 3)",
    )
    .await;
    rig.stop().await;
}

/// Loads custom-resource-log with `config` as its config string.
async fn custom_resource_rig(config: &str) -> Rig {
    let policy = PluginPolicy {
        config: config.into(),
        ..PluginPolicy::default()
    };
    Rig::with_options(HostOptions {
        policy: Arc::new(StaticPolicy(policy)),
        ..HostOptions::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_log_watches_the_kind_its_config_names() {
    let rig = custom_resource_rig(BACKUP_KIND).await;
    // The example manifests hold the Backup CRD and two Backups, as in `cargo xtask dev`.
    rig.server
        .load_manifests(&workspace_root().join("examples/manifests"))
        .expect("the example manifests load");
    rig.load("custom-resource-log").await;
    let plugin = "custom-resource-log";
    rig.expect_line(
        plugin,
        "Backup shop/web-config-nightly added (initial list): keep=7 schedule=0 3 * * * \
         target=configmap/web-config; 1 in shop",
    )
    .await;
    rig.expect_line(
        plugin,
        "Backup tools/tools-weekly added (initial list): keep=4 schedule=0 4 * * 0 \
         target=configmap/ci-settings; 1 in tools",
    )
    .await;

    let gvk = GroupVersionKind::gvk("demo.kubewasm.io", "v1", "Backup");
    let backups: Api<DynamicObject> = Api::namespaced_with(
        rig.server.client(),
        "shop",
        &ApiResource::from_gvk_with_plural(&gvk, "backups"),
    );
    let backup: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.kubewasm.io/v1", "kind": "Backup",
        "metadata": {"name": "cart-hourly"},
        "spec": {"target": "configmap/cart-config", "schedule": "0 * * * *", "keep": 24}
    }))
    .expect("a Backup");
    backups
        .create(&Default::default(), &backup)
        .await
        .expect("creating a Backup");
    rig.expect_line(
        plugin,
        "Backup shop/cart-hourly added: keep=24 schedule=0 * * * * target=configmap/cart-config; \
         2 in shop",
    )
    .await;
    // A label is not the spec: nothing to report.
    let label = json!({"metadata": {"labels": {"tier": "gold"}}});
    backups
        .patch(
            "cart-hourly",
            &PatchParams::default(),
            &Patch::Merge(&label),
        )
        .await
        .expect("labelling the Backup");
    let keep = json!({"spec": {"keep": 3}});
    backups
        .patch("cart-hourly", &PatchParams::default(), &Patch::Merge(&keep))
        .await
        .expect("changing the Backup's spec");
    rig.expect_line(
        plugin,
        "Backup shop/cart-hourly changed: keep=3 schedule=0 * * * * target=configmap/cart-config; \
         2 in shop",
    )
    .await;
    backups
        .delete("cart-hourly", &DeleteParams::default())
        .await
        .expect("deleting the Backup");
    rig.expect_line(
        plugin,
        "Backup shop/cart-hourly deleted: keep=3 schedule=0 * * * * target=configmap/cart-config; \
         1 in shop",
    )
    .await;
    let lines: Vec<_> = rig
        .logs
        .lines(plugin)
        .into_iter()
        .filter(|line| line.contains(" shop/cart-hourly "))
        .collect();
    assert_eq!(lines.len(), 3, "added, changed, deleted: {lines:#?}");
    let status = &rig.host.plugins()[0];
    assert_eq!(status.errors, 0, "handler errors: {:?}", status.last_error);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_log_without_a_kind_in_its_config_does_not_load() {
    let rig = custom_resource_rig("").await;
    let path = guest_path("custom-resource-log");
    let bytes = std::fs::read(&path).expect("reading the built guest");
    let err = rig
        .host
        .load(&path, bytes)
        .await
        .expect_err("no kind, no plugin");
    assert!(
        format!("{err:#}").contains("group/version/Kind"),
        "the error says what the config must hold: {err:#}"
    );
    rig.stop().await;
}

/// The SDK itself against the real host: the test guest `sdk-probe` (in `guest-sdk/probe/`)
/// runs every typed cache helper on each ConfigMap event and provokes each host refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_cache_helpers_answer_typed_objects_and_refusals_arrive_as_rust_errors() {
    let policy = PluginPolicy {
        config: "shop".into(),
        ..PluginPolicy::default()
    };
    let rig = Rig::with_options(HostOptions {
        policy: Arc::new(StaticPolicy(policy)),
        ..HostOptions::default()
    })
    .await;
    rig.create(namespace("shop"));
    let config_map = |namespace: &str, name: &str, app: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
               "data": {"owner": name}})
    };
    rig.create(config_map("shop", "front", "web"));
    rig.create(config_map("default", "edge", "web"));
    rig.create(config_map("shop", "db", "store"));
    rig.load("sdk-probe").await;
    // A live event after the replay: every answer it logs comes from synced caches.
    rig.create(config_map("shop", "late", "web"));
    rig.expect_line("sdk-probe", "event shop/late").await;
    let after_sync = [
        r#"get late: {"owner": "late"}"#,
        r#"list app=web: ["edge", "front", "late"]"#,
        "by-index namespace=shop: 3",
        r#"index-values by-app: ["store", "web"]"#,
        r#"by-index by-app=web: ["default/edge", "shop/front", "shop/late"]"#,
        "has-synced: true",
        "refusals: not-granted, not-subscribed, unknown-index, invalid",
    ];
    for line in after_sync {
        rig.expect_line("sdk-probe", line).await;
    }
    // `get` looks in the configured namespace ("shop"): `edge` (in default) is not found there.
    rig.expect_line("sdk-probe", "get edge: {}").await;
    let status = &rig.host.plugins()[0];
    assert_eq!(status.errors, 0, "handler errors: {:?}", status.last_error);
    rig.stop().await;
}
