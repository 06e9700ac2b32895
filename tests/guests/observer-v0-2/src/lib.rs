//! A guest of the 0.2 world `observer` only: `init` and no-op event handlers, no `reconcile`.
//! Its config (JSON, every field optional) chooses the plugin's name, the ConfigMaps' namespace
//! and a resync period: `{"name": "o", "namespace": "ns", "resyncSeconds": 1}`. With
//! `"queue": true` it declares a queue rule, which its world cannot honour (the host refuses
//! it). With `"log": true` every add is logged as `ADD NAME initial=BOOL`; an object whose name
//! contains `"trapOn"` traps the instance in `on-add` (replayed or live).

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "observer",
});

use std::cell::RefCell;

use exports::kubewasm::controller::{handler, plugin};
use kubewasm::controller::log::{Level, log};
use kubewasm::controller::types::{Gvk, PluginInfo, QueueRule, Subscription};

#[derive(serde::Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    resync_seconds: Option<u32>,
    queue: bool,
    log: bool,
    trap_on: Option<String>,
}

/// What `on-add` watches for: whether to log, and the name part that traps.
#[derive(Default)]
struct Watch {
    log: bool,
    trap_on: Option<String>,
}

thread_local! {
    static WATCH: RefCell<Watch> = RefCell::default();
}

/// The object's `metadata.name` (empty when it has none).
fn name_of(json: &str) -> String {
    let object: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        WATCH.with(|w| {
            *w.borrow_mut() = Watch {
                log: config.log,
                trap_on: config.trap_on.clone(),
            }
        });
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
    fn on_add(_subscription: u32, object: String, in_initial_list: bool) -> Result<(), String> {
        WATCH.with(|w| {
            let w = w.borrow();
            if !w.log && w.trap_on.is_none() {
                return;
            }
            let name = name_of(&object);
            if w.trap_on.as_deref().is_some_and(|t| name.contains(t)) {
                panic!("trapping on {name}");
            }
            if w.log {
                log(
                    Level::Info,
                    &format!("ADD {name} initial={in_initial_list}"),
                );
            }
        });
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
