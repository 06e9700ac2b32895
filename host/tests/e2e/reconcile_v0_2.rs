//! End-to-end tests of contract 0.2 plugins: the mirror guest (built on the 0.2 Rust SDK)
//! loaded into a `PluginHost` beside the shared informers, reconciling through the host-owned
//! workqueue and writing through the host's write client, against the dev API server through
//! kube's client.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::DeleteParams;
use kubewasm_devserver::DevServer;
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{
    Grants, PluginHost, PluginPolicy, ResourcePattern, WriteGrant, WriteGrants,
};
use kubewasm_tests::{guest_bytes, guest_logs, variant, wait_until};

use crate::fixture::{DevRig, config_map, create, policy_by_file, replace_data};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

const LABEL: (&str, &str) = ("kubewasm.io/mirror", "true");

struct Env {
    server: DevServer,
    _factory: SharedInformerFactory,
    host: PluginHost,
    config_maps: Api<ConfigMap>,
}

/// The mirror guest's policy: reads ConfigMaps; writes them when `writes`.
fn policy(name: &str, writes: bool) -> PluginPolicy {
    let config_maps = ResourcePattern::new("", "ConfigMap");
    PluginPolicy {
        grants: Grants::only(vec![config_maps.clone()]),
        writes: if writes {
            WriteGrants::only(vec![WriteGrant::new(config_maps, None).expect("grant")])
        } else {
            WriteGrants::none()
        },
        config: name.to_owned(),
        ..PluginPolicy::default()
    }
}

impl Env {
    async fn new(policy: PluginPolicy) -> Env {
        Env::with(move |_: &Path| policy.clone()).await
    }

    /// An environment whose plugins' policies `policy` gives by file.
    async fn with(policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static) -> Env {
        let rig = DevRig::start(policy_by_file(policy)).await;
        Env {
            config_maps: rig.config_maps(),
            server: rig.server,
            _factory: rig.factory,
            host: rig.host,
        }
    }

    async fn load(&self) -> kubewasm_runtime::PluginId {
        let id = self
            .host
            .load(Path::new("mirror.wasm"), guest_bytes("mirror-v0-2"))
            .await
            .unwrap_or_else(|e| panic!("loading the mirror: {e}"));
        assert!(wait_until(PATIENCE, || self.host.ready()).await);
        id
    }

    async fn create(&self, name: &str, labels: &[(&str, &str)], value: &str) -> String {
        create(
            &self.config_maps,
            &config_map(name, labels, &[("v", value)]),
        )
        .await
    }

    async fn set(&self, name: &str, value: &str) -> String {
        replace_data(&self.config_maps, name, &[("v", value)]).await
    }

    /// The value of `v` in ConfigMap `name`, `None` when it does not exist.
    async fn value(&self, name: &str) -> Option<String> {
        let cm = self
            .config_maps
            .get_opt(name)
            .await
            .expect("get ConfigMap")?;
        cm.data.and_then(|d| d.get("v").cloned())
    }

    async fn wait_value(&self, name: &str, want: Option<&str>) -> bool {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while tokio::time::Instant::now() < deadline {
            if self.value(name).await.as_deref() == want {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

fn reconciled(plugin: &str, line: &str) -> bool {
    guest_logs()
        .lines(plugin)
        .iter()
        .any(|l| l == &format!("RECONCILED {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_creates_updates_and_restores_the_mirrors_it_owns() {
    let env = Env::new(policy("mirror", true)).await;
    env.load().await;
    env.create("a", &[LABEL], "one").await;
    env.create("plain", &[], "x").await;
    assert!(
        env.wait_value("a-mirror", Some("one")).await,
        "mirror created"
    );
    let mirror = env.config_maps.get("a-mirror").await.expect("mirror");
    let source = env.config_maps.get("a").await.expect("source");
    let owners = mirror.metadata.owner_references.expect("owner references");
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "ConfigMap");
    assert_eq!(owners[0].name, "a");
    assert_eq!(Some(owners[0].uid.clone()), source.metadata.uid);
    assert_eq!(owners[0].controller, Some(true));

    env.set("a", "two").await;
    assert!(
        env.wait_value("a-mirror", Some("two")).await,
        "mirror follows its source"
    );

    // A change to the mirror queues its owner (the Owns rule), which puts it right.
    env.set("a-mirror", "tampered").await;
    assert!(
        env.wait_value("a-mirror", Some("two")).await,
        "tampering undone"
    );

    env.config_maps
        .delete("a-mirror", &DeleteParams::default())
        .await
        .expect("delete the mirror");
    assert!(
        env.wait_value("a-mirror", Some("two")).await,
        "mirror restored"
    );

    // The unlabelled ConfigMap was reconciled and left alone.
    let plain_seen = || {
        guest_logs()
            .lines("mirror")
            .iter()
            .any(|l| l.starts_with("RECONCILED default/plain "))
    };
    assert!(wait_until(PATIENCE, plain_seen).await);
    assert_eq!(env.value("plain-mirror").await, None);

    // The handlers of the events subscription received the same changes.
    let logged = |line: &str| guest_logs().lines("mirror").iter().any(|l| l == line);
    for line in [
        "EVENT add a",
        "EVENT add plain",
        "EVENT update a",
        "EVENT delete a-mirror",
    ] {
        assert!(wait_until(PATIENCE, || logged(line)).await, "no {line}");
    }

    // Its status counts the calls: every reconcile and handler call returned, none faulted.
    let status = env
        .host
        .plugins()
        .into_iter()
        .find(|p| p.name == "mirror")
        .expect("status");
    assert!(status.events_delivered >= 4, "{status:?}");
    assert!(status.reconciles >= 4, "{status:?}");
    assert_eq!(
        (status.traps, status.timeouts, status.memory_faults),
        (0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_the_write_grant_is_refused_and_never_writes() {
    let env = Env::new(policy("mirror-ro", false)).await;
    env.load().await;
    env.create("b", &[LABEL], "one").await;
    assert!(
        wait_until(PATIENCE, || guest_logs()
            .lines("mirror-ro")
            .iter()
            .any(|l| l.starts_with("REFUSED NotGranted")))
        .await,
        "the guest got not-granted: {:?}",
        guest_logs().lines("mirror-ro")
    );
    // Refused writes are retried with backoff: still refused, nothing written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.value("b-mirror").await, None);
    let refusals = guest_logs()
        .lines("mirror-ro")
        .iter()
        .filter(|l| l.starts_with("REFUSED NotGranted"))
        .count();
    assert!(refusals >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_changed_during_reloads_is_reconciled_after_its_last_change() {
    let env = Arc::new(Env::new(policy("mirror", true)).await);
    let id = env.load().await;
    const KEYS: usize = 20;
    for i in 0..KEYS {
        env.create(&format!("k{i}"), &[], "0").await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let env = env.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut last = BTreeMap::new();
            let mut round = 0u32;
            while !stop.load(Ordering::Acquire) {
                round += 1;
                for i in 0..KEYS {
                    let name = format!("k{i}");
                    let rv = env.set(&name, &round.to_string()).await;
                    last.insert(name, rv);
                }
            }
            last
        })
    };
    let bytes = guest_bytes("mirror-v0-2");
    for n in 0..10 {
        env.host
            .replace(id, variant(&bytes, n))
            .await
            .expect("replace");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    stop.store(true, Ordering::Release);
    let last = writer.await.expect("writer");
    // Deletes while the plugin is being replaced are reconciled (and found gone).
    let gone = ["k0", "k1", "k2"];
    let replacing = {
        let env = env.clone();
        let bytes = variant(&bytes, 99);
        tokio::spawn(async move { env.host.replace(id, bytes).await })
    };
    for name in gone {
        env.config_maps
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    replacing.await.expect("join").expect("replace");
    for (name, rv) in &last {
        let want = if gone.contains(&name.as_str()) {
            format!("default/{name} gone")
        } else {
            format!("default/{name} {rv}")
        };
        assert!(
            wait_until(PATIENCE, || reconciled("mirror", &want)).await,
            "{want} never reconciled"
        );
    }
}

/// Components of the 0.2 worlds `observer` (handlers only) and `reconciler` (reconcile only)
/// load and run; a declaration its world cannot honour (queue rules without `reconcile`,
/// events without handlers) is refused, naming the world.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observer_and_reconciler_only_components_load_and_run() {
    let env = Env::with(|file: &Path| {
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        let config = match &*stem {
            "bad-observer" => r#"{"queue": true}"#,
            "bad-reconciler" => r#"{"events": true}"#,
            _ => r#"{"namespace": "default"}"#,
        };
        PluginPolicy {
            grants: Grants::only(vec![ResourcePattern::new("", "ConfigMap")]),
            config: config.to_owned(),
            ..PluginPolicy::default()
        }
    })
    .await;
    for name in ["a", "b", "c"] {
        env.create(name, &[], "v").await;
    }
    let observer = env
        .host
        .load(Path::new("observer.wasm"), guest_bytes("observer-v0-2"))
        .await
        .expect("an observer-only component loads");
    let reconciler = env
        .host
        .load(Path::new("reconciler.wasm"), guest_bytes("reconciler-v0-2"))
        .await
        .expect("a reconciler-only component loads");
    let calls = |id| {
        env.host
            .plugins()
            .iter()
            .find(|p| p.id == id)
            .map_or((0, 0), |p| (p.events_delivered, p.reconciles))
    };
    // The observer's handlers are called for the replay, the reconciler reconciles each key;
    // reconciles are not counted as events.
    assert!(
        wait_until(PATIENCE, || calls(observer) == (3, 0)
            && calls(reconciler) == (0, 3))
        .await
    );
    env.create("d", &[], "v").await;
    assert!(
        wait_until(PATIENCE, || calls(observer) == (4, 0)
            && calls(reconciler) == (0, 4))
        .await
    );
    assert!(env.host.ready());
    let statuses = env.host.plugins();
    assert!(statuses.iter().all(|p| p.errors == 0 && p.traps == 0));

    for (file, package, world) in [
        ("bad-observer.wasm", "observer-v0-2", "`observer`"),
        ("bad-reconciler.wasm", "reconciler-v0-2", "`reconciler`"),
    ] {
        let err = env
            .host
            .load(Path::new(file), guest_bytes(package))
            .await
            .expect_err("a declaration the world cannot honour is refused")
            .to_string();
        assert!(err.contains(file) && err.contains(world), "{err}");
    }
    env.host.unload(observer).await;
    env.host.unload(reconciler).await;
    assert!(env.host.plugins().is_empty());
}

/// A subscription whose namespace would address another resource (`default/secrets?x=` once
/// made the informer list and watch Secrets) is refused by `run`, `kubewasm check` and
/// `kubewasm rbac` alike, with a message naming the plugin and the value, and nothing is
/// requested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_namespace_that_escapes_is_refused_by_run_check_and_rbac() {
    let escape = "default/secrets?x=";
    let config =
        |namespace: &str| serde_json::json!({"name": "escape", "namespace": namespace}).to_string();
    let env = Env::new(PluginPolicy {
        grants: Grants::only(vec![ResourcePattern::new("", "ConfigMap")]),
        config: config(escape),
        ..PluginPolicy::default()
    })
    .await;
    env.server.clear_requests();
    let refused = env
        .host
        .load(Path::new("escape.wasm"), guest_bytes("reconciler-v0-2"))
        .await
        .expect_err("run refuses the subscription")
        .to_string();
    assert!(
        refused.contains("`escape`") && refused.contains(escape),
        "{refused}"
    );
    assert!(env.host.plugins().is_empty());
    assert_eq!(
        env.server.requests(),
        Vec::new(),
        "nothing was listed or watched"
    );

    let dir = tempfile::tempdir().expect("temporary directory");
    let toml = format!(
        "[plugins.escape]\nconfig = '{}'\ngrants = [\"ConfigMap\"]\n\n\
         [plugins.valid]\nconfig = '{}'\ngrants = [\"ConfigMap\"]\n",
        config(escape),
        config("team-a")
    );
    let config =
        kubewasm::config::Config::parse(&toml, Path::new("kubewasm.toml")).expect("config");
    for file in ["escape.wasm", "valid.wasm"] {
        std::fs::write(dir.path().join(file), guest_bytes("reconciler-v0-2")).expect("write");
    }
    let checked = kubewasm::inspect::inspect_file(&dir.path().join("escape.wasm"), &config).await;
    let refused = format!("{:#}", checked.expect_err("check refuses the subscription"));
    assert!(
        refused.contains("`escape`") && refused.contains(escape),
        "{refused}"
    );
    let valid = kubewasm::inspect::inspect_file(&dir.path().join("valid.wasm"), &config).await;
    assert!(valid.is_ok(), "{valid:?}");

    let found = kubewasm::inspect::needs_of_dir(dir.path(), &config, Vec::new())
        .await
        .expect("rbac reads the directory");
    let rejected: Vec<String> = found
        .rejected
        .iter()
        .map(|(path, err)| format!("{}: {err:#}", path.display()))
        .collect();
    assert!(
        rejected.len() == 1 && rejected[0].contains("escape.wasm") && rejected[0].contains(escape),
        "{rejected:?}"
    );
    let namespaces: Vec<Option<&str>> = found
        .needs
        .iter()
        .map(|n| n.namespace.as_ref().map(|ns| ns.as_str()))
        .collect();
    assert_eq!(namespaces, [Some("team-a")], "only the valid plugin's Role");
}
