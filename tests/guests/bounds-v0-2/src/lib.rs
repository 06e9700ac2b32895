//! A guest of the 0.2 world `reconciler` written from the WIT alone, that pushes on the host's
//! bounds from `reconcile`. It subscribes to the ConfigMaps of one namespace (own key queued);
//! its config (JSON) names the plugin and chooses what every reconcile does:
//!
//! - `{"mode": "flood", "adds": N}`: queues `N` keys of distinct names (once, on the first
//!   reconcile), then one key with a 1 MiB name and an `add-after` of `u32::MAX` ms; logs
//!   `FLOOD ok=A refused=R first=<error>`, `HUGE <ok|err message>`, `FAR <ok|err message>`;
//! - `{"mode": "hot"}`: answers `requeue-after(0)` for ever;
//! - `{"mode": "fail"}`: answers `err("failing NAME")`;
//! - `{"mode": "trap"}`: panics;
//! - `{"mode": "write", "writes": N}`: for a ConfigMap whose name starts with `src`, creates `N`
//!   ConfigMaps `NAME-w<i>` in the key's namespace and logs `WRITE <i> ok` or `WRITE <i> err <Variant>: <message>` for each.

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "reconciler",
});

use std::sync::atomic::{AtomicBool, Ordering};

use exports::kubewasm::controller::{plugin, reconcile};
use kubewasm::controller::types::{ApiError, Gvk, Key, PluginInfo, QueueRule, Subscription};
use kubewasm::controller::{client, log, queue};

#[derive(serde::Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    mode: String,
    adds: u32,
    writes: u32,
}

static mut CONFIG: Option<Config> = None;
static FLOODED: AtomicBool = AtomicBool::new(false);

fn config() -> Config {
    // SAFETY: a component instance is single-threaded; `init` writes before any reconcile.
    unsafe { (*std::ptr::addr_of!(CONFIG)).clone().unwrap_or_default() }
}

fn say(line: String) {
    log::log(log::Level::Info, &line);
}

fn api_error(e: &ApiError) -> String {
    match e {
        ApiError::Conflict(m) => format!("Conflict: {m}"),
        ApiError::NotFound(m) => format!("NotFound: {m}"),
        ApiError::AlreadyExists(m) => format!("AlreadyExists: {m}"),
        ApiError::Forbidden(m) => format!("Forbidden: {m}"),
        ApiError::Invalid(d) => format!("Invalid: {}", d.message),
        ApiError::NotGranted(m) => format!("NotGranted: {m}"),
        ApiError::TooManyRequests(m) => format!("TooManyRequests: {m}"),
        ApiError::Timeout(m) => format!("Timeout: {m}"),
        ApiError::ServerError(s) => format!("ServerError: {} {}", s.code, s.message),
    }
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let parsed: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        let info = PluginInfo {
            name: parsed.name.clone().unwrap_or_else(|| "bounds".into()),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: parsed.namespace.clone(),
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: false,
                queue: vec![QueueRule::OwnKey],
            }],
            indexes: Vec::new(),
        };
        // SAFETY: as in `config`.
        unsafe { CONFIG = Some(parsed) };
        Ok(info)
    }
}

fn flood(key: &Key, adds: u32) {
    let (mut ok, mut refused, mut first) = (0u32, 0u32, None);
    for i in 0..adds {
        let k = Key {
            subscription: key.subscription,
            namespace: key.namespace.clone(),
            name: format!("flood-{i}"),
        };
        match queue::add(&k) {
            Ok(()) => ok += 1,
            Err(e) => {
                refused += 1;
                first.get_or_insert(e);
            }
        }
    }
    say(format!(
        "FLOOD ok={ok} refused={refused} first={}",
        first.unwrap_or_default()
    ));
    let huge = Key {
        subscription: key.subscription,
        namespace: key.namespace.clone(),
        name: "x".repeat(1 << 20),
    };
    match queue::add(&huge) {
        Ok(()) => say("HUGE ok".into()),
        Err(e) => say(format!("HUGE err {e}")),
    }
    match queue::add_after(key, u32::MAX) {
        Ok(()) => say("FAR ok".into()),
        Err(e) => say(format!("FAR err {e}")),
    }
}

impl reconcile::Guest for Guest {
    fn reconcile(key: Key) -> Result<reconcile::Action, String> {
        let config = config();
        match config.mode.as_str() {
            "flood" => {
                if !FLOODED.swap(true, Ordering::Relaxed) {
                    flood(&key, config.adds);
                }
                Ok(reconcile::Action::Done)
            }
            "hot" => Ok(reconcile::Action::RequeueAfter(0)),
            "fail" => Err(format!("failing {}", key.name)),
            "trap" => panic!("trapping on {}", key.name),
            "write" if key.name.starts_with("src") => {
                let namespace = key.namespace.clone().unwrap_or_default();
                for i in 0..config.writes {
                    let object = serde_json::json!({
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"namespace": namespace, "name": format!("{}-w{i}", key.name)},
                    });
                    match client::create(&object.to_string()) {
                        Ok(_) => say(format!("WRITE {i} ok")),
                        Err(e) => say(format!("WRITE {i} err {}", api_error(&e))),
                    }
                }
                Ok(reconcile::Action::Done)
            }
            _ => Ok(reconcile::Action::Done),
        }
    }
}

export!(Guest);
