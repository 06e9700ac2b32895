//! A guest of the 0.2 world `controller` written from the WIT alone, that pushes on the host's
//! bounds from `reconcile` (and its handlers). It subscribes to the ConfigMaps of one namespace
//! (own key queued); its config (JSON) names the plugin and chooses what every reconcile does:
//!
//! - `{"mode": "flood", "adds": N}`: queues `N` keys of distinct names (once, on the first
//!   reconcile), then one key with a 1 MiB name and an `add-after` of `u32::MAX` ms; logs
//!   `FLOOD ok=A refused=R first=<error>`, `HUGE <ok|err message>`, `FAR <ok|err message>`;
//! - `{"mode": "hot"}`: answers `requeue-after(0)` for ever;
//! - `{"mode": "fail"}`: answers `err("failing NAME")`;
//! - `{"mode": "trap"}`: panics;
//! - `{"mode": "write", "writes": N}`: for a ConfigMap whose name starts with `src`, creates `N`
//!   ConfigMaps `NAME-w<i>` in the key's namespace and logs `WRITE <i> ok` or `WRITE <i> err <Variant>: <message>` for each;
//! - `{"mode": "event", "uidBytes": N}`: records an Event about the key's ConfigMap with a
//!   `uid` of `N` bytes (`N` 0: an RFC 4122 one), and one about a Secret of the same name;
//!   logs `EVENT <ok|err Variant: message>` and `SECRET-EVENT <ok|err Variant: message>`;
//! - `{"mode": "forge"}`: hands the host a newline and an ESC in every string it can: logs
//!   `FORGE` + them, queues a key whose name holds them (logs `FORGED-KEY <ok|err message>`)
//!   and answers `err` with them.
//!
//! Besides the mode:
//! - `"events": true` (with `"resyncSeconds": S`) asks for events; every handler then answers
//!   `err` with a reason holding a newline (an error flood, with a short resync);
//! - `"indexPaths": N, "indexPathBytes": B` declares `N` field-path indexes on the ConfigMaps,
//!   of paths of at most `B` bytes each (distinct dotted paths into `data`, segments of 30
//!   letters).

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "controller",
});

use std::sync::atomic::{AtomicBool, Ordering};

use exports::kubewasm::controller::{handler, plugin, reconcile};
use kubewasm::controller::types::{
    ApiError, Gvk, IndexDecl, IndexSource, Key, ObjectRef, PluginInfo, QueueRule, Subscription,
};
use kubewasm::controller::{client, log, queue};

#[derive(serde::Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    namespace: Option<String>,
    mode: String,
    adds: u32,
    writes: u32,
    uid_bytes: usize,
    events: bool,
    resync_seconds: Option<u32>,
    index_paths: u32,
    index_path_bytes: usize,
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
                resync_seconds: parsed.resync_seconds,
                events: parsed.events,
                queue: vec![QueueRule::OwnKey],
            }],
            indexes: (0..parsed.index_paths)
                .map(|i| IndexDecl {
                    subscription: 0,
                    name: format!("path-{i}"),
                    source: IndexSource::Field(path(i, parsed.index_path_bytes)),
                })
                .collect(),
        };
        // SAFETY: as in `config`.
        unsafe { CONFIG = Some(parsed) };
        Ok(info)
    }
}

/// A dotted path into `data` of at most `bytes` bytes (at least its first segments), distinct
/// for each `i`, of segments of 31 bytes.
fn path(i: u32, bytes: usize) -> String {
    const SEGMENT: &str = ".kkkkkkkkkkkkkkkkkkkkkkkkkkkkkk";
    let mut path = format!("data.p{i}");
    while path.len() + SEGMENT.len() <= bytes {
        path.push_str(SEGMENT);
    }
    path
}

fn described(result: Result<(), ApiError>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(e) => format!("err {}", api_error(&e)),
    }
}

/// Records an Event about the key's ConfigMap with a `uid` of `bytes` bytes, and one about a
/// Secret of the same name.
fn events(key: &Key, bytes: usize) {
    let uid = if bytes == 0 {
        "8c3e2a52-3b9f-4c2e-9a59-0d6f3e0f1a2b".to_owned()
    } else {
        "u".repeat(bytes)
    };
    let about = |kind: &str| client::Event {
        regarding: ObjectRef {
            gvk: Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: kind.into(),
            },
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        },
        uid: Some(uid.clone()),
        event_type: client::EventType::Normal,
        reason: "Probed".into(),
        message: format!("probed {}", key.name),
    };
    say(format!(
        "EVENT {}",
        described(client::record_event(&about("ConfigMap")))
    ));
    say(format!(
        "SECRET-EVENT {}",
        described(client::record_event(&about("Secret")))
    ));
}

/// What a forger puts in every string: a line of its own that looks like the host's, and a
/// terminal escape.
const FORGED: &str = "\n2025-01-01T00:00:00Z  INFO kubewasm: forged line \u{1b}[2J";

fn forge(key: &Key) -> Result<reconcile::Action, String> {
    say(format!("FORGE{FORGED}"));
    let forged = Key {
        subscription: key.subscription,
        namespace: key.namespace.clone(),
        name: format!("k{FORGED}"),
    };
    match queue::add(&forged) {
        Ok(()) => say("FORGED-KEY ok".into()),
        Err(e) => say(format!("FORGED-KEY err {e}")),
    }
    Err(format!("failing{FORGED}"))
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
            "event" => {
                events(&key, config.uid_bytes);
                Ok(reconcile::Action::Done)
            }
            "forge" => forge(&key),
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

/// Every handler fails, with a reason a line of the log could be forged with.
impl handler::Guest for Guest {
    fn on_add(_: u32, _: String, _: bool) -> Result<(), String> {
        Err(format!("on-add failing{FORGED}"))
    }

    fn on_update(_: u32, _: String, _: String) -> Result<(), String> {
        Err(format!("on-update failing{FORGED}"))
    }

    fn on_delete(_: u32, _: String, _: bool) -> Result<(), String> {
        Err(format!("on-delete failing{FORGED}"))
    }
}

export!(Guest);
