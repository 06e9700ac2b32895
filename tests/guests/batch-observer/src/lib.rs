//! A guest of the 0.2.1 world `batch-observer`: `init` and `on-events`, no `reconcile`.
//!
//! Its config (JSON, every field optional): `{"name": "b", "namespace": "ns", "resyncSeconds":
//! 1, "failOn": "x", "trapOn": "y", "log": true}`. An event whose object's name contains
//! `failOn` is answered as failed; one whose name contains `trapOn` traps the instance. With
//! `log`, every event handled is logged as `KIND NAME BATCH-SIZE flag=BOOL`, so a test sees what each
//! instance received and in which batches. Without those options it does nothing: the no-op
//! plugin of the dispatch benchmark.

wit_bindgen::generate!({
    path: ["../../../wit/0.2", "../../../wit/0.2.1"],
    world: "kubewasm:controller/batch-observer@0.2.1",
    generate_all,
});

use exports::kubewasm::controller0_2_0::plugin;
use exports::kubewasm::controller0_2_1::batch_handler::{self, EventBatch, EventError};
use kubewasm::controller0_2_0::log::{Level, log};
use kubewasm::controller0_2_0::types::{Gvk, PluginInfo, Subscription};

use std::cell::RefCell;

#[derive(serde::Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    resync_seconds: Option<u32>,
    fail_on: Option<String>,
    trap_on: Option<String>,
    log: bool,
}

thread_local! {
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let config: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        let info = PluginInfo {
            name: config
                .name
                .clone()
                .unwrap_or_else(|| "batch-observer".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: config.namespace.clone(),
                label_selector: None,
                field_selector: None,
                resync_seconds: config.resync_seconds,
                events: true,
                queue: Vec::new(),
            }],
            indexes: Vec::new(),
        };
        CONFIG.with(|c| *c.borrow_mut() = config);
        Ok(info)
    }
}

/// The object's `metadata.name`, read without parsing the rest.
fn name_of(json: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Meta {
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    serde_json::from_str::<Object>(json)
        .map(|o| o.metadata.name)
        .unwrap_or_default()
}

/// The JSON at `offset`, `len` in `documents`.
fn text(documents: &[u8], offset: u32, len: u32) -> &str {
    let start = offset as usize;
    documents
        .get(start..start + len as usize)
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .unwrap_or_else(|| panic!("an object outside the batch or not UTF-8"))
}

impl batch_handler::Guest for Guest {
    fn on_events(batch: EventBatch) -> Vec<EventError> {
        let config = CONFIG.with(|c| c.borrow().clone());
        let watching = config.log || config.fail_on.is_some() || config.trap_on.is_some();
        if !watching {
            return Vec::new();
        }
        let size = batch.events.len() / 6;
        let mut errors = Vec::new();
        for (index, event) in batch.events.chunks_exact(6).enumerate() {
            let kind = match event[1] & 3 {
                0 => "ADD",
                1 => "UPDATE",
                _ => "DELETE",
            };
            let name = name_of(text(&batch.documents, event[2], event[3]));
            if config.trap_on.as_deref().is_some_and(|t| name.contains(t)) {
                panic!("trapping on {name}");
            }
            if config.log {
                let flag = event[1] & 4 != 0;
                log(Level::Info, &format!("{kind} {name} {size} flag={flag}"));
            }
            if config.fail_on.as_deref().is_some_and(|f| name.contains(f)) {
                errors.push(EventError {
                    index: index as u32,
                    reason: format!("failing {name}"),
                });
            }
        }
        errors
    }
}

export!(Guest);
