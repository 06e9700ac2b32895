//! Property tests of every guest-facing import that takes a namespace, name, kind or selector:
//! arbitrary strings and JSON (biased towards what once escaped: `/`, `?`, `%`, `..`, NUL,
//! the names of other resources) go in through the host functions a guest's calls reach, and
//! whatever they are, no request leaves the host for a resource, namespace, name or verb other
//! than the granted one the guest named (checked on the dev server's request log), and the
//! host does not panic. Likewise for the other strings a guest hands the host (issue 32):
//! queue keys, Event uids, index sources and log lines are checked or escaped, whatever they
//! hold (line breaks, ESC, huge strings).
//!
//! Each target runs [`cases`] cases (`KUBEWASM_FUZZ_CASES`, 200 by default) from the seed
//! `KUBEWASM_FUZZ_SEED` (random by default; a failure names it, to replay it):
//!
//! ```sh
//! KUBEWASM_FUZZ_CASES=30000 cargo nextest run -p kubewasm --lib --no-capture -E 'test(/fuzz::/)'
//! ```
//!
//! The write targets print how many of their cases reached the server (a few percent: most
//! arbitrary input is refused), and start with a valid call that must be sent, so the request
//! log is known to show what is sent.

use std::sync::Arc;

use kubewasm_devserver::{DevServer, Options, Verb};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::*;
use crate::client::events::is_uid;
use crate::client::tests::Recorded;
use crate::client::{ClientOptions, Resources, WriteGrant, WriteGrants};
use crate::contracts::imports_v0_2::tests::{Guest, target};
use crate::contracts::kubewasm::controller::cache as cache_v0_1;
use crate::contracts::v0_2::kubewasm::controller::client::Host as _;
use crate::events::informers::shared_index;
use crate::guest::declare::{checked_index, checked_scope};
use crate::guest::escape::escaped;
use crate::guest::log_gate::{LogGate, LogLimits};
use crate::model::declared::{Delivery, IndexDecl, IndexSource, Subscription};
use crate::model::grants::{DeclarationLimits, ResourcePattern};
use crate::model::names::{Namespace, ObjectName};

/// How many cases each target runs.
fn cases() -> usize {
    std::env::var("KUBEWASM_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

/// Arbitrary guest input from one seed.
struct Fuzz {
    rng: StdRng,
    seed: u64,
}

/// Pieces of what once escaped, and of what is valid, to build strings from.
const PIECES: &[&str] = &[
    "default",
    "kube-system",
    "y",
    "web",
    "secrets",
    "top-secret",
    "configmaps",
    "/",
    "?",
    "&",
    "=",
    "%",
    "%2F",
    "%00",
    "..",
    ".",
    "-",
    "\0",
    "\n",
    "\r\n",
    "\u{1b}[2J",
    "\u{2028}",
    "\u{202e}",
    " ",
    "#",
    "Secret",
    "ConfigMap",
    "v1",
    "apps",
    "ümlaut",
    "A",
    "9",
    "status",
];

impl Fuzz {
    fn new() -> Fuzz {
        let seed = std::env::var("KUBEWASM_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        Fuzz {
            rng: StdRng::seed_from_u64(seed),
            seed,
        }
    }

    fn one_in(&mut self, n: u32) -> bool {
        self.rng.random_ratio(1, n)
    }

    /// A string: valid-looking pieces, hostile pieces, random characters, sometimes long.
    fn string(&mut self) -> String {
        let mut s = String::new();
        for _ in 0..self.rng.random_range(0..5) {
            match self.rng.random_range(0..10) {
                0..=5 => s.push_str(PIECES[self.rng.random_range(0..PIECES.len())]),
                6 | 7 => s.push(self.rng.random_range(' '..='~')),
                8 => s.push(self.rng.random::<char>()),
                _ => s.push_str(&"a".repeat(self.rng.random_range(60..300))),
            }
        }
        s
    }

    /// One of `choices`, or an arbitrary string.
    fn pick(&mut self, choices: &[&str]) -> String {
        if self.one_in(6) {
            self.string()
        } else {
            choices[self.rng.random_range(0..choices.len())].to_owned()
        }
    }

    fn option(&mut self, choices: &[&str]) -> Option<String> {
        (!self.one_in(8)).then(|| self.pick(choices))
    }

    fn namespace(&mut self) -> Option<String> {
        self.option(&["default", "team-a", "kube-system"])
    }

    fn name(&mut self) -> String {
        self.pick(&["y", "web", "a.b", "top-secret"])
    }

    fn object_ref(&mut self) -> types::ObjectRef {
        types::ObjectRef {
            gvk: types::Gvk {
                group: self.pick(&["", "", "apps"]),
                version: self.pick(&["v1", "v1", "v1beta1"]),
                kind: self.pick(&["ConfigMap", "ConfigMap", "Secret", "Event", "Deployment"]),
            },
            namespace: self.namespace(),
            name: self.name(),
        }
    }

    /// Arbitrary JSON, mostly shaped like an object, sometimes not JSON at all.
    fn json(&mut self) -> String {
        if self.one_in(8) {
            return self.string();
        }
        let mut metadata = serde_json::Map::new();
        if let Some(ns) = self.namespace() {
            metadata.insert("namespace".into(), Value::String(ns));
        }
        if !self.one_in(5) {
            metadata.insert("name".into(), Value::String(self.name()));
        }
        if !self.one_in(3) {
            metadata.insert("resourceVersion".into(), json!("1"));
        }
        if self.one_in(6) {
            metadata.insert("name".into(), json!(self.rng.random::<u32>()));
        }
        let mut data = serde_json::Map::new();
        data.insert(self.string(), Value::String(self.string()));
        json!({
            "apiVersion": self.pick(&["v1", "v1", "apps/v1", "v1/", "/v1"]),
            "kind": self.pick(&["ConfigMap", "ConfigMap", "Secret", "Event"]),
            "metadata": metadata,
            "data": data,
        })
        .to_string()
    }

    fn patch(&mut self) -> client::PatchBody {
        let text = self.json();
        match self.rng.random_range(0..4) {
            0 => client::PatchBody::Merge(text),
            1 => client::PatchBody::Strategic(text),
            2 => client::PatchBody::Json(if !self.one_in(4) {
                format!(
                    r#"[{{"op":"add","path":"/data/{}","value":"v"}}]"#,
                    self.string()
                )
            } else {
                text
            }),
            _ => client::PatchBody::Apply(client::ApplyPatch {
                object: text,
                force: self.one_in(2),
            }),
        }
    }
}

fn merge(text: &str) -> client::PatchBody {
    client::PatchBody::Merge(text.to_owned())
}

/// What one client import call may send: one request, of `verb`, on ConfigMaps, for exactly
/// the namespace and name the guest gave (`name` `None` for a create).
struct Allowed {
    verb: Option<Verb>,
    namespace: Option<String>,
    name: Option<String>,
}

/// The plugin's only grant: create, update, patch and delete ConfigMaps (no status, no
/// Events, no Secrets).
async fn guest() -> Guest {
    let server = DevServer::start(Options::default())
        .await
        .expect("dev server");
    let grant = WriteGrant::new(
        ResourcePattern::new("", "ConfigMap"),
        Some(
            ["create", "update", "patch", "delete"]
                .map(str::to_owned)
                .to_vec(),
        ),
    )
    .expect("grant");
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    let kube = kube::Client::try_from(config).expect("client");
    let client = WriteClient::new(
        kube.clone(),
        "fuzzed".into(),
        WriteGrants::only(vec![grant]),
        ClientOptions {
            qps: 1e6,
            burst: u32::MAX,
            ..ClientOptions::default()
        },
        Arc::new(Resources::new(kube)),
        Arc::new(Recorded::default()),
    );
    Guest::with_client(server, client).await
}

/// Checks what the call sent against what it may send; answers how many requests it sent.
/// Reports a write target's pass (its seed, to replay it, and how many requests were sent) and
/// stops its server.
async fn finish(guest: Guest, fuzz: &Fuzz, sent: usize) {
    eprintln!(
        "seed {}: {} cases, {sent} requests sent",
        fuzz.seed,
        cases()
    );
    guest.server.shutdown().await;
}

fn check(guest: &Guest, fuzz: &Fuzz, case: usize, call: &str, allowed: &Allowed) -> usize {
    let sent = guest.server.requests();
    guest.server.clear_requests();
    let count = sent.len();
    let context = format!("seed {} case {case}: {call}", fuzz.seed);
    assert!(sent.len() <= 1, "{context}: {sent:?}");
    for r in sent {
        let ok = Some(r.verb) == allowed.verb
            && r.group.is_empty()
            && r.resource == "configmaps"
            && r.namespace == allowed.namespace
            && r.name == allowed.name;
        assert!(ok, "{context}: sent {r:?}");
    }
    count
}

/// A namespaced object's namespace as the request must carry it: as the guest named it.
fn named(namespace: &Option<String>) -> Option<String> {
    namespace.clone()
}

#[tokio::test]
async fn fuzz_client_patch_and_patch_status() {
    let mut guest = guest().await;
    let mut fuzz = Fuzz::new();
    // The control: a valid patch is sent, and the log shows it.
    let _ = guest
        .state
        .patch(target("ConfigMap", Some("default"), "y"), merge("{}"))
        .await;
    assert_eq!(guest.server.requests().len(), 1, "the control was sent");
    guest.server.clear_requests();
    let mut sent = 0;
    for case in 0..cases() {
        let at = fuzz.object_ref();
        let patch = fuzz.patch();
        let status = fuzz.one_in(3);
        let call = format!("patch (status {status}) {at:?} {patch:?}");
        let allowed = Allowed {
            verb: (!status).then_some(Verb::Patch),
            namespace: named(&at.namespace),
            name: Some(at.name.clone()),
        };
        let _ = if status {
            guest.state.patch_status(at, patch).await
        } else {
            guest.state.patch(at, patch).await
        };
        sent += check(&guest, &fuzz, case, &call, &allowed);
    }
    finish(guest, &fuzz, sent).await;
}

#[tokio::test]
async fn fuzz_client_delete() {
    let mut guest = guest().await;
    let mut fuzz = Fuzz::new();
    let _ = guest
        .state
        .delete(
            target("ConfigMap", Some("default"), "y"),
            client::DeleteOptions {
                uid: None,
                resource_version: None,
                propagation: None,
            },
        )
        .await;
    assert_eq!(guest.server.requests().len(), 1, "the control was sent");
    guest.server.clear_requests();
    let mut sent = 0;
    for case in 0..cases() {
        let at = fuzz.object_ref();
        let options = client::DeleteOptions {
            uid: fuzz.option(&["u"]),
            resource_version: fuzz.option(&["1"]),
            propagation: None,
        };
        let call = format!("delete {at:?} {options:?}");
        let allowed = Allowed {
            verb: Some(Verb::Delete),
            namespace: named(&at.namespace),
            name: Some(at.name.clone()),
        };
        let _ = guest.state.delete(at, options).await;
        sent += check(&guest, &fuzz, case, &call, &allowed);
    }
    finish(guest, &fuzz, sent).await;
}

/// The namespace and name a JSON object names, as strings.
fn metadata(object: &str) -> (Option<String>, Option<String>) {
    let value: Value = serde_json::from_str(object).unwrap_or(Value::Null);
    let text = |p: &str| {
        value
            .pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    (text("/metadata/namespace"), text("/metadata/name"))
}

#[tokio::test]
async fn fuzz_client_create_update_and_update_status() {
    let mut guest = guest().await;
    let mut fuzz = Fuzz::new();
    let mut sent = 0;
    for case in 0..cases() {
        let object = fuzz.json();
        let (namespace, name) = metadata(&object);
        let which = fuzz.rng.random_range(0..3);
        let call = format!("{which} {object:?}");
        let allowed = match which {
            0 => Allowed {
                verb: Some(Verb::Create),
                namespace,
                name: None,
            },
            1 => Allowed {
                verb: Some(Verb::Update),
                namespace,
                name,
            },
            _ => Allowed {
                verb: None,
                namespace,
                name,
            },
        };
        let _ = match which {
            0 => guest.state.create(object).await,
            1 => guest.state.update(object).await,
            _ => guest.state.update_status(object).await,
        };
        sent += check(&guest, &fuzz, case, &call, &allowed);
    }
    finish(guest, &fuzz, sent).await;
}

#[tokio::test]
async fn fuzz_client_record_event() {
    let mut guest = guest().await;
    let mut fuzz = Fuzz::new();
    for case in 0..cases() {
        let event = client::Event {
            regarding: fuzz.object_ref(),
            uid: fuzz.option(&["u"]),
            event_type: client::EventType::Normal,
            reason: fuzz.pick(&["Synced", "Failed"]),
            message: fuzz.string(),
        };
        let call = format!("record-event {event:?}");
        let _ = guest.state.record_event(event).await;
        guest.recorder.flush().await;
        let nothing = Allowed {
            verb: None,
            namespace: None,
            name: None,
        };
        let sent = check(&guest, &fuzz, case, &call, &nothing);
        assert_eq!(sent, 0);
    }
    guest.server.shutdown().await;
}

#[tokio::test]
async fn fuzz_cache_imports() {
    let mut guest = Guest::new(&[], Arc::new(Recorded::default())).await;
    let mut fuzz = Fuzz::new();
    for case in 0..cases() {
        let (namespace, name) = (fuzz.namespace(), fuzz.name());
        let selector = fuzz.option(&["app=web", "app", "!app", "app in (web)"]);
        let context = format!(
            "seed {} case {case}: {namespace:?} {name:?} {selector:?}",
            fuzz.seed
        );
        let state = &mut guest.state;
        if let Ok(Some(doc)) = cache::Host::get(state, 0, namespace.clone(), name.clone()) {
            let (ns, n) = metadata(&doc);
            assert_eq!(
                (ns, n),
                (namespace.clone(), Some(name.clone())),
                "{context}"
            );
        }
        let _ = cache::Host::count(state, 0, namespace.clone(), selector.clone());
        let gvk = Gvk {
            group: fuzz.pick(&[""]),
            version: fuzz.pick(&["v1"]),
            kind: fuzz.pick(&["ConfigMap", "Secret"]),
        };
        if let Ok(Some(doc)) =
            cache_v0_1::Host::get(state, (&gvk).into(), namespace.clone(), name.clone())
        {
            let (ns, n) = metadata(&doc);
            assert_eq!((ns, n), (namespace.clone(), Some(name)), "{context}");
        }
        let _ = cache_v0_1::Host::list_objects(state, (&gvk).into(), namespace, selector);
        assert!(guest.server.requests().is_empty(), "{context}");
    }
    guest.server.shutdown().await;
}

/// A subscription's namespace and selectors as `run`, `check` and `rbac` take them: what
/// passes names exactly one namespace's collection, and the Role `rbac` prints is in it.
#[test]
fn fuzz_subscriptions() {
    let mut fuzz = Fuzz::new();
    let config_maps = kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    for case in 0..cases() * 10 {
        let sub = Subscription {
            gvk: Gvk {
                group: fuzz.pick(&["", "apps"]),
                version: fuzz.pick(&["v1"]),
                kind: fuzz.pick(&["ConfigMap", "Secret"]),
            },
            namespace: fuzz.namespace(),
            label_selector: fuzz.option(&["app=web", "app in (a,b)", "!x"]),
            field_selector: fuzz.option(&["metadata.name=y", "spec.nodeName!=n"]),
            resync_seconds: None,
            delivery: Delivery::Events,
        };
        let context = format!("seed {} case {case}: {sub:?}", fuzz.seed);
        let Ok(namespace) = checked_scope(&sub) else {
            continue;
        };
        let mut key = kubewasm_informer::InformerKey::all(config_maps.clone());
        key.namespace = namespace.as_ref().map(|ns| ns.as_str().to_owned());
        let expected = match &sub.namespace {
            Some(ns) => format!("/api/v1/namespaces/{ns}/configmaps"),
            None => "/api/v1/configmaps".to_owned(),
        };
        assert_eq!(key.collection_path(), expected, "{context}");
        assert!(
            sub.namespace
                .iter()
                .all(|ns| !ns.contains(['/', '?', '%', '\0']) && ns != ".."),
            "{context}"
        );
    }
}

/// Whether `s` holds a character that could end a log line or drive a terminal.
fn unescaped(s: &str) -> bool {
    s.chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202e}'))
}

/// A queue key the guest makes up is queued only with a namespace and a name of the API
/// server's syntax; any other is refused as a value.
#[tokio::test]
async fn fuzz_queue_keys() {
    let mut guest = Guest::new(&[], Arc::new(Recorded::default())).await;
    let mut fuzz = Fuzz::new();
    for case in 0..cases() {
        let key = types::Key {
            subscription: if fuzz.one_in(10) { 7 } else { 0 },
            namespace: fuzz.namespace(),
            name: fuzz.name(),
        };
        let context = format!("seed {} case {case}: {key:?}", fuzz.seed);
        let added = if fuzz.one_in(2) {
            queue::Host::add(&mut guest.state, key.clone())
        } else {
            queue::Host::add_after(&mut guest.state, key.clone(), 10)
        };
        match added {
            Ok(()) => {
                assert_eq!(key.subscription, 0, "{context}");
                assert!(
                    key.namespace
                        .as_deref()
                        .is_none_or(|ns| Namespace::new(ns).is_ok()),
                    "{context}"
                );
                assert!(ObjectName::new("", &key.name).is_ok(), "{context}");
            }
            Err(message) => assert!(message.len() < 1024, "{context}: {message}"),
        }
    }
    guest.server.shutdown().await;
}

/// An Event is accepted only with a `uid` of UID shape (or none); one of any other shape is an
/// `invalid` error value.
#[tokio::test]
async fn fuzz_event_uids() {
    let mut guest = Guest::new(&["Event"], Arc::new(Recorded::default())).await;
    let mut fuzz = Fuzz::new();
    for case in 0..cases() {
        let uid = if fuzz.one_in(4) {
            Some("0f8e2a52-3b9f-4c2e-9a59-0d6f3e0f1a2b".to_owned())
        } else if fuzz.one_in(10) {
            Some("u".repeat(fuzz.rng.random_range(100..40_000)))
        } else {
            fuzz.option(&["u1", "a-b-c"])
        };
        let event = client::Event {
            regarding: target("ConfigMap", Some("default"), &format!("c{case}")),
            uid: uid.clone(),
            event_type: client::EventType::Normal,
            reason: "Synced".into(),
            message: fuzz.string(),
        };
        let context = format!("seed {} case {case}: {uid:?}", fuzz.seed);
        let answer = guest.state.record_event(event).await;
        let shaped = uid.as_deref().is_none_or(|u| u.is_empty() || is_uid(u));
        match answer {
            Err(types::ApiError::Invalid(details)) => {
                assert!(!shaped, "{context}: {}", details.message);
                assert!(details.message.len() < 512, "{context}");
            }
            other => assert!(shaped, "{context}: {other:?}"),
        }
    }
    // Not flushed: the accepted events are written at the recorder's pace (5 a second).
    guest.server.shutdown().await;
}

/// An index declaration passes only with a short name, a qualified key or a short, shallow
/// field path of plain segments; a refusal holds no raw control character and no huge string;
/// and whatever an object holds, an index files it under few, short values.
#[test]
fn fuzz_index_sources() {
    let mut fuzz = Fuzz::new();
    let limits = DeclarationLimits::default();
    for case in 0..cases() * 10 {
        let text = |fuzz: &mut Fuzz, choices: &[&str]| {
            if fuzz.one_in(20) {
                format!("data.{}", "k.".repeat(fuzz.rng.random_range(10..20_000))) + "k"
            } else {
                fuzz.pick(choices)
            }
        };
        let source = match fuzz.rng.random_range(0..4) {
            0 => IndexSource::Label(text(&mut fuzz, &["app", "app.kubernetes.io/name"])),
            1 => IndexSource::Annotation(text(&mut fuzz, &["team", "example.com/team"])),
            2 => IndexSource::Field(text(&mut fuzz, &["spec.nodeName", "data.a", "spec.x.y"])),
            _ => IndexSource::OwnerUid,
        };
        let decl = IndexDecl {
            name: fuzz.pick(&["by-app", "by_node.v1:x"]),
            gvk: Gvk {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            source,
        };
        let context = format!("seed {} case {case}: {:.300?}", fuzz.seed, decl);
        match checked_index(&decl, &limits) {
            Err(message) => {
                assert!(!unescaped(&message), "{context}: {message:?}");
                assert!(message.len() < 1024, "{context}: {} bytes", message.len());
            }
            Ok(()) => {
                assert!(
                    !decl.name.is_empty() && decl.name.len() <= limits.max_index_name_bytes,
                    "{context}"
                );
                let (key, path) = match &decl.source {
                    IndexSource::Label(k) | IndexSource::Annotation(k) => (Some(k), None),
                    IndexSource::Field(p) => (None, Some(p)),
                    IndexSource::OwnerUid => (None, None),
                };
                if let Some(key) = key {
                    assert!(key.len() <= 253 + 1 + 63 && !unescaped(key), "{context}");
                }
                if let Some(path) = path {
                    assert!(path.len() <= limits.max_field_path_bytes, "{context}");
                    assert!(
                        path.split('.').count() <= limits.max_field_path_depth
                            && path.split('.').all(|s| !s.is_empty()),
                        "{context}"
                    );
                }
            }
        }
        let values: Vec<Value> = (0..fuzz.rng.random_range(0..200))
            .map(|_| Value::String(fuzz.string()))
            .collect();
        let object = kubewasm_informer::Object::from_json(
            &json!({
                "metadata": {"name": "c", "namespace": "ns",
                             "labels": {"app": fuzz.string()},
                             "annotations": {"team": "t".repeat(fuzz.rng.random_range(0..5000))}},
                "data": {"a": values, "k": {"k": fuzz.string()}},
            })
            .to_string(),
        )
        .expect("an object");
        let (_, index) = shared_index(&decl.source, &limits);
        let filed = index(&object);
        assert!(filed.len() <= limits.max_index_values, "{context}");
        assert!(
            filed
                .iter()
                .all(|v| v.len() <= limits.max_index_value_bytes),
            "{context}"
        );
    }
}

/// Whatever a guest logs, the line the log gate admits holds no raw control character, line
/// or paragraph separator or bidi override, and a line without any is kept as it is.
#[test]
fn fuzz_log_escaping() {
    let mut fuzz = Fuzz::new();
    let gate = LogGate::new(LogLimits {
        lines_per_second: u32::MAX,
        burst_lines: u32::MAX,
        line_bytes: 256,
    });
    for case in 0..cases() * 10 {
        let line: String = (0..fuzz.rng.random_range(1..4))
            .map(|_| fuzz.string())
            .collect::<Vec<_>>()
            .join(if fuzz.one_in(2) { "\n" } else { "\u{1b}" });
        let context = format!("seed {} case {case}: {line:?}", fuzz.seed);
        let shown = escaped(&line);
        assert!(!unescaped(&shown), "{context}: {shown:?}");
        if !unescaped(&line) {
            assert_eq!(shown, line, "{context}");
        }
        let admitted = gate.admit("fuzzed", &line).expect("within the rate");
        assert!(!unescaped(&admitted), "{context}: {admitted:?}");
    }
}
