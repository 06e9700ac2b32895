//! A guest of the 0.2 world `reconciler` only: `init` and a no-op `reconcile`, no event
//! handlers. Its config (JSON, every field optional) chooses the plugin's name and the
//! ConfigMaps' namespace: `{"name": "r", "namespace": "ns"}`; each ConfigMap's own key is
//! queued. With `"events": true` it asks for events, which its world cannot take (the host
//! refuses it).

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "reconciler",
});

use exports::kubewasm::controller::{plugin, reconcile};
use kubewasm::controller::types::{Gvk, Key, PluginInfo, QueueRule, Subscription};

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    events: bool,
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        Ok(PluginInfo {
            name: config.name.unwrap_or_else(|| "reconciler-v0-2".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: config.namespace,
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: config.events,
                queue: vec![QueueRule::OwnKey],
            }],
            indexes: Vec::new(),
        })
    }
}

impl reconcile::Guest for Guest {
    fn reconcile(_key: Key) -> Result<reconcile::Action, String> {
        Ok(reconcile::Action::Done)
    }
}

export!(Guest);
