//! End-to-end tests of the 0.2.1 `batch-handler`: the `batch-observer` guest loaded into a
//! `PluginHost` beside the shared informers, against the dev API server through kube's client.
//! Events arrive in batches, in order, each once; failures are counted per event; a fault in a
//! batch restarts the instance, which is replayed the cache one event per call (flagged
//! initial-list), the object that faults twice is quarantined, as for every contract version.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kubewasm_devserver::DevServer;
use kubewasm_informer::SharedInformerFactory;
use kubewasm_runtime::{Grants, PluginHost, PluginId, PluginPolicy, PluginStatus, ResourcePattern};
use kubewasm_tests::{guest_bytes, guest_logs, wait_until};
use serde_json::json;

use crate::fixture::{DevRig, config_map, create, dropped, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

struct Env {
    _server: DevServer,
    _factory: SharedInformerFactory,
    host: PluginHost,
    config_maps: Api<ConfigMap>,
}

impl Env {
    /// A host whose plugins get `config` (the guest's JSON config) and read ConfigMaps.
    async fn new(config: serde_json::Value) -> Env {
        let policy = PluginPolicy {
            grants: Grants::only(vec![ResourcePattern::new("", "ConfigMap")]),
            config: config.to_string(),
            ..PluginPolicy::default()
        };
        let rig = DevRig::start(policy_by_file(move |_: &Path| policy.clone())).await;
        Env {
            config_maps: rig.config_maps(),
            _server: rig.server,
            _factory: rig.factory,
            host: rig.host,
        }
    }

    async fn create(&self, name: &str) {
        create(&self.config_maps, &config_map(name, &[], &[("v", "1")])).await;
    }

    async fn load(&self) -> PluginId {
        self.host
            .load(Path::new("batch.wasm"), guest_bytes("batch-observer"))
            .await
            .expect("a batch-observer component loads")
    }

    fn status(&self, id: PluginId) -> PluginStatus {
        self.host
            .plugins()
            .into_iter()
            .find(|p| p.id == id)
            .expect("the plugin is loaded")
    }

    async fn wait_delivered(&self, id: PluginId, n: u64) -> bool {
        wait_until(PATIENCE, || self.status(id).events_delivered >= n).await
    }
}

/// What the guest logged, as (kind, name, size of the batch it came in, its flag).
fn logged(plugin: &str) -> Vec<(String, String, usize, bool)> {
    guest_logs()
        .lines(plugin)
        .into_iter()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let (kind, name, size) = (parts.next()?, parts.next()?, parts.next()?);
            let flag = parts.next()? == "flag=true";
            Some((kind.to_owned(), name.to_owned(), size.parse().ok()?, flag))
        })
        .collect()
}

#[tokio::test]
async fn a_batch_observer_gets_every_event_once_in_order_and_failures_per_event() {
    let env = Env::new(json!({
        "name": "batched",
        "namespace": "default",
        "log": true,
        "failOn": "bad",
    }))
    .await;
    let mut names: Vec<String> = (0..200).map(|i| format!("cm-{i:03}")).collect();
    names.extend(["bad-1".to_owned(), "bad-2".to_owned()]);
    for name in &names {
        env.create(name).await;
    }
    let id = env.load().await;
    assert!(env.wait_delivered(id, names.len() as u64).await);
    assert!(wait_until(PATIENCE, || env.host.ready()).await);

    let replay = logged("batch");
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (kind, name, _, _) in &replay {
        assert_eq!(kind, "ADD", "{replay:?}");
        *seen.entry(name.as_str()).or_default() += 1;
    }
    for name in &names {
        assert_eq!(seen.get(name.as_str()), Some(&1), "{name} in {replay:?}");
    }
    assert_eq!(seen.len(), names.len());
    let largest = replay
        .iter()
        .map(|(_, _, size, _)| *size)
        .max()
        .unwrap_or(0);
    assert!(
        largest > 1,
        "the replay of {} objects came one event per call",
        names.len()
    );
    let status = env.status(id);
    assert_eq!(status.events_delivered, names.len() as u64);
    assert_eq!(status.errors, 2, "one error per failed event: {status:?}");
    assert_eq!(status.traps, 0);

    // Live events: an object's add, update and delete arrive in that order.
    env.create("late").await;
    let mut cm = env.config_maps.get("late").await.expect("get");
    cm.data = Some(BTreeMap::from([("v".to_owned(), "2".to_owned())]));
    env.config_maps
        .replace("late", &PostParams::default(), &cm)
        .await
        .expect("update");
    env.config_maps
        .delete("late", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(env.wait_delivered(id, names.len() as u64 + 3).await);
    let late: Vec<String> = logged("batch")
        .into_iter()
        .filter(|(_, name, _, _)| name == "late")
        .map(|(kind, _, _, _)| kind)
        .collect();
    assert_eq!(late, ["ADD", "UPDATE", "DELETE"]);
    env.host.unload(id).await;
}

#[tokio::test]
async fn a_fault_in_a_batch_restarts_the_instance_with_the_replay_and_quarantines_the_poison() {
    let env = Env::new(json!({
        "name": "poisoned",
        "namespace": "default",
        "log": true,
        "trapOn": "poison",
    }))
    .await;
    let healthy: Vec<String> = (0..200).map(|i| format!("cm-{i:03}")).collect();
    for name in healthy.iter().map(String::as_str).chain(["poison"]) {
        env.create(name).await;
    }
    let id = env.load().await;
    // The poison faults in a batch (or alone), then twice alone in the fresh instances'
    // replays, and is quarantined; the last instance completes its replay.
    assert!(
        wait_until(PATIENCE, || {
            let s = env.status(id);
            dropped(&s, "quarantined") == 1 && s.replay_done
        })
        .await,
        "{:?}",
        env.status(id)
    );
    let status = env.status(id);
    assert!((2..=3).contains(&status.traps), "{status:?}");
    assert_eq!(dropped(&status, "fault"), 2, "{status:?}");
    assert_eq!(status.restarts, status.traps, "{status:?}");
    assert!(!status.failed, "{status:?}");
    assert!(wait_until(PATIENCE, || env.host.ready()).await);

    // Every healthy object reached a fresh instance again, one per call, flagged as the
    // replay: the guest's state is rebuilt from the whole cache, not just the lost batch.
    let seen = logged("batch");
    for name in &healthy {
        assert!(
            seen.iter()
                .any(|(kind, n, size, flag)| kind == "ADD" && n == name && *size == 1 && *flag),
            "{name} was not replayed to a fresh instance"
        );
    }
    assert!(seen.iter().all(|(_, n, _, _)| n != "poison"));

    // Live events go on, in batches again once the replay is done.
    env.create("after").await;
    assert!(
        wait_until(PATIENCE, || logged("batch")
            .iter()
            .any(|(kind, n, _, flag)| kind == "ADD" && n == "after" && !flag))
        .await
    );
    env.host.unload(id).await;
}

#[tokio::test]
async fn a_guest_faulting_on_every_event_backs_off_and_ends_failed() {
    // Every name contains the empty string: every event traps.
    let env = Env::new(json!({"name": "hopeless", "namespace": "default", "trapOn": ""})).await;
    for i in 0..50 {
        env.create(&format!("cm-{i:02}")).await;
    }
    let id = env.load().await;
    // Restarts that never complete their replay back off (50, 100, 200, 400 ms) and the fifth
    // fault in a row puts the plugin in the failed state, tried again only rarely.
    assert!(wait_until(PATIENCE, || env.status(id).failed).await);
    let status = env.status(id);
    assert_eq!(status.traps, 5, "{status:?}");
    assert_eq!(dropped(&status, "fault"), status.traps, "{status:?}");
    assert_eq!(status.events_delivered, 0);
    assert!(
        env.host.ready(),
        "a failed plugin does not hold readiness back"
    );
    env.host.unload(id).await;
}
