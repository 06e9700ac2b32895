//! The fault policy of a 0.2.0 `handler` guest (the `observer-v0-2` guest in a `PluginHost`
//! against the dev API server): the same as 0.1's and 0.2.1's, one event loop for all. An
//! instance that faults is replaced by a fresh one that is replayed the cache (`on-add` with
//! `in-initial-list`, as `wit/0.2/controller.wit` promises); an object version that faults twice
//! is quarantined.

use std::path::Path;
use std::time::Duration;

use kubewasm_runtime::{
    Grants, PluginId, PluginPolicy, PluginState, PluginStatus, ResourcePattern,
};
use kubewasm_tests::{guest_bytes, guest_logs, wait_until};
use serde_json::json;

use crate::fixture::{DevRig, config_map, create, dropped, policy_by_file};

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

fn status(rig: &DevRig, id: PluginId) -> PluginStatus {
    rig.host
        .plugins()
        .into_iter()
        .find(|p| p.id == id)
        .expect("the plugin is loaded")
}

/// How often the guest logged `line`.
fn times(plugin: &str, line: &str) -> usize {
    guest_logs()
        .lines(plugin)
        .iter()
        .filter(|l| l.as_str() == line)
        .count()
}

#[tokio::test]
async fn a_0_2_handler_that_traps_gets_the_replay_and_its_poison_is_quarantined() {
    let policy = PluginPolicy {
        grants: Grants::only(vec![ResourcePattern::new("", "ConfigMap")]),
        config: json!({"name": "rebuilt", "namespace": "default", "log": true, "trapOn": "poison"})
            .to_string(),
        ..PluginPolicy::default()
    };
    let rig = DevRig::start(policy_by_file(move |_: &Path| policy.clone())).await;
    let config_maps = rig.config_maps();
    let names: Vec<String> = (0..10).map(|i| format!("cm-{i}")).collect();
    for name in &names {
        create(&config_maps, &config_map(name, &[], &[])).await;
    }
    let id = rig
        .host
        .load(Path::new("observer.wasm"), guest_bytes("observer-v0-2"))
        .await
        .expect("an observer-v0-2 component loads");
    assert!(wait_until(PATIENCE, || status(&rig, id).replay_done).await);

    // A live object the guest traps on: the instance is replaced, the fresh one is replayed
    // the cache (the poison too, which traps again), then a third without the poison.
    create(&config_maps, &config_map("poison", &[], &[])).await;
    assert!(
        wait_until(PATIENCE, || {
            let s = status(&rig, id);
            dropped(&s, "quarantined") == 1 && s.replay_done
        })
        .await,
        "{:?}",
        status(&rig, id)
    );
    let s = status(&rig, id);
    assert_eq!(s.traps, 2, "{s:?}");
    assert_eq!(s.restarts, 2, "{s:?}");
    assert_eq!(dropped(&s, "fault"), 2, "{s:?}");
    assert_eq!(s.state, PluginState::Running);
    assert!(!s.failed);
    for name in &names {
        // Once on load, again for the last fresh instance (and for the one before it if it
        // came before the poison in the cache's order).
        let n = times("rebuilt", &format!("ADD {name} initial=true"));
        assert!(
            (2..=3).contains(&n),
            "{name} replayed {n} times: {:?}",
            guest_logs().lines("rebuilt")
        );
    }
    assert!(
        rig.logs
            .host_lines("observer")
            .iter()
            .any(|l| l.contains("made the plugin fail twice"))
    );

    create(&config_maps, &config_map("late", &[], &[])).await;
    assert!(
        wait_until(PATIENCE, || times("rebuilt", "ADD late initial=false") == 1).await,
        "{:?}",
        guest_logs().lines("rebuilt")
    );
    rig.host.unload(id).await;
}
