//! Differential end-to-end tests: each scenario is written once against a [`TestServer`] and run
//! on the dev server (`dev::NAME`) and on a real kube-apiserver (`real::NAME`, the real-server
//! tier: it needs `KUBEBUILDER_ASSETS`). Both must give the same outcome; a difference is a dev
//! server bug.
//!
//! The real tests share one etcd and kube-apiserver per run, each in namespaces of its own
//! ([`TestServer::real_shared`], started once, about 3 s); those that restart the API server or
//! compact etcd start their own ([`TestServer::real`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, Patch,
    PatchParams, PostParams,
};
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{
    ClientOptions, DeleteOptions, Deleted, Gvk, NoWriteObserver, ObjectRef, PatchBody, PluginHost,
    PluginPolicy, ResourcePattern, Resources, WriteClient, WriteError, WriteGrant, WriteGrants,
};
use kubewasm_tests::server::TestServer;
use kubewasm_tests::{guest_bytes, guest_logs, probe_events, variant, wait_until};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::fixture::{self, plugin_host, policy_by_file};

/// Bounds every wait (a real API server restart and a reflector's backoff fit in it); nothing
/// here is timed.
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs each scenario as `dev::NAME` and `real::NAME`: those in the first list on the run's
/// shared real server, those after `restarting the server:` (they restart the API server or
/// compact etcd) on one of their own. Those after `real only:` run only as `real::NAME`, on the
/// shared server (they test what the dev server leaves out, as its documentation says).
macro_rules! on_both_servers {
    (
        $($scenario:ident),* $(,)?;
        restarting the server: $($restarting:ident),* $(,)?;
        real only: $($real_only:ident),* $(,)?
    ) => {
        mod dev {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(kubewasm_tests::server::TestServer::dev().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $restarting() {
                    super::$restarting(kubewasm_tests::server::TestServer::dev().await).await;
                }
            )*
        }
        mod real {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let server = kubewasm_tests::server::TestServer::real_shared().await;
                    super::$scenario(server).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $restarting() {
                    super::$restarting(kubewasm_tests::server::TestServer::real().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $real_only() {
                    let server = kubewasm_tests::server::TestServer::real_shared().await;
                    super::$real_only(server).await;
                }
            )*
        }
    };
}

on_both_servers!(
    hot_reload_makes_no_new_list_or_watch,
    a_plugin_subscribed_to_a_custom_resource_sees_it_end_to_end,
    refused_writes_answer_the_same_status,
    oversized_writes_are_refused_as_the_api_server_refuses_them,
    invalid_names_are_refused_as_the_api_server_refuses_them,
    the_write_client_gets_the_same_answers,
    generation_follows_spec_changes_only,
    server_side_apply_owns_removes_conflicts_and_forces,
    server_side_apply_merges_containers_by_name,
    server_side_apply_keys_ports_by_port_and_protocol,
    server_side_apply_follows_a_crds_list_types,
    an_update_takes_fields_from_an_applier,
    leader_election_acquires_renews_hands_over_and_releases_a_lease,
    the_mirror_controller_creates_follows_and_restores_what_it_owns,
    the_sample_controller_owns_scales_restores_and_reports,
    sharded_replicas_split_the_shards_and_one_takes_all_when_the_other_stops;
    restarting the server:
    informers_and_guests_converge_under_random_writes_and_dropped_watches,
    a_relist_after_expired_history_delivers_missed_changes_and_tombstones;
    real only: server_side_apply_makes_the_plugin_a_field_manager_with_conflicts,
    a_write_the_credentials_do_not_allow_is_forbidden,
);

/// A plugin host over shared informers on `server`, loading the probe with per-file policies.
struct Env {
    server: TestServer,
    factory: SharedInformerFactory,
    host: PluginHost,
}

impl Env {
    /// `policy` maps a plugin file to its policy; each call is a (re)load.
    fn new(
        server: TestServer,
        policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static,
    ) -> Env {
        let (factory, host) = plugin_host(&server.client(), policy_by_file(policy));
        Env {
            server,
            factory,
            host,
        }
    }

    /// Loads the probe from `file` and waits until every plugin has handled its replay.
    async fn load(&self, file: &str, bytes: Vec<u8>) -> kubewasm_runtime::PluginId {
        let id = self
            .host
            .load(Path::new(file), bytes)
            .await
            .unwrap_or_else(|e| panic!("loading {file} on the {} server: {e}", self.server.name()));
        assert!(
            wait_until(PATIENCE, || self.host.ready()).await,
            "{file} never got ready"
        );
        id
    }

    /// `key -> resourceVersion` of what the informer for `resource` in `namespace` (no
    /// selector) holds.
    fn informer_view(&self, kind: &str, namespace: &str) -> BTreeMap<String, String> {
        let informers = self.factory.informers();
        let (_, informer) = informers
            .iter()
            .find(|(k, _)| {
                k.resource.kind == kind
                    && k.namespace.as_deref() == Some(namespace)
                    && k.label_selector.is_none()
            })
            .unwrap_or_else(|| panic!("no {kind} informer for {namespace}"));
        informer
            .indexer()
            .list()
            .iter()
            .map(|o| (o.key().to_owned(), o.resource_version().to_owned()))
            .collect()
    }

    async fn stop(self) {
        self.host.shutdown(Duration::from_secs(5)).await;
        self.factory.shutdown().await;
    }
}

/// The probe as plugin `name`, subscribed to `subscriptions`.
fn probe(name: &str, subscriptions: Value) -> PluginPolicy {
    PluginPolicy {
        config: json!({"name": name, "subscriptions": subscriptions}).to_string(),
        ..PluginPolicy::default()
    }
}

fn config_maps_in(namespace: &str, selector: Option<&str>) -> Value {
    json!({"group": "", "version": "v1", "kind": "ConfigMap", "namespace": namespace,
           "labelSelector": selector})
}

/// What `plugin` believes exists, `key -> resourceVersion`, folded from its `EVENT` lines: adds
/// and updates set a key, deletes remove it.
fn guest_view(plugin: &str) -> BTreeMap<String, String> {
    let mut view = BTreeMap::new();
    for line in probe_events(plugin) {
        let mut words = line.split_whitespace().skip(1);
        let (Some(kind), Some(key), Some(rv)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let rv = rv.trim_start_matches("rv=").to_owned();
        match kind {
            "delete" => view.remove(key),
            _ => view.insert(key.to_owned(), rv),
        };
    }
    view
}

/// `key -> resourceVersion` of the objects the server lists.
async fn server_view(api: &Api<DynamicObject>, selector: Option<&str>) -> BTreeMap<String, String> {
    let params = match selector {
        Some(s) => ListParams::default().labels(s),
        None => ListParams::default(),
    };
    api.list(&params)
        .await
        .expect("list from the server")
        .items
        .into_iter()
        .map(|o| {
            let key = format!(
                "{}/{}",
                o.metadata.namespace.unwrap_or_default(),
                o.metadata.name.unwrap_or_default()
            );
            (key, o.metadata.resource_version.unwrap_or_default())
        })
        .collect()
}

fn dynamic_config_maps(client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<ConfigMap>(&());
    Api::namespaced_with(client, namespace, &resource)
}

/// Waits until `plugin`'s view equals `expected`.
async fn assert_guest_sees(plugin: &str, expected: &BTreeMap<String, String>, server: &str) {
    let converged = wait_until(PATIENCE, || guest_view(plugin) == *expected).await;
    assert!(
        converged,
        "{server} server: {plugin}'s view never matched the server's\nguest:  {:?}\nserver: {expected:?}\nevents: {:?}",
        guest_view(plugin),
        probe_events(plugin)
    );
}

async fn wait_event(plugin: &str, line: &str) {
    let found = wait_until(PATIENCE, || probe_events(plugin).iter().any(|e| e == line)).await;
    assert!(
        found,
        "{plugin} never logged {line:?}; it logged {:?}",
        probe_events(plugin)
    );
}

fn config_map(name: &str, color: &str, value: u32) -> ConfigMap {
    fixture::config_map(name, &[("color", color)], &[("v", &value.to_string())])
}

/// 160 random creates, updates (which may change the `color` label) and deletes over 20 names,
/// with every watch dropped halfway: the informer's store, a guest seeing every ConfigMap and a
/// guest seeing only `color=red` ones (so objects move in and out of its selector) all end equal
/// to what the server lists.
async fn informers_and_guests_converge_under_random_writes_and_dropped_watches(server: TestServer) {
    let ns = server.namespace("converge").await;
    let (all, red) = (
        format!("converge-all-{}", server.name()),
        format!("converge-red-{}", server.name()),
    );
    let policies = [
        ("all", probe(&all, json!([config_maps_in(&ns, None)]))),
        (
            "red",
            probe(&red, json!([config_maps_in(&ns, Some("color=red"))])),
        ),
    ];
    let env = Env::new(server, move |p: &Path| {
        let stem = p.file_stem().unwrap_or_default().to_string_lossy();
        policies
            .iter()
            .find(|(s, _)| *s == stem)
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    });
    env.load("all.wasm", guest_bytes("probe")).await;
    env.load("red.wasm", guest_bytes("probe")).await;

    let seed = 16;
    let mut rng = StdRng::seed_from_u64(seed);
    let api: Api<ConfigMap> = Api::namespaced(env.server.client(), &ns);
    let mut exists = [false; 20];
    for op in 0..160u32 {
        if op == 80 {
            env.server.drop_watches().await;
        }
        let i = rng.random_range(0..exists.len());
        let name = format!("cm{i}");
        let color = if rng.random_bool(0.5) { "red" } else { "blue" };
        if !exists[i] {
            api.create(&PostParams::default(), &config_map(&name, color, op))
                .await
                .unwrap_or_else(|e| panic!("op {op} (seed {seed}): create {name}: {e}"));
            exists[i] = true;
        } else if rng.random_bool(0.25) {
            api.delete(&name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("op {op} (seed {seed}): delete {name}: {e}"));
            exists[i] = false;
        } else {
            let patch =
                json!({"metadata": {"labels": {"color": color}}, "data": {"v": op.to_string()}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("op {op} (seed {seed}): patch {name}: {e}"));
        }
    }

    let objects = dynamic_config_maps(env.server.client(), &ns);
    let everything = server_view(&objects, None).await;
    let reds = server_view(&objects, Some("color=red")).await;
    assert!(!everything.is_empty() && !reds.is_empty() && reds.len() < everything.len());
    let name = env.server.name();
    assert_guest_sees(&all, &everything, name).await;
    assert_guest_sees(&red, &reds, name).await;
    assert_eq!(
        env.informer_view("ConfigMap", &ns),
        everything,
        "{name} server: the informer's store"
    );
    env.stop().await;
}

/// Objects deleted, changed and created while no watch could run, with history expired
/// meanwhile: after the relist the guest hears the deletion as a tombstone (last known state,
/// final state unknown), the change as an update and the creation as an add.
async fn a_relist_after_expired_history_delivers_missed_changes_and_tombstones(server: TestServer) {
    let ns = server.namespace("relist").await;
    let plugin = format!("relist-{}", server.name());
    let policy = probe(&plugin, json!([config_maps_in(&ns, None)]));
    let env = Env::new(server, move |_: &Path| policy.clone());
    let api: Api<ConfigMap> = Api::namespaced(env.server.client(), &ns);
    let mut versions = BTreeMap::new();
    for name in ["gone", "changed", "kept"] {
        let created = api
            .create(&PostParams::default(), &config_map(name, "red", 0))
            .await
            .expect("create");
        versions.insert(name, created.metadata.resource_version.expect("rv"));
    }
    env.load("relist.wasm", guest_bytes("probe")).await;
    for (name, rv) in &versions {
        wait_event(&plugin, &format!("EVENT add {ns}/{name} rv={rv} flag=true")).await;
    }

    let unseen: Api<ConfigMap> = Api::namespaced(env.server.begin_outage().await, &ns);
    unseen
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete during the outage");
    let patch = json!({"data": {"v": "1"}});
    let changed = unseen
        .patch("changed", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch during the outage");
    let born = unseen
        .create(&PostParams::default(), &config_map("born", "red", 0))
        .await
        .expect("create during the outage");
    env.server.end_outage().await;

    let rv = |o: &ConfigMap| o.metadata.resource_version.clone().expect("rv");
    wait_event(
        &plugin,
        &format!("EVENT delete {ns}/gone rv={} flag=true", versions["gone"]),
    )
    .await;
    wait_event(
        &plugin,
        &format!("EVENT update {ns}/changed rv={}", rv(&changed)),
    )
    .await;
    wait_event(
        &plugin,
        &format!("EVENT add {ns}/born rv={} flag=false", rv(&born)),
    )
    .await;
    let everything = server_view(&dynamic_config_maps(env.server.client(), &ns), None).await;
    assert_guest_sees(&plugin, &everything, env.server.name()).await;
    assert!(
        !probe_events(&plugin)
            .iter()
            .any(|e| e.contains("/kept") && !e.contains("flag=true")),
        "an unchanged object was delivered again: {:?}",
        probe_events(&plugin)
    );
    env.stop().await;
}

/// A plugin replaced by a new version while objects are written: the new version is replayed
/// the cache and hears what follows, and the server records no new LIST or WATCH of the
/// resource (dev server: request log; real server: audit log).
async fn hot_reload_makes_no_new_list_or_watch(server: TestServer) {
    let ns = server.namespace("reload").await;
    let prefix = format!("reload-{}", server.name());
    let loads = Arc::new(AtomicUsize::new(0));
    let (subscription, counter, name) = (config_maps_in(&ns, None), loads.clone(), prefix.clone());
    let env = Env::new(server, move |_: &Path| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        probe(&format!("{name}-v{n}"), json!([subscription]))
    });
    let api: Api<ConfigMap> = Api::namespaced(env.server.client(), &ns);
    let create = |name: &'static str| {
        let api = api.clone();
        async move {
            let created = api
                .create(&PostParams::default(), &config_map(name, "red", 0))
                .await
                .expect("create");
            created.metadata.resource_version.expect("rv")
        }
    };
    let rv1 = create("before").await;
    let probe_wasm = guest_bytes("probe");
    let id = env.load("hot.wasm", probe_wasm.clone()).await;
    let v1 = format!("{prefix}-v1");
    wait_event(&v1, &format!("EVENT add {ns}/before rv={rv1} flag=true")).await;
    // The informer's streaming list (a WATCH sending initial events) was counted: the count
    // below can fail.
    let before = env.server.list_watches("configmaps", &ns);
    assert!(
        before >= 1,
        "{} server: the informer's list and watch were not counted",
        env.server.name()
    );

    env.host
        .replace(id, variant(&probe_wasm, 2))
        .await
        .expect("replace");
    let v2 = format!("{prefix}-v2");
    wait_event(&v2, &format!("EVENT add {ns}/before rv={rv1} flag=true")).await;
    let rv2 = create("after").await;
    wait_event(&v2, &format!("EVENT add {ns}/after rv={rv2} flag=false")).await;
    assert!(!probe_events(&v1).iter().any(|e| e.contains("/after")));
    assert_eq!(
        env.server.list_watches("configmaps", &ns),
        before,
        "{} server: the reload listed or watched ConfigMaps again",
        env.server.name()
    );
    env.stop().await;
}

/// A CustomResourceDefinition created through the API, a plugin subscribed to its kind, and
/// objects of it created, changed and deleted: the plugin is replayed, hears each change and
/// ends with the server's view.
async fn a_plugin_subscribed_to_a_custom_resource_sees_it_end_to_end(server: TestServer) {
    let ns = server.namespace("crd").await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let crd = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.e2e.kubewasm.dev"},
        "spec": {
            "group": "e2e.kubewasm.dev",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .expect("a CustomResourceDefinition");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
    let gvk = GroupVersionKind::gvk("e2e.kubewasm.dev", "v1", "Gadget");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(
        server.client(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "gadgets"),
    );
    // Established (served) shortly after creation on a real server.
    let mut served = false;
    for _ in 0..300 {
        if gadgets.list(&ListParams::default()).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "{} server never served gadgets", server.name());

    let plugin = format!("crd-{}", server.name());
    let subscription =
        json!([{"group": "e2e.kubewasm.dev", "version": "v1", "kind": "Gadget", "namespace": ns}]);
    let policy = probe(&plugin, subscription);
    let env = Env::new(server, move |_: &Path| policy.clone());
    let gadget = |name: &str| {
        let mut object =
            DynamicObject::new(name, &ApiResource::from_gvk_with_plural(&gvk, "gadgets"));
        object.data = json!({"spec": {"size": 1}});
        object
    };
    let rv = |o: &DynamicObject| o.metadata.resource_version.clone().expect("rv");
    let first = gadgets
        .create(&PostParams::default(), &gadget("first"))
        .await
        .expect("create a gadget");
    env.load("crd.wasm", guest_bytes("probe")).await;
    wait_event(
        &plugin,
        &format!("EVENT add {ns}/first rv={} flag=true", rv(&first)),
    )
    .await;

    let second = gadgets
        .create(&PostParams::default(), &gadget("second"))
        .await
        .expect("create a gadget");
    wait_event(
        &plugin,
        &format!("EVENT add {ns}/second rv={} flag=false", rv(&second)),
    )
    .await;
    let patch = json!({"spec": {"size": 2}});
    let first = gadgets
        .patch("first", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch a gadget");
    wait_event(
        &plugin,
        &format!("EVENT update {ns}/first rv={}", rv(&first)),
    )
    .await;
    gadgets
        .delete("second", &DeleteParams::default())
        .await
        .expect("delete a gadget");
    let expected = server_view(&gadgets, None).await;
    assert_eq!(expected.len(), 1);
    assert_guest_sees(&plugin, &expected, env.server.name()).await;
    env.stop().await;
}

/// The status code and reason of a refused request, or `ok`.
fn outcome<T>(result: Result<T, kube::Error>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(kube::Error::Api(status)) => format!("{} {}", status.code, status.reason),
        Err(other) => format!("client error: {other}"),
    }
}

/// Writes a client must handle being refused get the same status code and reason from both
/// servers: a duplicate create, a stale update, a missing object, an invalid name.
async fn refused_writes_answer_the_same_status(server: TestServer) {
    let ns = server.namespace("refusals").await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &ns);
    let post = PostParams::default();
    let first = api
        .create(&post, &config_map("one", "red", 0))
        .await
        .expect("create");
    let mut stale = first.clone();
    api.patch(
        "one",
        &PatchParams::default(),
        &Patch::Merge(&json!({"data": {"v": "1"}})),
    )
    .await
    .expect("patch");
    stale.data = Some([("v".to_owned(), "stale".to_owned())].into());
    let outcomes = [
        outcome(api.create(&post, &config_map("one", "red", 0)).await),
        outcome(api.replace("one", &post, &stale).await),
        outcome(api.get("missing").await),
        outcome(api.delete("missing", &DeleteParams::default()).await),
        outcome(
            api.patch(
                "missing",
                &PatchParams::default(),
                &Patch::Merge(&json!({"data": {}})),
            )
            .await,
        ),
        outcome(api.create(&post, &config_map("Not_A_Name", "red", 0)).await),
        // An apply that creates must name its object in the body, not only in the URL.
        outcome(
            api.patch(
                "nameless",
                &PatchParams::apply("other"),
                &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap"})),
            )
            .await,
        ),
    ];
    assert_eq!(
        outcomes,
        [
            "409 AlreadyExists",
            "409 Conflict",
            "404 NotFound",
            "404 NotFound",
            "404 NotFound",
            "422 Invalid",
            "400 BadRequest",
        ],
        "{} server",
        server.name()
    );
}

/// A raw request's outcome: `ok`, or the status code, reason and the fields its causes name.
/// Raw, so that the path reaches the server exactly as written (kube's `Api` does not encode
/// names).
async fn sent(client: &kube::Client, method: &str, path: &str, body: Value) -> String {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body)
        .expect("a request");
    match client.request_text(request).await {
        Ok(_) => "ok".to_owned(),
        Err(kube::Error::Api(status)) => {
            let fields: Vec<&str> = status
                .details
                .iter()
                .flat_map(|d| d.causes.iter().map(|c| c.field.as_str()))
                .collect();
            format!("{} {} {fields:?}", status.code, status.reason)
        }
        Err(other) => format!("client error: {other}"),
    }
}

/// A custom resource whose `spec.blob` is `size` bytes.
fn bulky(name: &str, size: usize) -> Value {
    json!({"apiVersion": "gen.kubewasm.dev/v1", "kind": "Bulky", "metadata": {"name": name},
           "spec": {"blob": "x".repeat(size)}})
}

/// Requests and objects over the API server's limits are refused with the same code and
/// reason, and nothing refused is stored: a body over 3 MiB (the issue's 5 MB ConfigMap, a
/// patch, a replace) is 413; ConfigMap and Secret data over 1 MiB is 422 naming the field; a
/// custom resource over etcd's 1.5 MiB request limit is a 500 from storage (no reason), another
/// over the 2 MiB its etcd client sends is too, while a dry run of it (never stored) passes.
async fn oversized_writes_are_refused_as_the_api_server_refuses_them(server: TestServer) {
    let ns = server.namespace("limits").await;
    served_crd(&server, &ns, "Bulky", false).await;
    let client = server.client();
    let config_maps = format!("/api/v1/namespaces/{ns}/configmaps");
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    let bulkies = format!("/apis/gen.kubewasm.dev/v1/namespaces/{ns}/bulkys");
    let config_map = |name: &str, size: usize| json!({"metadata": {"name": name}, "data": {"k": "x".repeat(size)}});
    let secret = |name: &str, size: usize| {
        json!({"metadata": {"name": name},
               "data": {"k": base64_of_zeros(size)}})
    };
    const MIB: usize = 1024 * 1024;
    let outcomes = [
        sent(
            &client,
            "POST",
            &config_maps,
            config_map("five-mb", 5_000_000),
        )
        .await,
        sent(&client, "POST", &config_maps, config_map("small", 10)).await,
        sent(
            &client,
            "PATCH",
            &format!("{config_maps}/small"),
            json!({"data": {"k": "x".repeat(5_000_000)}}),
        )
        .await,
        sent(
            &client,
            "PUT",
            &format!("{config_maps}/small"),
            config_map("small", 3_500_000),
        )
        .await,
        sent(
            &client,
            "POST",
            &config_maps,
            config_map("over-one", MIB + 1),
        )
        .await,
        sent(&client, "POST", &config_maps, config_map("one-mib", MIB)).await,
        sent(
            &client,
            "PATCH",
            &format!("{config_maps}/small"),
            json!({"data": {"k": "x".repeat(MIB + 1)}}),
        )
        .await,
        sent(&client, "POST", &secrets, secret("over-one", MIB + 1)).await,
        sent(&client, "POST", &secrets, secret("one-mib", MIB)).await,
        sent(&client, "POST", &bulkies, bulky("under", 1_400_000)).await,
        sent(&client, "POST", &bulkies, bulky("over-etcd", 1_600_000)).await,
        sent(
            &client,
            "POST",
            &format!("{bulkies}?dryRun=All"),
            bulky("dry", 1_600_000),
        )
        .await,
        sent(&client, "POST", &bulkies, bulky("over-client", 2_500_000)).await,
        sent(&client, "POST", &bulkies, bulky("over-body", 3_500_000)).await,
        sent(&client, "POST", &bulkies, bulky("grows", 10)).await,
        sent(
            &client,
            "PATCH",
            &format!("{bulkies}/grows"),
            json!({"spec": {"blob": "x".repeat(1_600_000)}}),
        )
        .await,
    ];
    assert_eq!(
        outcomes,
        [
            "413 RequestEntityTooLarge []",
            "ok",
            "413 RequestEntityTooLarge []",
            "413 RequestEntityTooLarge []",
            "422 Invalid [\"[]\"]",
            "ok",
            "422 Invalid [\"[]\"]",
            "422 Invalid [\"data\"]",
            "ok",
            "ok",
            "500  []",
            "ok",
            "500  []",
            "413 RequestEntityTooLarge []",
            "ok",
            "500  []",
        ],
        "{} server",
        server.name()
    );
    let mut stored = Vec::new();
    for path in [
        format!("{config_maps}/five-mb"),
        format!("{config_maps}/over-one"),
        format!("{secrets}/over-one"),
        format!("{bulkies}/over-etcd"),
        format!("{bulkies}/dry"),
        format!("{bulkies}/over-client"),
    ] {
        stored.push(sent(&client, "GET", &path, Value::Null).await);
    }
    assert!(
        stored.iter().all(|s| s.starts_with("404 NotFound")),
        "{} server: {stored:?}",
        server.name()
    );
    let grown = Api::<DynamicObject>::namespaced_with(
        client,
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("gen.kubewasm.dev", "v1", "Bulky"),
            "bulkys",
        ),
    )
    .get("grows")
    .await
    .expect("the object a refused patch would have grown");
    assert_eq!(grown.data["spec"]["blob"], "x".repeat(10));
}

/// `size` zero bytes, base64-encoded (a Secret's data).
fn base64_of_zeros(size: usize) -> String {
    let mut text = "A".repeat(size / 3 * 4);
    match size % 3 {
        1 => text.push_str("AA=="),
        2 => text.push_str("AAA="),
        _ => {}
    }
    text
}

/// Names are refused where and as the API server refuses them. In a new object's body, by the
/// kind's rule (422 naming each field: DNS subdomains for most kinds, labels for namespaces and
/// services, only path segments for RBAC objects and core Events; a `generateName` and the name
/// made from it). In a request path, a name that is no path segment (`.`, `..`, `%` once
/// decoded) is 400 on every verb, while other names are looked up (404). A namespace in a path
/// that no namespace could be: 404 for a create when it is no DNS label; 500 when it is no path
/// segment (`..`).
async fn invalid_names_are_refused_as_the_api_server_refuses_them(server: TestServer) {
    let ns = server.namespace("names").await;
    let client = server.client();
    let config_maps = format!("/api/v1/namespaces/{ns}/configmaps");
    let named = |name: &str| json!({"metadata": {"name": name}});
    let generated = |prefix: &str| json!({"metadata": {"generateName": prefix}});
    let roles = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles");
    let services = format!("/api/v1/namespaces/{ns}/services");
    let service =
        |name: &str| json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
    let long = |n: usize| "a".repeat(n);
    let cases: Vec<(&str, &str, String, Value)> = vec![
        ("POST", "Bad_Name", config_maps.clone(), named("Bad_Name")),
        ("POST", "a..b", config_maps.clone(), named("a..b")),
        ("POST", "..", config_maps.clone(), named("..")),
        ("POST", "a%b", config_maps.clone(), named("a%b")),
        ("POST", "254", config_maps.clone(), named(&long(254))),
        ("POST", "253", config_maps.clone(), named(&long(253))),
        (
            "POST",
            "64.b",
            config_maps.clone(),
            named(&format!("{}.b", long(64))),
        ),
        ("POST", "gen Bad_", config_maps.clone(), generated("Bad_")),
        ("POST", "gen ab-", config_maps.clone(), generated("ab-")),
        ("POST", "gen ab.", config_maps.clone(), generated("ab.")),
        (
            "POST",
            "gen 250",
            config_maps.clone(),
            generated(&"g".repeat(250)),
        ),
        (
            "POST",
            "gen 254",
            config_maps.clone(),
            generated(&long(254)),
        ),
        ("POST", "ns a.b", "/api/v1/namespaces".into(), named("a.b")),
        (
            "POST",
            "ns 64",
            "/api/v1/namespaces".into(),
            named(&long(64)),
        ),
        ("POST", "ns ..", "/api/v1/namespaces".into(), named("..")),
        ("POST", "svc a.b", services.clone(), service("a.b")),
        ("POST", "svc 1abc", services.clone(), service("1abc")),
        ("POST", "role a:B_c", roles.clone(), named("a:B_c")),
        ("POST", "role 300", roles.clone(), named(&long(300))),
        ("POST", "role a%b", roles.clone(), named("a%b")),
        ("POST", "role ..", roles.clone(), named("..")),
        (
            "POST",
            "event Bad:Name",
            format!("/api/v1/namespaces/{ns}/events"),
            json!({"metadata": {"name": "Bad:Name"}, "involvedObject": {"namespace": ns},
                   "reason": "Probe"}),
        ),
        ("GET", "get ..", format!("{config_maps}/.."), Value::Null),
        ("GET", "get .", format!("{config_maps}/."), Value::Null),
        (
            "GET",
            "get %2e%2e",
            format!("{config_maps}/%2e%2e"),
            Value::Null,
        ),
        (
            "GET",
            "get a%25b",
            format!("{config_maps}/a%25b"),
            Value::Null,
        ),
        (
            "GET",
            "get a%2Fb",
            format!("{config_maps}/a%2Fb"),
            Value::Null,
        ),
        (
            "GET",
            "get Bad_Name",
            format!("{config_maps}/Bad_Name"),
            Value::Null,
        ),
        (
            "GET",
            "get 300",
            format!("{config_maps}/{}", long(300)),
            Value::Null,
        ),
        ("PUT", "put ..", format!("{config_maps}/.."), named("..")),
        (
            "DELETE",
            "delete ..",
            format!("{config_maps}/.."),
            Value::Null,
        ),
        ("PATCH", "patch ..", format!("{config_maps}/.."), json!({})),
        (
            "GET",
            "get namespace ..",
            "/api/v1/namespaces/..".into(),
            Value::Null,
        ),
        (
            "POST",
            "in ns ..",
            "/api/v1/namespaces/../configmaps".into(),
            named("x"),
        ),
        (
            "POST",
            "in ns %2e%2e",
            "/api/v1/namespaces/%2e%2e/configmaps".into(),
            named("x"),
        ),
        (
            "POST",
            "in ns Bad_NS",
            "/api/v1/namespaces/Bad_NS/configmaps".into(),
            named("x"),
        ),
        (
            "POST",
            "in ns 64",
            format!("/api/v1/namespaces/{}/configmaps", long(64)),
            named("x"),
        ),
        ("POST", "no ns", "/api/v1/configmaps".into(), named("x")),
        (
            "GET",
            "get in ns ..",
            "/api/v1/namespaces/../configmaps/x".into(),
            Value::Null,
        ),
        (
            "GET",
            "list in ns ..",
            "/api/v1/namespaces/../configmaps".into(),
            Value::Null,
        ),
        (
            "PATCH",
            "patch in ns ..",
            "/api/v1/namespaces/../configmaps/x".into(),
            json!({}),
        ),
        (
            "DELETE",
            "delete in ns ..",
            "/api/v1/namespaces/../configmaps/x".into(),
            Value::Null,
        ),
        (
            "GET",
            "list in ns Bad_NS",
            "/api/v1/namespaces/Bad_NS/configmaps".into(),
            Value::Null,
        ),
        (
            "GET",
            "get in ns Bad_NS",
            "/api/v1/namespaces/Bad_NS/configmaps/x".into(),
            Value::Null,
        ),
    ];
    let mut outcomes = Vec::new();
    for (method, label, path, body) in &cases {
        outcomes.push(format!(
            "{label}: {}",
            sent(&client, method, path, body.clone()).await
        ));
    }
    let invalid = |fields: &str| format!("422 Invalid [{fields}]");
    let name = "\"metadata.name\"";
    let generate = "\"metadata.generateName\"";
    let expected: Vec<String> = [
        ("Bad_Name", invalid(name)),
        ("a..b", invalid(name)),
        ("..", invalid(name)),
        ("a%b", invalid(name)),
        ("254", invalid(name)),
        ("253", "ok".into()),
        ("64.b", "ok".into()),
        ("gen Bad_", invalid(&format!("{generate}, {name}"))),
        ("gen ab-", "ok".into()),
        ("gen ab.", invalid(generate)),
        ("gen 250", "ok".into()),
        ("gen 254", invalid(generate)),
        ("ns a.b", invalid(name)),
        ("ns 64", invalid(&format!("{name}, \"metadata.labels\""))),
        ("ns ..", invalid(&format!("{name}, \"metadata.labels\""))),
        ("svc a.b", invalid(name)),
        ("svc 1abc", "ok".into()),
        ("role a:B_c", "ok".into()),
        ("role 300", "ok".into()),
        ("role a%b", invalid(name)),
        ("role ..", invalid(name)),
        ("event Bad:Name", "ok".into()),
        ("get ..", "400 BadRequest []".into()),
        ("get .", "400 BadRequest []".into()),
        ("get %2e%2e", "400 BadRequest []".into()),
        ("get a%25b", "400 BadRequest []".into()),
        ("get a%2Fb", "404 NotFound []".into()),
        ("get Bad_Name", "404 NotFound []".into()),
        ("get 300", "404 NotFound []".into()),
        ("put ..", "400 BadRequest []".into()),
        ("delete ..", "400 BadRequest []".into()),
        ("patch ..", "400 BadRequest []".into()),
        ("get namespace ..", "400 BadRequest []".into()),
        ("in ns ..", "500 InternalError [\"\"]".into()),
        ("in ns %2e%2e", "500 InternalError [\"\"]".into()),
        ("in ns Bad_NS", "404 NotFound []".into()),
        ("in ns 64", "404 NotFound []".into()),
        ("no ns", "405 MethodNotAllowed []".into()),
        ("get in ns ..", "500  []".into()),
        ("list in ns ..", "500  []".into()),
        ("patch in ns ..", "500  []".into()),
        ("delete in ns ..", "500  []".into()),
        ("list in ns Bad_NS", "ok".into()),
        ("get in ns Bad_NS", "404 NotFound []".into()),
    ]
    .into_iter()
    .map(|(label, outcome)| format!("{label}: {outcome}"))
    .collect();
    assert_eq!(outcomes, expected, "{} server", server.name());
    let generated = Api::<ConfigMap>::namespaced(server.client(), &ns)
        .list(&ListParams::default())
        .await
        .expect("list the ConfigMaps");
    let from_long_prefix: Vec<usize> = generated
        .items
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .filter(|n| n.starts_with('g'))
        .map(str::len)
        .collect();
    assert_eq!(
        from_long_prefix,
        [63],
        "{} server: a generated name is cut to 63",
        server.name()
    );
}

/// What a write client call came to: `ok`, or the error's type (with the HTTP code for `Invalid`,
/// 422 when the server refused it, `invalid` when the host did).
fn written<T>(result: &Result<T, WriteError>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(WriteError::Invalid { .. }) => {
            let error = result.as_ref().err().map(WriteError::code_label);
            format!("Invalid {}", error.unwrap_or_default())
        }
        Err(error @ WriteError::Refused { .. }) => format!("Refused {}", error.code_label()),
        Err(error) => format!("{error:?}")
            .split('(')
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// The object a write answered, parsed.
fn answered(result: &Result<String, WriteError>, what: &str) -> Value {
    let text = result.as_ref().unwrap_or_else(|e| panic!("{what}: {e}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} answered no JSON: {e}"))
}

/// `manager:operation` of each managedFields entry, sorted.
fn manager_operations(meta: &ObjectMeta) -> Vec<String> {
    let mut m: Vec<String> = meta
        .managed_fields
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "{}:{}",
                e.manager.clone().unwrap_or_default(),
                e.operation.clone().unwrap_or_default()
            )
        })
        .collect();
    m.sort();
    m
}

/// The managers of `field` (a key of `data`) in an object's managedFields, with their operation.
fn managers_of(object: &Value, field: &str) -> Vec<String> {
    let key = format!("f:{field}");
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["fieldsV1"]["f:data"].get(&key).is_some())
        .map(|entry| {
            format!(
                "{} {}",
                entry["manager"].as_str().unwrap_or_default(),
                entry["operation"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// A plugin's write client (runtime/src/client) named `writer`, granted every verb on
/// ConfigMaps in one namespace, and the JSON it writes there.
struct Writes {
    writer: WriteClient,
    namespace: String,
}

impl Writes {
    async fn new(server: &TestServer, namespace: &str) -> Writes {
        Writes {
            writer: Writes::client(server.client()),
            namespace: server.namespace(namespace).await,
        }
    }

    /// The write client of plugin `writer`, granted ConfigMaps, sending through `client`.
    fn client(client: kube::Client) -> WriteClient {
        let grants = WriteGrants::only(vec![
            WriteGrant::new(ResourcePattern::new("", "ConfigMap"), None).expect("a grant"),
        ]);
        WriteClient::new(
            client.clone(),
            "writer".into(),
            grants,
            // The scenarios compare the servers' answers, more writes than the default burst:
            // the plugin's own rate limit (refused at once when spent) is tested elsewhere.
            ClientOptions {
                burst: 100,
                ..ClientOptions::default()
            },
            Arc::new(Resources::new(client)),
            Arc::new(NoWriteObserver),
        )
    }

    fn target(&self, kind: &str, name: &str) -> ObjectRef {
        let gvk = Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        };
        ObjectRef::new(gvk, Some(&self.namespace), name).expect("a valid reference")
    }

    /// A ConfigMap `name` with `data`, as JSON text.
    fn config_map(&self, name: &str, data: Value) -> String {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace}, "data": data,
        })
        .to_string()
    }

    /// Server-side apply of ConfigMap `name` with `data` by the plugin.
    async fn apply(&self, name: &str, data: Value, force: bool) -> Result<String, WriteError> {
        let apply = PatchBody::Apply {
            object: self.config_map(name, data),
            force,
        };
        self.writer
            .patch(&self.target("ConfigMap", name), &apply)
            .await
    }
}

/// The plugin's write client answers the same on both servers: create, update with a stale
/// resourceVersion, the three patch types, server-side apply, delete with a uid precondition
/// that does not hold and of a missing object, invalid objects, and what the plugin is not
/// granted.
async fn the_write_client_gets_the_same_answers(server: TestServer) {
    let w = Writes::new(&server, "writes").await;
    let writer = &w.writer;
    let one = w.target("ConfigMap", "one");
    let mut outcomes = Vec::new();

    let created = writer.create(&w.config_map("one", json!({"a": "1"}))).await;
    outcomes.push(written(&created));
    let created = answered(&created, "create");
    outcomes.push(written(
        &writer.create(&w.config_map("one", json!({}))).await,
    ));
    let invalid = w.config_map("Not_A_Name", json!({}));
    outcomes.push(written(&writer.create(&invalid).await));

    let mut fresh = created.clone();
    fresh["data"]["a"] = json!("2");
    let updated = writer.update(&fresh.to_string()).await;
    outcomes.push(written(&updated));
    assert_eq!(answered(&updated, "update")["data"]["a"], "2");
    // `created` holds the resourceVersion from before the update.
    let mut stale = created.clone();
    stale["data"]["a"] = json!("stale");
    outcomes.push(written(&writer.update(&stale.to_string()).await));
    outcomes.push(written(
        &writer.update(&w.config_map("one", json!({}))).await,
    ));

    let patches = [
        PatchBody::Merge(r#"{"data":{"merge":"m"}}"#.into()),
        PatchBody::Json(r#"[{"op":"add","path":"/data/json","value":"j"}]"#.into()),
        PatchBody::Strategic(r#"{"data":{"strategic":"s"}}"#.into()),
    ];
    for patch in &patches {
        outcomes.push(written(&writer.patch(&one, patch).await));
    }
    let failing_test = PatchBody::Json(r#"[{"op":"test","path":"/data/a","value":"9"}]"#.into());
    outcomes.push(written(&writer.patch(&one, &failing_test).await));
    let missing = w.target("ConfigMap", "missing");
    outcomes.push(written(&writer.patch(&missing, &patches[0]).await));
    let applied = w.apply("one", json!({"applied": "yes"}), false).await;
    outcomes.push(written(&applied));
    let applied = answered(&applied, "apply");

    let wrong_uid = DeleteOptions {
        uid: Some("00000000-0000-0000-0000-000000000000".into()),
        ..DeleteOptions::default()
    };
    outcomes.push(written(&writer.delete(&one, &wrong_uid).await));
    let anyhow = DeleteOptions::default();
    outcomes.push(written(&writer.delete(&missing, &anyhow).await));

    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s", "namespace": w.namespace},
    });
    outcomes.push(written(&writer.create(&secret.to_string()).await));
    let secret = w.target("Secret", "s");
    outcomes.push(written(&writer.patch(&secret, &patches[0]).await));
    outcomes.push(written(&writer.delete(&secret, &anyhow).await));

    let right_uid = DeleteOptions {
        uid: created["metadata"]["uid"].as_str().map(str::to_owned),
        ..DeleteOptions::default()
    };
    let deleted = writer.delete(&one, &right_uid).await;
    let gone = Api::<ConfigMap>::namespaced(server.client(), &w.namespace)
        .get_opt("one")
        .await
        .expect("get");

    let name = server.name();
    assert_eq!(
        outcomes,
        [
            "ok",
            "AlreadyExists",
            "Invalid 422",
            "ok",
            "Conflict",
            "Invalid invalid",
            "ok",
            "ok",
            "ok",
            "Invalid invalid",
            "NotFound",
            "ok",
            "Conflict",
            "NotFound",
            "Refused not-granted",
            "Refused not-granted",
            "Refused not-granted",
        ],
        "{name} server"
    );
    let data = &applied["data"];
    let want = json!({"a": "2", "merge": "m", "json": "j", "strategic": "s", "applied": "yes"});
    assert_eq!(data, &want, "{name} server: every write landed");
    assert_eq!(deleted.ok(), Some(Deleted::Gone), "{name} server");
    assert!(gone.is_none(), "{name} server: deleted with the right uid");
}

/// Server-side apply through the write client names the plugin as the field manager; applying
/// a field another manager owns is a Conflict unless forced, and forcing takes the field.
/// Real server only: the dev server keeps no managedFields (README, "What the dev server is
/// not").
async fn server_side_apply_makes_the_plugin_a_field_manager_with_conflicts(server: TestServer) {
    let w = Writes::new(&server, "apply").await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &w.namespace);
    let theirs: Value =
        serde_json::from_str(&w.config_map("one", json!({"theirs": "other"}))).expect("JSON");
    api.patch("one", &PatchParams::apply("other"), &Patch::Apply(theirs))
        .await
        .expect("another manager applies");

    let applied = w.apply("one", json!({"mine": "w"}), false).await;
    let applied = answered(&applied, "apply");
    assert_eq!(managers_of(&applied, "mine"), ["writer Apply"]);
    assert_eq!(managers_of(&applied, "theirs"), ["other Apply"]);

    let both = json!({"mine": "w", "theirs": "w"});
    let conflict = w.apply("one", both.clone(), false).await;
    assert_eq!(written(&conflict), "Conflict", "{conflict:?}");
    let forced = w.apply("one", both, true).await;
    let forced = answered(&forced, "forced apply");
    assert_eq!(managers_of(&forced, "theirs"), ["writer Apply"]);
    assert_eq!(forced["data"], json!({"mine": "w", "theirs": "w"}));
}

/// A write the plugin is granted but the host's credentials are not is the API server's 403,
/// typed `Forbidden`. Real server only: the dev server has no authorization.
async fn a_write_the_credentials_do_not_allow_is_forbidden(server: TestServer) {
    let w = Writes::new(&server, "forbidden").await;
    let restricted = server
        .envtest()
        .expect("the real server's harness")
        .restricted();
    let writer = Writes::client(restricted);
    let created = writer.create(&w.config_map("one", json!({}))).await;
    assert_eq!(written(&created), "Forbidden", "{created:?}");
}

/// Creates a namespaced CRD `plural.gen.kubewasm.dev` (with or without the status subresource)
/// and waits until it is served.
async fn served_crd(server: &TestServer, ns: &str, kind: &str, status: bool) -> Api<DynamicObject> {
    let mut version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    serve_crd_version(server, ns, kind, version).await
}

/// Creates a namespaced CRD `plural.gen.kubewasm.dev` with one version, `v1`, and waits until
/// it is served.
async fn serve_crd_version(
    server: &TestServer,
    ns: &str,
    kind: &str,
    version: Value,
) -> Api<DynamicObject> {
    let plural = format!("{}s", kind.to_lowercase());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.gen.kubewasm.dev")},
        "spec": {
            "group": "gen.kubewasm.dev",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [version],
        },
    }))
    .expect("a CustomResourceDefinition");
    Api::<CustomResourceDefinition>::all(server.client())
        .create(&PostParams::default(), &crd)
        .await
        .expect("create the CRD");
    let gvk = GroupVersionKind::gvk("gen.kubewasm.dev", "v1", kind);
    let api = Api::namespaced_with(
        server.client(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    );
    let mut served = false;
    for _ in 0..300 {
        if api.list(&ListParams::default()).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "{} server never served {plural}", server.name());
    api
}

/// `metadata.generation` after each of: create, a label change, a status change (through
/// `/status` where it is a subresource), a spec change, the same spec again.
async fn generations(
    api: &Api<DynamicObject>,
    object: Value,
    status_subresource: bool,
) -> Vec<i64> {
    let name = object["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_owned();
    let object: DynamicObject = serde_json::from_value(object).expect("an object");
    let generation = |o: DynamicObject| o.metadata.generation.expect("a generation");
    let patch = async |body: Value| {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .expect("patch")
    };
    let status = json!({"status": {"observedGeneration": 1}});
    vec![
        generation(
            api.create(&PostParams::default(), &object)
                .await
                .expect("create"),
        ),
        generation(patch(json!({"metadata": {"labels": {"touched": "yes"}}})).await),
        generation(if status_subresource {
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("patch status")
        } else {
            patch(status).await
        }),
        generation(patch(json!({"spec": {"replicas": 3}})).await),
        generation(patch(json!({"spec": {"replicas": 3}})).await),
    ]
}

/// The generation counts spec changes only, for a built-in kind and for custom resources with
/// the status subresource; without it, a status change is a change like any other.
async fn generation_follows_spec_changes_only(server: TestServer) {
    let ns = server.namespace("generation").await;
    let deployments = Api::namespaced_with(
        server.client(),
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        ),
    );
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
    });
    let widgets = served_crd(&server, &ns, "Widget", true).await;
    let plains = served_crd(&server, &ns, "Plain", false).await;
    let custom = |kind: &str| {
        json!({"apiVersion": "gen.kubewasm.dev/v1", "kind": kind,
               "metadata": {"name": "one"}, "spec": {"replicas": 1}})
    };
    let observed = [
        generations(&deployments, deployment, true).await,
        generations(&widgets, custom("Widget"), true).await,
        generations(&plains, custom("Plain"), false).await,
    ];
    assert_eq!(
        observed,
        [
            vec![1, 1, 1, 2, 2],
            vec![1, 1, 1, 2, 2],
            vec![1, 1, 2, 3, 3]
        ],
        "{} server",
        server.name()
    );
}

/// Server-side apply by two managers: a field one stops applying goes unless the other owns it
/// too, setting another's field to another value is a 409 naming the manager and the field, and
/// `force` takes the field over.
async fn server_side_apply_owns_removes_conflicts_and_forces(server: TestServer) {
    let ns = server.namespace("apply").await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &ns);
    let apply = async |manager: &str, force: bool, data: Value| {
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "shared"}, "data": data});
        api.patch("shared", &params, &Patch::Apply(&body)).await
    };
    let data = |o: ConfigMap| o.data.unwrap_or_default();
    let managers = |o: &ConfigMap| manager_operations(&o.metadata);

    let first = apply("alice", false, json!({"a": "1", "b": "2"}))
        .await
        .expect("first apply");
    assert_eq!(
        managers(&first),
        ["alice:Apply"],
        "{} server",
        server.name()
    );
    let second = apply("alice", false, json!({"a": "1"}))
        .await
        .expect("apply without b");
    assert_eq!(
        data(second),
        [("a".to_owned(), "1".to_owned())].into(),
        "{} server",
        server.name()
    );

    let refused = apply("bob", false, json!({"a": "other"}))
        .await
        .expect_err("a conflict");
    let kube::Error::Api(status) = refused else {
        panic!("expected an API error on the {} server", server.name());
    };
    let causes: Vec<(String, String)> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| (c.reason.clone(), c.field.clone()))
        .collect();
    assert_eq!(
        (status.code, status.reason.as_str(), causes),
        (
            409,
            "Conflict",
            vec![("FieldManagerConflict".to_owned(), ".data.a".to_owned())]
        ),
        "{} server",
        server.name()
    );
    assert!(status.message.contains("alice"), "{}", status.message);

    // The same value is shared ownership: alice dropping it leaves it with bob.
    let shared = apply("bob", false, json!({"a": "1"}))
        .await
        .expect("same value");
    assert_eq!(
        managers(&shared),
        ["alice:Apply", "bob:Apply"],
        "{} server",
        server.name()
    );
    let kept = apply("alice", false, json!({"c": "3"}))
        .await
        .expect("alice drops a");
    assert_eq!(
        data(kept),
        [
            ("a".to_owned(), "1".to_owned()),
            ("c".to_owned(), "3".to_owned())
        ]
        .into(),
        "{} server",
        server.name()
    );

    let forced = apply("carol", true, json!({"c": "forced"}))
        .await
        .expect("forced apply");
    assert_eq!(data(forced.clone())["c"], "forced");
    // alice lost c to carol: alice applying nothing removes nothing carol owns.
    let after = apply("alice", false, json!({}))
        .await
        .expect("alice applies nothing");
    assert_eq!(data(after)["c"], "forced", "{} server", server.name());
}

/// The code, the fields named in the causes and the message of a refused write.
fn conflict_of<T: std::fmt::Debug>(
    server: &TestServer,
    refused: Result<T, kube::Error>,
) -> (u16, Vec<String>, String) {
    let Err(kube::Error::Api(status)) = refused else {
        panic!(
            "expected an API error on the {} server: {refused:?}",
            server.name()
        );
    };
    let fields = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.field.clone())
        .collect();
    (status.code, fields, status.message)
}

/// `manager` applies a Deployment `name` (labels `app: NAME`) with these containers.
async fn apply_deployment(
    server: &TestServer,
    api: &Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
    manager: &str,
    containers: Value,
) -> k8s_openapi::api::apps::v1::Deployment {
    let body = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": containers},
            },
        },
    });
    api.patch(name, &PatchParams::apply(manager), &Patch::Apply(&body))
        .await
        .unwrap_or_else(|e| panic!("{manager} applies on the {} server: {e}", server.name()))
}

/// Two appliers of one Deployment each own their container (lists merge by key); one dropping
/// its container removes only that one.
async fn server_side_apply_merges_containers_by_name(server: TestServer) {
    let ns = server.namespace("apply-lists").await;
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(server.client(), &ns);
    let apply = async |manager: &str, containers: Value| {
        apply_deployment(&server, &api, "web", manager, containers).await
    };
    let names = |d: k8s_openapi::api::apps::v1::Deployment| -> Vec<(String, String)> {
        let mut c: Vec<(String, String)> = d
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.image.unwrap_or_default()))
            .collect();
        c.sort();
        c
    };
    apply("app", json!([{"name": "web", "image": "nginx"}])).await;
    let both = apply("mesh", json!([{"name": "proxy", "image": "envoy"}])).await;
    assert_eq!(
        names(both),
        [
            ("proxy".to_owned(), "envoy".to_owned()),
            ("web".to_owned(), "nginx".to_owned())
        ],
        "{} server",
        server.name()
    );
    let moved = apply("app", json!([{"name": "api", "image": "nginx:2"}])).await;
    assert_eq!(
        names(moved),
        [
            ("api".to_owned(), "nginx:2".to_owned()),
            ("proxy".to_owned(), "envoy".to_owned())
        ],
        "{} server",
        server.name()
    );
}

/// Container ports are keyed by port and protocol (TCP when left out): two appliers of one
/// container, one with 53/UDP and one with 53, own two ports, and the second dropping its port
/// leaves the first's.
async fn server_side_apply_keys_ports_by_port_and_protocol(server: TestServer) {
    let ns = server.namespace("apply-ports").await;
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(server.client(), &ns);
    let apply = async |manager: &str, container: Value| {
        apply_deployment(&server, &api, "dns", manager, json!([container])).await
    };
    let ports = |d: &k8s_openapi::api::apps::v1::Deployment| -> Vec<(i32, String)> {
        let mut p: Vec<(i32, String)> = d
            .spec
            .iter()
            .filter_map(|s| s.template.spec.as_ref())
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .map(|p| (p.container_port, p.protocol.clone().unwrap_or_default()))
            .collect();
        p.sort();
        p
    };
    apply(
        "udp",
        json!({"name": "dns", "image": "coredns",
               "ports": [{"containerPort": 53, "protocol": "UDP"}]}),
    )
    .await;
    let both = apply(
        "tcp",
        json!({"name": "dns", "ports": [{"containerPort": 53}]}),
    )
    .await;
    assert_eq!(
        ports(&both),
        [(53, "TCP".to_owned()), (53, "UDP".to_owned())],
        "{} server",
        server.name()
    );
    let tcp_fields = both
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("tcp"))
        .and_then(|e| e.fields_v1.as_ref())
        .map(|f| f.0.to_string())
        .unwrap_or_default();
    assert!(
        tcp_fields.contains(r#"k:{\"containerPort\":53,\"protocol\":\"TCP\"}"#),
        "{} server: {tcp_fields}",
        server.name()
    );
    let left = apply("tcp", json!({"name": "dns"})).await;
    assert_eq!(
        ports(&left),
        [(53, "UDP".to_owned())],
        "{} server",
        server.name()
    );
}

/// A custom resource's lists follow its CRD: a map list merges by all its keys (a defaulted key
/// included), a set merges by value, and a list the schema leaves atomic is owned whole, so a
/// second applier conflicts on it.
async fn server_side_apply_follows_a_crds_list_types(server: TestServer) {
    let ns = server.namespace("apply-crd-lists").await;
    let spec = json!({"type": "object", "properties": {
        "routes": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["host", "port"],
            "items": {"type": "object", "required": ["host"], "properties": {
                "host": {"type": "string"},
                "port": {"type": "integer", "default": 80},
                "backend": {"type": "string"},
            }},
        },
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "steps": {"type": "array", "items": {"type": "string"}},
    }});
    let version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}},
    });
    let api = serve_crd_version(&server, &ns, "Gateway", version).await;
    let apply = async |manager: &str, force: bool, spec: Value| {
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let body = json!({"apiVersion": "gen.kubewasm.dev/v1", "kind": "Gateway",
                          "metadata": {"name": "edge"}, "spec": spec});
        api.patch("edge", &params, &Patch::Apply(&body)).await
    };
    let spec_of = |o: DynamicObject| -> Value {
        let mut spec = o.data["spec"].clone();
        if let Some(tags) = spec["tags"].as_array_mut() {
            tags.sort_by_key(|t| t.to_string());
        }
        if let Some(routes) = spec["routes"].as_array_mut() {
            routes.sort_by_key(|r| r.to_string());
        }
        spec
    };
    apply(
        "a",
        false,
        json!({"routes": [{"host": "shop", "backend": "web"}], "tags": ["red"], "steps": ["build"]}),
    )
    .await
    .expect("a applies");
    let both = apply(
        "b",
        false,
        json!({"routes": [{"host": "shop", "port": 443, "backend": "tls"}], "tags": ["blue"]}),
    )
    .await
    .expect("b applies beside a");
    assert_eq!(
        spec_of(both),
        json!({
            "routes": [{"backend": "tls", "host": "shop", "port": 443},
                       {"backend": "web", "host": "shop", "port": 80}],
            "tags": ["blue", "red"],
            "steps": ["build"],
        }),
        "{} server",
        server.name()
    );
    let refused = apply("b", false, json!({"steps": ["test"]})).await;
    let (code, fields, _) = conflict_of(&server, refused);
    assert_eq!(
        (code, fields),
        (409, vec![".spec.steps".to_owned()]),
        "{} server",
        server.name()
    );
    apply(
        "b",
        true,
        json!({"routes": [{"host": "shop", "port": 443, "backend": "tls"}], "tags": ["blue"],
               "steps": ["test"]}),
    )
    .await
    .expect("b forces");
    let after = apply("a", false, json!({"tags": ["red"]}))
        .await
        .expect("a drops its route and steps");
    assert_eq!(
        spec_of(after),
        json!({
            "routes": [{"backend": "tls", "host": "shop", "port": 443}],
            "tags": ["blue", "red"],
            "steps": ["test"],
        }),
        "{} server",
        server.name()
    );
}

/// A non-apply write (operation Update) takes the fields it changes: the applier then conflicts
/// with the updater on them.
async fn an_update_takes_fields_from_an_applier(server: TestServer) {
    let ns = server.namespace("apply-update").await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &ns);
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "mixed"}, "data": {"a": "1", "b": "1"}});
    api.patch("mixed", &PatchParams::apply("alice"), &Patch::Apply(&body))
        .await
        .expect("apply");
    let params = PatchParams {
        field_manager: Some("controller".to_owned()),
        ..PatchParams::default()
    };
    let updated = api
        .patch(
            "mixed",
            &params,
            &Patch::Merge(&json!({"data": {"a": "2"}})),
        )
        .await
        .expect("merge patch");
    let managers = manager_operations(&updated.metadata);
    assert_eq!(
        managers,
        ["alice:Apply", "controller:Update"],
        "{} server",
        server.name()
    );
    let refused = api
        .patch("mixed", &PatchParams::apply("alice"), &Patch::Apply(&body))
        .await;
    let (code, fields, message) = conflict_of(&server, refused);
    assert_eq!(
        (code, fields),
        (409, vec![".data.a".to_owned()]),
        "{} server",
        server.name()
    );
    assert!(message.contains("controller"), "{message}");
}

/// Two electors on one Lease: the first creates and holds it (renewing it), the second waits as
/// a standby, takes it within a retry period once the first releases it on cancel, and empties
/// it when cancelled in turn. The Lease reads the same on both servers at each step.
async fn leader_election_acquires_renews_hands_over_and_releases_a_lease(server: TestServer) {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use kubewasm::leader::{ElectionOptions, LeaderElector};
    use tokio_util::sync::CancellationToken;

    let namespace = server.namespace("leader-election").await;
    let client = server.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let spec = || async {
        leases
            .get("kubewasm")
            .await
            .unwrap_or_else(|e| panic!("reading the lease on the {} server: {e}", server.name()))
            .spec
            .unwrap_or_default()
    };
    let start = |identity: &str| {
        let options = ElectionOptions {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
            ..ElectionOptions::new("kubewasm", &namespace, identity)
        };
        let elector = LeaderElector::new(client.clone(), options).expect("valid options");
        let gate = elector.gate();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(elector.run(cancel.clone()));
        (gate, cancel, task)
    };

    let (a, stop_a, task_a) = start("a");
    tokio::time::timeout(PATIENCE, a.wait_leader())
        .await
        .expect("a leads");
    let first = spec().await;
    assert_eq!(
        first.holder_identity.as_deref(),
        Some("a"),
        "{}",
        server.name()
    );
    assert_eq!(first.lease_duration_seconds, Some(2));
    assert_eq!(first.lease_transitions, Some(0));
    assert!(first.acquire_time.is_some() && first.renew_time.is_some());

    let (b, stop_b, task_b) = start("b");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let renewing = spec().await;
    assert!(
        renewing.renew_time > first.renew_time,
        "a renews on the {} server",
        server.name()
    );
    assert_eq!(renewing.acquire_time, first.acquire_time);
    assert!(a.is_leader() && !b.is_leader(), "{}", server.name());

    stop_a.cancel();
    task_a.await.expect("elector a");
    assert!(!a.is_leader());
    tokio::time::timeout(PATIENCE, b.wait_leader())
        .await
        .expect("b leads");
    let second = spec().await;
    assert_eq!(
        second.holder_identity.as_deref(),
        Some("b"),
        "{}",
        server.name()
    );
    assert_eq!(second.lease_duration_seconds, Some(2));
    assert_eq!(second.lease_transitions, Some(1));

    stop_b.cancel();
    task_b.await.expect("elector b");
    let released = spec().await;
    assert_eq!(
        released,
        LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            lease_transitions: Some(1),
            acquire_time: released.acquire_time.clone(),
            renew_time: released.renew_time.clone(),
            ..LeaseSpec::default()
        },
        "released on the {} server",
        server.name()
    );
}

/// Waits until the async `check` holds (polling every 50 ms, up to [`PATIENCE`]).
async fn eventually<F: std::future::Future<Output = bool>>(check: impl FnMut() -> F) -> bool {
    fixture::eventually(PATIENCE, check).await
}

/// The `mirror-v0-2` guest (contract 0.2, on the Rust SDK) reconciling through the host's
/// workqueue and writing through the host's write client: for a labelled ConfigMap it creates
/// `NAME-mirror` owned by it, follows its data, undoes a change to the mirror (the
/// controlling-owner queue rule) and restores a deleted mirror.
async fn the_mirror_controller_creates_follows_and_restores_what_it_owns(server: TestServer) {
    let ns = server.namespace("mirror").await;
    let config_maps: Api<ConfigMap> = Api::namespaced(server.client(), &ns);
    let plugin = format!("mirror-{}", server.name());
    let config_map_grant = ResourcePattern::new("", "ConfigMap");
    let policy = PluginPolicy {
        writes: WriteGrants::only(vec![
            WriteGrant::new(config_map_grant, None).expect("grant"),
        ]),
        config: plugin.clone(),
        ..PluginPolicy::default()
    };
    let env = Env::new(server, move |_: &Path| policy.clone());
    env.load("mirror.wasm", guest_bytes("mirror-v0-2")).await;
    let value = |name: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            config_maps
                .get_opt(name)
                .await
                .expect("get ConfigMap")
                .and_then(|cm| cm.data?.get("v").cloned())
        }
    };
    let set = |name: &'static str, v: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            let patch = json!({"data": {"v": v}});
            config_maps
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("patch ConfigMap");
        }
    };
    let mut source = config_map("src", "blue", 1);
    source
        .metadata
        .labels
        .get_or_insert_default()
        .insert("kubewasm.io/mirror".into(), "true".into());
    let source = config_maps
        .create(&PostParams::default(), &source)
        .await
        .expect("create the source");
    config_maps
        .create(&PostParams::default(), &config_map("plain", "blue", 1))
        .await
        .expect("create an unlabelled ConfigMap");
    let server_name = env.server.name();
    assert!(
        eventually(|| async { value("src-mirror").await.as_deref() == Some("1") }).await,
        "{server_name} server: no mirror"
    );
    let mirror = config_maps.get("src-mirror").await.expect("the mirror");
    let owners = mirror.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("ConfigMap", "src")
    );
    assert_eq!(Some(owners[0].uid.clone()), source.metadata.uid);
    assert_eq!(owners[0].controller, Some(true));
    // The plugin is the field manager of its create. The dev server records a non-apply
    // write in managedFields only on an object that already has them (its documented
    // difference), so this is checked on the real server only.
    if server_name == "real" {
        let managers: Vec<_> = mirror
            .metadata
            .managed_fields
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| m.manager)
            .collect();
        // Named by its key (the file `mirror.wasm`), not the name it declares.
        assert_eq!(managers, ["mirror"]);
    }

    set("src", "2").await;
    assert!(
        eventually(|| async { value("src-mirror").await.as_deref() == Some("2") }).await,
        "{server_name} server: the mirror does not follow its source"
    );
    set("src-mirror", "tampered").await;
    assert!(
        eventually(|| async { value("src-mirror").await.as_deref() == Some("2") }).await,
        "{server_name} server: tampering not undone"
    );
    config_maps
        .delete("src-mirror", &DeleteParams::default())
        .await
        .expect("delete the mirror");
    assert!(
        eventually(|| async { value("src-mirror").await.as_deref() == Some("2") }).await,
        "{server_name} server: the mirror was not restored"
    );
    // The unlabelled ConfigMap was reconciled, and left alone.
    let reconciled = format!("RECONCILED {ns}/plain ");
    assert!(
        wait_until(PATIENCE, || guest_logs()
            .lines(&plugin)
            .iter()
            .any(|l| l.starts_with(&reconciled)))
        .await
    );
    assert_eq!(value("plain-mirror").await, None);
    env.stop().await;
}

/// The Foo CRD of `examples/manifests/50-foo-crd.yaml`, as JSON, with its API approval
/// annotation (`samplecontroller.k8s.io` is a protected group) or without.
fn foo_crd(approved: bool) -> CustomResourceDefinition {
    let annotations = if approved {
        json!({"api-approved.kubernetes.io": "unapproved, experimental-only"})
    } else {
        json!({})
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.samplecontroller.k8s.io", "annotations": annotations},
        "spec": {
            "group": "samplecontroller.k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "Foo", "plural": "foos", "singular": "foo"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "deploymentName": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                        }},
                        "status": {"type": "object", "properties": {
                            "availableReplicas": {"type": "integer"},
                        }},
                    },
                }},
            }],
        },
    }))
    .expect("the Foo CRD")
}

/// The sample-controller example (`examples-guests/rust/sample-controller`) with the write grants
/// of `examples/kubewasm-dev.toml`: a Foo gets its Deployment (owner reference set), a change of
/// `spec.replicas` scales it, a Deployment deleted by hand comes back, the Foo's status follows
/// the Deployment's (no controller-manager runs with envtest: the test writes the Deployment's
/// status itself, on both servers), and a Deployment the Foo does not own is left alone with an
/// Event saying so. Deleting the Foo takes its Deployment with it on the dev server only: envtest
/// runs no garbage collector.
async fn the_sample_controller_owns_scales_restores_and_reports(server: TestServer) {
    let ns = server.namespace("samples").await;
    let crds = Api::<CustomResourceDefinition>::all(server.client());
    // A CRD in a protected group (*.k8s.io) needs the API approval annotation.
    let refused = crds.create(&PostParams::default(), &foo_crd(false)).await;
    let Err(kube::Error::Api(status)) = &refused else {
        panic!("{} server: {refused:?}", server.name())
    };
    let causes = status.details.as_ref().map(|d| d.causes.clone());
    let field = causes
        .as_ref()
        .and_then(|c| c.first())
        .map(|c| (c.reason.as_str(), c.field.as_str()));
    assert_eq!(
        (status.code, field),
        (
            422,
            Some((
                "FieldValueRequired",
                "metadata.annotations[api-approved.kubernetes.io]"
            ))
        ),
        "{} server: {status:?}",
        server.name()
    );
    crds.create(&PostParams::default(), &foo_crd(true))
        .await
        .expect("create the Foo CRD");
    let foo_gvk = GroupVersionKind::gvk("samplecontroller.k8s.io", "v1alpha1", "Foo");
    let foos: Api<DynamicObject> = Api::namespaced_with(
        server.client(),
        &ns,
        &ApiResource::from_gvk_with_plural(&foo_gvk, "foos"),
    );
    assert!(
        eventually(|| async { foos.list(&ListParams::default()).await.is_ok() }).await,
        "{} server never served foos",
        server.name()
    );
    let deployments: Api<Deployment> = Api::namespaced(server.client(), &ns);
    let events: Api<DynamicObject> = Api::namespaced_with(
        server.client(),
        &ns,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
    );
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
    let env = Env::new(server, move |_: &Path| policy.clone());
    let server_name = env.server.name();
    env.load("sample-controller.wasm", guest_bytes("sample-controller"))
        .await;
    let new_foo = |name: &str, deployment: &str, replicas: u32| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name},
            "spec": {"deploymentName": deployment, "replicas": replicas},
        }))
        .expect("a Foo")
    };
    let replicas = |name: &'static str| {
        let deployments = deployments.clone();
        async move {
            deployments
                .get_opt(name)
                .await
                .expect("get Deployment")
                .and_then(|d| d.spec?.replicas)
        }
    };
    let available = |name: &'static str| {
        let foos = foos.clone();
        async move {
            foos.get(name).await.expect("get Foo").data["status"]["availableReplicas"].as_i64()
        }
    };

    // A Foo gets its Deployment, owned by it, and a status of 0 available replicas.
    let alpha = foos
        .create(&PostParams::default(), &new_foo("alpha", "alpha", 1))
        .await
        .expect("create a Foo");
    assert!(
        eventually(|| async { replicas("alpha").await == Some(1) }).await,
        "{server_name} server: no Deployment"
    );
    let deployment = deployments.get("alpha").await.expect("the Deployment");
    let owner = &deployment.metadata.owner_references.unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Foo", "alpha", Some(true))
    );
    assert_eq!(Some(owner.uid.clone()), alpha.metadata.uid);
    assert!(
        eventually(|| async { available("alpha").await == Some(0) }).await,
        "{server_name} server: no status on the Foo"
    );

    // Scaling the Foo scales its Deployment.
    foos.patch(
        "alpha",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale the Foo");
    assert!(
        eventually(|| async { replicas("alpha").await == Some(3) }).await,
        "{server_name} server: the Deployment was not scaled"
    );

    // The Foo's status follows the Deployment's: 0, then 2.
    let status = json!({"status": {
        "replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
    }});
    deployments
        .patch_status("alpha", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the Deployment's status");
    assert!(
        eventually(|| async { available("alpha").await == Some(2) }).await,
        "{server_name} server: the Foo's status did not follow"
    );

    // A Deployment deleted by hand comes back, at the Foo's scale.
    deployments
        .delete("alpha", &DeleteParams::default())
        .await
        .expect("delete the Deployment");
    assert!(
        eventually(|| async { replicas("alpha").await == Some(3) }).await,
        "{server_name} server: the Deployment was not restored"
    );

    // A Deployment no Foo owns is left alone, and an Event on the Foo says so.
    let web: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]},
            },
        },
    }))
    .expect("a Deployment");
    deployments
        .create(&PostParams::default(), &web)
        .await
        .expect("create the unowned Deployment");
    foos.create(&PostParams::default(), &new_foo("squatter", "web", 5))
        .await
        .expect("create a Foo naming it");
    assert!(
        eventually(|| async {
            events
                .list(&ListParams::default())
                .await
                .expect("list Events")
                .items
                .iter()
                .any(|e| {
                    e.data["reason"] == json!("ErrResourceExists")
                        && e.data["involvedObject"]["name"] == json!("squatter")
                        && e.data["involvedObject"]["kind"] == json!("Foo")
                        && e.data["type"] == json!("Warning")
                })
        })
        .await,
        "{server_name} server: no Event about the unowned Deployment"
    );
    let web = deployments.get("web").await.expect("web");
    assert_eq!(web.spec.and_then(|s| s.replicas), Some(1));
    assert!(web.metadata.owner_references.unwrap_or_default().is_empty());

    // The cascade: only the dev server collects garbage.
    if server_name == "dev" {
        foos.delete("alpha", &DeleteParams::background())
            .await
            .expect("delete the Foo");
        assert!(
            eventually(|| async { replicas("alpha").await.is_none() }).await,
            "the dev server's garbage collector left the Deployment"
        );
    }
    env.stop().await;
}

/// Sharded leader election (4 shards): two replicas split the shards 2/2 through their member
/// Leases (applied, listed by label); when one stops, it releases its shards and deletes its
/// member Lease, and the other leads all four.
async fn sharded_replicas_split_the_shards_and_one_takes_all_when_the_other_stops(
    server: TestServer,
) {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::ListParams;
    use kubewasm::leader::{ElectionOptions, spawn_sharded};
    use tokio_util::sync::CancellationToken;

    let namespace = server.namespace("sharded-election").await;
    let client = server.client();
    let start = |identity: &str| {
        let options = ElectionOptions {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
            ..ElectionOptions::new("kubewasm", &namespace, identity)
        };
        let cancel = CancellationToken::new();
        let sharded =
            spawn_sharded(&client, options, 4, None, cancel.clone()).expect("valid options");
        (sharded, cancel)
    };
    let led = |gate: &kubewasm_runtime::LeaderGate| gate.led_shards().len();
    let (a, _stop_a) = start("a");
    let (b, stop_b) = start("b");
    let split = wait_until(PATIENCE, || led(&a.gate) == 2 && led(&b.gate) == 2).await;
    assert!(
        split,
        "no 2/2 split on the {} server: {:?} {:?}",
        server.name(),
        a.gate.led_shards(),
        b.gate.led_shards()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let members = leases
        .list(&ListParams::default().labels("kubewasm.io/lease-group=kubewasm"))
        .await
        .expect("member leases");
    assert_eq!(members.items.len(), 2, "{}", server.name());

    stop_b.cancel();
    for task in b.tasks {
        task.await.expect("b stops");
    }
    let all = wait_until(PATIENCE, || led(&a.gate) == 4).await;
    assert!(
        all,
        "a never led every shard on the {} server",
        server.name()
    );
    let members = leases
        .list(&ListParams::default().labels("kubewasm.io/lease-group=kubewasm"))
        .await
        .expect("member leases");
    assert_eq!(
        members.items.len(),
        1,
        "b's member Lease deleted on the {} server",
        server.name()
    );
}
