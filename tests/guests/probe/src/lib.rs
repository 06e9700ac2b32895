//! The probe: a test guest of the `controller` world configured by a JSON config string.
//!
//! It logs one `EVENT` line per event (through the `log` import) so tests can see what it
//! received, answers cache queries described by ConfigMaps labelled `probe-query` with an
//! `ANSWER` line, and, when its `mode` says so, misbehaves on live events of objects whose
//! name starts with `trigger`: trap, loop forever, allocate without bound, sleep past its
//! deadline, query a resource it was not granted, return an error, or print to stdout and
//! stderr. Mode `trap-every` traps on every `every`-th add of any object (replayed or live),
//! `try-alloc` asks for more memory than the cap and carries on when refused, and `spam` logs
//! `spamLines` lines of `spamBytes` bytes each through the log import and stdout, and `nap`
//! sleeps `napMs` once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

wit_bindgen::generate!({
    path: "../../../wit",
    world: "controller",
});

use exports::kubewasm::controller::handler::Guest;
use kubewasm::controller::cache;
use kubewasm::controller::log::{Level, log};
use kubewasm::controller::types::{
    CacheError, Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription,
};

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Config {
    name: String,
    subscriptions: Vec<SubConfig>,
    indexes: Vec<IndexConfig>,
    /// `init` returns this error when set.
    init_error: Option<String>,
    /// `init` traps when true.
    init_trap: bool,
    /// record (default), noop, parse, trap, loop, alloc, sleep, ungranted, error, print.
    mode: String,
    /// Misbehave only for objects whose name starts with this.
    trigger: String,
    /// Misbehave on replayed (initial-list) adds too, not only on live events.
    also_initial: bool,
    /// Trap on live events of objects whose name starts with this, whatever the mode.
    trap_on: Option<String>,
    /// `trap-every`: trap on every this many adds.
    every: u32,
    /// `nap`: milliseconds to sleep once (waiting on the host, not running).
    nap_ms: u64,
    /// `spam`: lines to log per triggering event, and bytes per line.
    spam_lines: u32,
    spam_bytes: u32,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
struct SubConfig {
    group: String,
    version: String,
    kind: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
    resync_seconds: Option<u32>,
    cache_only: bool,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default, rename_all = "camelCase")]
struct IndexConfig {
    name: String,
    group: String,
    version: String,
    kind: String,
    label: Option<String>,
    annotation: Option<String>,
    field: Option<String>,
    owner_uid: bool,
}

/// Set once by `init` (each instance calls it once, before any event).
static CONFIG: OnceLock<Config> = OnceLock::new();
static HOARD: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// Adds this instance has received (for `trap-every`).
static ADDS: AtomicU32 = AtomicU32::new(0);

fn config() -> &'static Config {
    static DEFAULT: OnceLock<Config> = OnceLock::new();
    CONFIG
        .get()
        .unwrap_or_else(|| DEFAULT.get_or_init(Config::default))
}

#[derive(Deserialize, Default)]
struct Meta {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
struct Obj {
    #[serde(default)]
    metadata: Meta,
    #[serde(default)]
    data: std::collections::BTreeMap<String, String>,
}

fn key(meta: &Meta) -> String {
    match &meta.namespace {
        Some(ns) => format!("{ns}/{}", meta.name),
        None => meta.name.clone(),
    }
}

fn keys(objects: &[String]) -> String {
    let mut keys: Vec<String> = objects
        .iter()
        .map(|o| key(&serde_json::from_str::<Obj>(o).unwrap_or_default().metadata))
        .collect();
    keys.sort();
    keys.join(",")
}

fn describe(err: &CacheError) -> String {
    match err {
        CacheError::NotGranted(s) => format!("not-granted {s}"),
        CacheError::NotSubscribed(s) => format!("not-subscribed {s}"),
        CacheError::UnknownIndex(s) => format!("unknown-index {s}"),
        CacheError::Invalid(s) => format!("invalid {s}"),
    }
}

/// Runs the query a `probe-query` ConfigMap describes and logs the answer.
fn answer(obj: &Obj) {
    let d = |k: &str| obj.data.get(k).cloned().unwrap_or_default();
    let opt = |k: &str| obj.data.get(k).cloned();
    let gvk = Gvk {
        group: d("group"),
        version: d("version"),
        kind: d("kind"),
    };
    let result = match d("op").as_str() {
        "get" => cache::get(&gvk, opt("namespace").as_deref(), &d("name"))
            .map(|o| o.map(|o| keys(&[o])).unwrap_or_else(|| "none".into())),
        "list" => cache::list_objects(
            &gvk,
            opt("namespace").as_deref(),
            opt("selector").as_deref(),
        )
        .map(|l| keys(&l)),
        "by-index" => cache::by_index(&gvk, &d("index"), &d("value")).map(|l| keys(&l)),
        "index-values" => cache::index_values(&gvk, &d("index")).map(|mut v| {
            v.sort();
            v.join(",")
        }),
        "has-synced" => cache::has_synced(&gvk).map(|b| b.to_string()),
        other => Ok(format!("unknown op {other}")),
    };
    let line = match result {
        Ok(v) => format!("ANSWER {} ok {v}", obj.metadata.name),
        Err(e) => format!("ANSWER {} err {}", obj.metadata.name, describe(&e)),
    };
    log(Level::Info, &line);
}

/// Records the event, answers queries and misbehaves as configured.
fn event(kind: &str, object: &str, flag: Option<bool>, live: bool) -> Result<(), String> {
    let cfg = config();
    match cfg.mode.as_str() {
        "noop" => return Ok(()),
        "parse" => {
            let v: serde_json::Value = serde_json::from_str(object).map_err(|e| e.to_string())?;
            return if v.get("metadata").is_some() {
                Ok(())
            } else {
                Err("no metadata".into())
            };
        }
        _ => {}
    }
    let obj: Obj = serde_json::from_str(object).map_err(|e| format!("bad JSON: {e}"))?;
    if cfg.mode == "trap-every" && kind == "add" {
        let n = ADDS.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(cfg.every.max(1)) {
            panic!("probe told to trap on add number {n}");
        }
    }
    let flag = flag.map(|f| format!(" flag={f}")).unwrap_or_default();
    log(
        Level::Info,
        &format!(
            "EVENT {kind} {} rv={}{flag}",
            key(&obj.metadata),
            obj.metadata.resource_version
        ),
    );
    if obj.metadata.labels.contains_key("probe-query") && kind != "delete" {
        answer(&obj);
    }
    if let Some(prefix) = &cfg.trap_on
        && live
        && obj.metadata.name.starts_with(prefix.as_str())
    {
        panic!("probe told to trap on {}", obj.metadata.name);
    }
    if !(live || cfg.also_initial) || !obj.metadata.name.starts_with(&cfg.trigger) {
        return Ok(());
    }
    match cfg.mode.as_str() {
        "trap" => panic!("probe told to trap on {}", obj.metadata.name),
        "loop" => {
            let mut i: u64 = 0;
            loop {
                i = std::hint::black_box(i.wrapping_add(1));
            }
        }
        "alloc" => loop {
            let mut chunk = vec![0u8; 1 << 20];
            chunk[4096] = 1;
            HOARD.lock().unwrap().push(chunk);
        },
        "nap" => {
            std::thread::sleep(std::time::Duration::from_millis(cfg.nap_ms));
            log(Level::Info, &format!("NAPPED {}", obj.metadata.name));
            Ok(())
        }
        "sleep" => loop {
            std::thread::sleep(std::time::Duration::from_millis(20));
        },
        "ungranted" => {
            let secret = Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "Secret".into(),
            };
            let line = match cache::list_objects(&secret, None, None) {
                Ok(l) => format!("UNGRANTED ok {}", l.len()),
                Err(e) => format!("UNGRANTED err {}", describe(&e)),
            };
            log(Level::Info, &line);
            Ok(())
        }
        "error" => Err(format!("probe refuses {}", obj.metadata.name)),
        "try-alloc" => {
            let mut v: Vec<u8> = Vec::new();
            let line = match v.try_reserve(1 << 30) {
                Ok(()) => "TRYALLOC got 1 GiB".to_owned(),
                Err(_) => "TRYALLOC refused".to_owned(),
            };
            log(Level::Info, &line);
            Ok(())
        }
        "spam" => {
            let line = "x".repeat(cfg.spam_bytes as usize);
            for _ in 0..cfg.spam_lines {
                log(Level::Info, &line);
                println!("{line}");
            }
            Ok(())
        }
        "print" => {
            println!("STDOUT {}", key(&obj.metadata));
            eprintln!("STDERR {}", key(&obj.metadata));
            Ok(())
        }
        _ => Ok(()),
    }
}

struct Probe;

impl Guest for Probe {
    fn init(config: String) -> Result<PluginInfo, String> {
        let cfg: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("bad probe config: {e}"))?
        };
        if cfg.init_trap {
            panic!("probe told to trap in init");
        }
        if let Some(e) = &cfg.init_error {
            return Err(e.clone());
        }
        let info = PluginInfo {
            name: if cfg.name.is_empty() {
                "probe".into()
            } else {
                cfg.name.clone()
            },
            subscriptions: cfg
                .subscriptions
                .iter()
                .map(|s| Subscription {
                    gvk: Gvk {
                        group: s.group.clone(),
                        version: s.version.clone(),
                        kind: s.kind.clone(),
                    },
                    namespace: s.namespace.clone(),
                    label_selector: s.label_selector.clone(),
                    field_selector: s.field_selector.clone(),
                    resync_seconds: s.resync_seconds,
                    delivery: if s.cache_only {
                        Delivery::CacheOnly
                    } else {
                        Delivery::Events
                    },
                })
                .collect(),
            indexes: cfg
                .indexes
                .iter()
                .map(|i| IndexDecl {
                    name: i.name.clone(),
                    gvk: Gvk {
                        group: i.group.clone(),
                        version: i.version.clone(),
                        kind: i.kind.clone(),
                    },
                    source: if let Some(l) = &i.label {
                        IndexSource::Label(l.clone())
                    } else if let Some(a) = &i.annotation {
                        IndexSource::Annotation(a.clone())
                    } else if let Some(f) = &i.field {
                        IndexSource::Field(f.clone())
                    } else {
                        debug_assert!(i.owner_uid);
                        IndexSource::OwnerUid
                    },
                })
                .collect(),
        };
        let _ = CONFIG.set(cfg);
        Ok(info)
    }

    fn on_add(_gvk: Gvk, object: String, in_initial_list: bool) -> Result<(), String> {
        event("add", &object, Some(in_initial_list), !in_initial_list)
    }

    fn on_update(_gvk: Gvk, old: String, new: String) -> Result<(), String> {
        if !matches!(config().mode.as_str(), "noop" | "parse") {
            let old_rv = serde_json::from_str::<Obj>(&old)
                .map(|o| o.metadata.resource_version)
                .unwrap_or_default();
            log(Level::Info, &format!("OLD rv={old_rv}"));
        }
        event("update", &new, None, true)
    }

    fn on_delete(_gvk: Gvk, object: String, final_state_unknown: bool) -> Result<(), String> {
        event("delete", &object, Some(final_state_unknown), true)
    }
}

export!(Probe);
