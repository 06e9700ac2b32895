//! A guest of the 0.2 world `observer` only: `init` and no-op event handlers, no `reconcile`.
//! Its config (JSON, every field optional) chooses the plugin's name, the ConfigMaps' namespace
//! and a resync period: `{"name": "o", "namespace": "ns", "resyncSeconds": 1}`. With
//! `"queue": true` it declares a queue rule, which its world cannot honour (the host refuses
//! it).

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "observer",
});

use exports::kubewasm::controller::{handler, plugin};
use kubewasm::controller::types::{Gvk, PluginInfo, QueueRule, Subscription};

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    resync_seconds: Option<u32>,
    queue: bool,
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
            name: config.name.unwrap_or_else(|| "observer-v0-2".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: config.namespace,
                label_selector: None,
                field_selector: None,
                resync_seconds: config.resync_seconds,
                events: true,
                queue: if config.queue {
                    vec![QueueRule::OwnKey]
                } else {
                    Vec::new()
                },
            }],
            indexes: Vec::new(),
        })
    }
}

impl handler::Guest for Guest {
    fn on_add(_subscription: u32, _object: String, _in_initial_list: bool) -> Result<(), String> {
        Ok(())
    }

    fn on_update(_subscription: u32, _old: String, _new: String) -> Result<(), String> {
        Ok(())
    }

    fn on_delete(_subscription: u32, _object: String, _unknown: bool) -> Result<(), String> {
        Ok(())
    }
}

export!(Guest);
