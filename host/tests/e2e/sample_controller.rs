//! End-to-end scenarios of every sample-controller (contract 0.2.2: Rust, Go, Python) on one dev
//! server seeded with `examples/manifests`, each with the write grants of its
//! `examples/kubewasm-dev.toml` entry. The languages run one after the other, each alone in the
//! host and in a namespace of its own, through the same scenarios; every assertion is on the
//! cluster's state (objects and Events), never on log lines.
//!
//! A Foo (`samplecontroller.k8s.io/v1alpha1`) owns a Deployment named `spec.deploymentName` with
//! `spec.replicas` replicas; its `status.availableReplicas` follows the Deployment's; a
//! Deployment of that name it does not own is left alone and a Warning Event says so.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Api, Client};
use kubewasm_devserver::{DevServer, Verb};
use kubewasm_runtime::{
    HostOptions, PluginHost, PluginId, PluginPolicy, ResourcePattern, WriteGrant, WriteGrants,
};
use kubewasm_tests::{devserver, guest_bytes, guest_logs, variant, wait_until, workspace_root};
use serde_json::{Value, json};

use crate::fixture::{self, plugin_host, policy_by_file};

/// Bounds each wait; the Python component takes seconds to compile in a test build.
const PATIENCE: Duration = Duration::from_secs(60);

/// The most reconciles one fault scenario may take: a few per injected failure and per change
/// (each language took 12 or 13 when this was written). A hot loop (a reconcile that keeps
/// queueing itself, or retries without backoff) makes thousands in the time the scenario takes.
const RECONCILE_BUDGET: u64 = 60;

/// One sample-controller: its language (also its namespace), the name its `init` returns and
/// where its component comes from.
struct Case {
    language: &'static str,
    plugin: &'static str,
    component: fn() -> Vec<u8>,
}

const CASES: &[Case] = &[
    Case {
        language: "rust",
        plugin: "sample-controller",
        component: || guest_bytes("sample-controller"),
    },
    Case {
        language: "go",
        plugin: "sample-controller-go",
        component: || guest_bytes("sample-controller-go"),
    },
    Case {
        language: "python",
        plugin: "sample-controller-python",
        component: || guest_bytes("sample-controller-python"),
    },
];

async fn eventually<F: std::future::Future<Output = bool>>(check: impl FnMut() -> F) -> bool {
    fixture::eventually(PATIENCE, check).await
}

/// The policy of `examples/kubewasm-dev.toml`'s `[plugins.sample-controller]`: its write grants.
fn policy() -> PluginPolicy {
    let writes = ["apps/Deployment", "samplecontroller.k8s.io/Foo", "Event"]
        .iter()
        .map(|w| {
            let (group, kind) = w.split_once('/').unwrap_or(("", w));
            WriteGrant::new(ResourcePattern::new(group, kind), None).expect("grant")
        })
        .collect();
    PluginPolicy {
        writes: WriteGrants::only(writes),
        ..PluginPolicy::default()
    }
}

/// One language's controller loaded alone into a host over the shared dev server, and the
/// namespace its scenarios use.
struct Rig<'a> {
    server: &'a DevServer,
    client: Client,
    host: PluginHost,
    id: PluginId,
    case: &'a Case,
    bytes: Vec<u8>,
    foos: Api<DynamicObject>,
    deployments: Api<Deployment>,
}

impl<'a> Rig<'a> {
    async fn start(server: &'a DevServer, client: &Client, case: &'a Case) -> Rig<'a> {
        let policy = policy();
        let (_, host) = plugin_host(
            client,
            HostOptions {
                // Shared with the other polyglot tests: the Go and Python components (and the
                // reload's variant) compile once, not on every run.
                cache_dir: fixture::shared_compile_cache(),
                ..policy_by_file(move |_: &Path| policy.clone())
            },
        );
        let bytes = (case.component)();
        let id = host
            .load(Path::new(&format!("{}.wasm", case.plugin)), bytes.clone())
            .await
            .unwrap_or_else(|e| panic!("{}: loading: {e}", case.language));
        let foo_resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "samplecontroller.k8s.io",
            "v1alpha1",
            "Foo",
        ));
        Rig {
            server,
            client: client.clone(),
            host,
            id,
            case,
            bytes,
            foos: Api::namespaced_with(client.clone(), case.language, &foo_resource),
            deployments: Api::namespaced(client.clone(), case.language),
        }
    }

    fn ns(&self) -> &str {
        self.case.language
    }

    /// Reconcile (and handler) calls the plugin returned from so far, as the host counts them.
    fn reconciles(&self) -> u64 {
        self.host
            .plugins()
            .into_iter()
            .find(|p| p.id == self.id)
            .map_or(0, |p| p.events_delivered + p.reconciles)
    }

    /// Creates a Foo by server-side apply (a patch, so that failures injected on creates hit
    /// the controller's writes only).
    async fn create_foo(&self, name: &str, deployment: &str, replicas: i64) {
        let object = json!({
            "apiVersion": "samplecontroller.k8s.io/v1alpha1",
            "kind": "Foo",
            "metadata": {"name": name, "namespace": self.ns()},
            "spec": {"deploymentName": deployment, "replicas": replicas},
        });
        self.foos
            .patch(
                name,
                &PatchParams::apply("sample-controller-test"),
                &Patch::Apply(object),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: creating Foo {name}: {e}", self.ns()));
    }

    async fn scale_foo(&self, name: &str, replicas: i64) {
        self.foos
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: scaling Foo {name}: {e}", self.ns()));
    }

    async fn replicas(&self, deployment: &str) -> Option<i32> {
        let d = self.deployments.get_opt(deployment).await.ok()??;
        d.spec?.replicas
    }

    /// Waits until the Deployment exists with `replicas` (`None`: until it is gone).
    async fn expect_replicas(&self, deployment: &str, replicas: Option<i32>, what: &str) {
        let reached = eventually(|| async { self.replicas(deployment).await == replicas }).await;
        assert!(
            reached,
            "{}: {what}: Deployment {deployment} has {:?} replicas, not {replicas:?}",
            self.ns(),
            self.replicas(deployment).await
        );
    }

    async fn foo_status(&self, name: &str) -> Value {
        match self.foos.get_opt(name).await {
            Ok(Some(object)) => object.data["status"]["availableReplicas"].clone(),
            _ => Value::Null,
        }
    }

    async fn expect_foo_status(&self, name: &str, available: i64, what: &str) {
        let reached =
            eventually(|| async { self.foo_status(name).await == json!(available) }).await;
        assert!(
            reached,
            "{}: {what}: Foo {name} reports {} available, not {available}",
            self.ns(),
            self.foo_status(name).await
        );
    }

    /// Sets the Deployment's `status.availableReplicas` with a PUT of its status subresource
    /// (what the Deployment controller would do; the dev server runs no Pods).
    async fn set_available(&self, deployment: &str, available: i32) {
        let mut d = self.deployments.get(deployment).await.expect("deployment");
        d.status
            .get_or_insert_with(Default::default)
            .available_replicas = Some(available);
        d.metadata.managed_fields = None;
        self.deployments
            .replace_status(deployment, &PostParams::default(), &d)
            .await
            .expect("deployment status");
    }

    /// Requests of `verb` to Deployments in this namespace so far.
    fn deployment_requests(&self, verb: Verb) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| {
                r.verb == verb
                    && r.resource == "deployments"
                    && r.namespace.as_deref() == Some(self.ns())
            })
            .count()
    }

    async fn has_event(&self, about: &str, reason: &str) -> bool {
        let events: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            self.ns(),
            &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Event")),
        );
        events
            .list(&Default::default())
            .await
            .map(|list| {
                list.items.iter().any(|e| {
                    e.data["reason"] == json!(reason)
                        && e.data["involvedObject"]["name"] == json!(about)
                })
            })
            .unwrap_or(false)
    }

    /// Deletes every Foo left in the namespace (the garbage collector takes their Deployments)
    /// and unloads the plugin.
    async fn finish(self) {
        for object in self.foos.list(&Default::default()).await.expect("foos") {
            let name = object.metadata.name.unwrap_or_default();
            let _ = self.foos.delete(&name, &DeleteParams::default()).await;
        }
        self.host.unload(self.id).await;
        self.host.shutdown(Duration::from_secs(5)).await;
    }
}

/// Create, scale, restore a deleted Deployment, status written and following the Deployment's,
/// delete the owner (garbage collection), and an unowned Deployment left alone with an Event.
async fn lifecycle(rig: &Rig<'_>) {
    rig.create_foo("web", "web", 1).await;
    rig.expect_replicas("web", Some(1), "created").await;
    let owner = rig.foos.get("web").await.expect("foo");
    let d = rig.deployments.get("web").await.expect("deployment");
    let owners = d.metadata.owner_references.expect("owned");
    assert_eq!(owners.len(), 1, "{}: {owners:?}", rig.ns());
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].controller),
        ("Foo", Some(true))
    );
    assert_eq!(Some(owners[0].uid.clone()), owner.metadata.uid);
    assert!(
        eventually(|| rig.has_event("web", "Synced")).await,
        "{}: a Synced Event on the Foo",
        rig.ns()
    );

    // The Foo was created without a status: 0 is the controller's write, then it follows.
    rig.expect_foo_status("web", 0, "status written").await;
    rig.set_available("web", 1).await;
    rig.expect_foo_status("web", 1, "status follows").await;

    rig.scale_foo("web", 3).await;
    rig.expect_replicas("web", Some(3), "scaled").await;
    rig.set_available("web", 3).await;
    rig.expect_foo_status("web", 3, "status follows the scale")
        .await;

    rig.deployments
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    rig.expect_replicas("web", Some(3), "restored after a delete")
        .await;
    // A new Deployment has no status yet: the Foo's follows it back down.
    rig.expect_foo_status("web", 0, "status of the restored Deployment")
        .await;

    rig.foos
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete foo");
    rig.expect_replicas("web", None, "collected with its owner")
        .await;

    // A Deployment the Foo does not own is left alone, and an Event says so.
    let unowned: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "squat", "namespace": rig.ns()},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "squat"}},
            "template": {
                "metadata": {"labels": {"app": "squat"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }))
    .expect("deployment");
    rig.deployments
        .create(&PostParams::default(), &unowned)
        .await
        .expect("create unowned");
    rig.create_foo("squatter", "squat", 5).await;
    assert!(
        eventually(|| rig.has_event("squatter", "ErrResourceExists")).await,
        "{}: an Event says the Deployment is not the Foo's",
        rig.ns()
    );
    let d = rig.deployments.get("squat").await.expect("unowned");
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(2), "{}", rig.ns());
    assert_eq!(d.metadata.owner_references, None, "{}", rig.ns());
}

/// Injected 429 / 409 / 500 answers on the writes: the controller converges and its reconcile
/// count stays bounded.
async fn injected_errors(rig: &Rig<'_>) {
    let before = rig.reconciles();
    let creates = rig.deployment_requests(Verb::Create);
    rig.server.fail_next(Verb::Create, 3, 429);
    rig.create_foo("faulty", "faulty", 1).await;
    rig.expect_replicas("faulty", Some(1), "created through 429s")
        .await;
    assert!(
        rig.deployment_requests(Verb::Create) - creates >= 2,
        "{}: the create was retried after a 429",
        rig.ns()
    );
    rig.expect_foo_status("faulty", 0, "status written").await;

    let updates = rig.deployment_requests(Verb::Update);
    rig.server.fail_next(Verb::Update, 3, 409);
    rig.scale_foo("faulty", 4).await;
    rig.expect_replicas("faulty", Some(4), "scaled through 409s")
        .await;
    assert!(
        rig.deployment_requests(Verb::Update) - updates >= 2,
        "{}: the update was retried after a 409",
        rig.ns()
    );

    // Every sample-controller writes the Foo's status with a merge patch; the test's own
    // status write below is an update.
    rig.server.fail_next(Verb::Patch, 3, 500);
    rig.set_available("faulty", 4).await;
    rig.expect_foo_status("faulty", 4, "status written through 500s")
        .await;
    rig.server.fail_next(Verb::Patch, 0, 500);

    let spent = rig.reconciles() - before;
    assert!(
        spent <= RECONCILE_BUDGET,
        "{}: {spent} reconciles for three changes and nine failures: a hot loop",
        rig.ns()
    );
}

/// A burst of creates, scales and deletes with a new version of the plugin loaded in its
/// middle: the final state reflects every change.
async fn reload_in_a_burst(rig: &Rig<'_>) {
    const N: usize = 12;
    let name = |i: usize| format!("burst-{i}");
    for i in 0..N / 2 {
        rig.create_foo(&name(i), &name(i), 1).await;
    }
    let host = rig.host.clone();
    let (id, bytes) = (rig.id, variant(&rig.bytes, 1));
    let reload = tokio::spawn(async move { host.replace(id, bytes).await });
    for i in N / 2..N {
        rig.create_foo(&name(i), &name(i), 1).await;
    }
    for i in 0..N {
        rig.scale_foo(&name(i), 2).await;
    }
    for i in (0..N).step_by(4) {
        rig.foos
            .delete(&name(i), &DeleteParams::default())
            .await
            .expect("delete foo");
    }
    reload
        .await
        .expect("the reload task")
        .unwrap_or_else(|e| panic!("{}: reloading: {e}", rig.ns()));
    for i in 0..N {
        let want = if i % 4 == 0 { None } else { Some(2) };
        rig.expect_replicas(&name(i), want, "after the burst").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sample_controller_owns_its_deployments_and_reports_their_status() {
    guest_logs();
    let (server, client) = devserver().await;
    server
        .load_manifests(&workspace_root().join("examples/manifests"))
        .expect("manifests");
    for case in CASES {
        let rig = Rig::start(&server, &client, case).await;
        lifecycle(&rig).await;
        injected_errors(&rig).await;
        reload_in_a_burst(&rig).await;
        assert!(
            wait_until(PATIENCE, || rig.host.ready()).await,
            "{}: ready",
            case.language
        );
        rig.finish().await;
    }
}
