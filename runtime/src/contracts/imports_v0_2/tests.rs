//! The 0.2 imports called as a guest calls them (the host functions the component's imports
//! are linked to), against the dev server through kube's real client: what a guest names
//! either addresses exactly that object or is refused with nothing sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::{DevServer, Options};
use serde_json::json;

use super::*;
use crate::cache::access::{Access, ResourceAccess};
use crate::client::events::{EventRecorder, RecorderOptions};
use crate::client::tests::{Recorded, write_client};
use crate::client::{ClientOptions, OTHER_KIND, Refusal, Resources, WriteObserver};
use crate::contracts::v0_2::kubewasm::controller::cache::Host as _;
use crate::contracts::v0_2::kubewasm::controller::client::Host as _;
use crate::guest::log_gate::{LogGate, LogLimits};
use crate::manager::policy::ReconcileSettings;
use crate::model::grants::{Grants, Limits};
use crate::reconcile::context::Context;
use crate::reconcile::workqueue::NoQueueMetrics;
use crate::testing::{TestInformer, config_map_gvk, config_map_json};

/// Access to the ConfigMaps of `config_maps` as subscription 0, with the default grants.
fn config_map_access(config_maps: &TestInformer) -> Arc<Access> {
    Arc::new(Access {
        grants: Grants::default(),
        resources: vec![ResourceAccess {
            resource: config_map_gvk(),
            cache: config_maps.cache(),
            indexes: Default::default(),
        }],
    })
}

/// A connected 0.2 instance's host side, its plugin granted writes on `writes` only.
pub(crate) struct Guest {
    pub(crate) server: DevServer,
    pub(crate) state: HostState,
    pub(crate) recorder: Arc<EventRecorder>,
}

impl Guest {
    /// Granted every verb on `writes` (`Kind` or `group/Kind`).
    pub(crate) async fn new(writes: &[&str], observer: Arc<dyn WriteObserver>) -> Guest {
        let server = DevServer::start(Options::default())
            .await
            .expect("dev server");
        let resources = Arc::new(Resources::new(server.client()));
        let client = write_client(
            &server,
            writes,
            ClientOptions::default(),
            &resources,
            observer,
        );
        Guest::with_client(server, client).await
    }

    /// Writing through `client`, a client of `server`; its cache holds ConfigMap `default/y`
    /// (label `app=web`).
    pub(crate) async fn with_client(server: DevServer, client: WriteClient) -> Guest {
        let client = Arc::new(client);
        let recorder = Arc::new(EventRecorder::new(
            client.clone(),
            RecorderOptions::default(),
        ));
        let context = Arc::new(Context::new(
            client,
            recorder.clone(),
            &ReconcileSettings::default(),
            Arc::new(NoQueueMetrics),
        ));
        let config_maps = TestInformer::new();
        config_maps.upsert(config_map_json("default", "y", &[("app", "web")]));
        config_maps.start().await;
        let mut state = HostState::new(
            "tester".into(),
            &Limits::default(),
            config_map_access(&config_maps),
            Arc::new(LogGate::new(LogLimits::default())),
        );
        state.v0_2_imports = Some(Arc::new(InstanceImports::new(
            context,
            vec![config_map_gvk()],
        )));
        Guest {
            server,
            state,
            recorder,
        }
    }

    /// Every resource request the dev server received since the last call, as
    /// `verb group/resource namespace/name`.
    pub(crate) fn sent(&self) -> Vec<String> {
        let sent = self
            .server
            .requests()
            .into_iter()
            .map(|r| {
                format!(
                    "{:?} {}/{} {}/{}",
                    r.verb,
                    r.group,
                    r.resource,
                    r.namespace.unwrap_or_default(),
                    r.name.unwrap_or_default()
                )
            })
            .collect();
        self.server.clear_requests();
        sent
    }
}

pub(crate) fn target(kind: &str, namespace: Option<&str>, name: &str) -> types::ObjectRef {
    types::ObjectRef {
        gvk: types::Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        },
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

fn merge(patch: serde_json::Value) -> client::PatchBody {
    client::PatchBody::Merge(patch.to_string())
}

fn no_options() -> client::DeleteOptions {
    client::DeleteOptions {
        uid: None,
        resource_version: None,
        propagation: None,
    }
}

fn is_invalid<T: std::fmt::Debug>(answer: &Result<T, types::ApiError>) -> bool {
    matches!(answer, Err(types::ApiError::Invalid(_)))
}

/// The namespaces and names that once addressed another resource, or that the API server
/// refuses.
const ESCAPES: [(&str, &str); 9] = [
    ("default/secrets/top-secret?x=", "y"),
    ("default/secrets/victim?x=", "y"),
    ("default", "../secrets/top-secret"),
    ("default", "top-secret/../y"),
    ("default", "y?dryRun=All"),
    ("default", "y%2F.."),
    ("default", ".."),
    ("default", "y\0"),
    ("..", "y"),
];

#[tokio::test]
async fn path_escapes_through_the_client_imports_are_refused_and_nothing_is_sent() {
    let observed = Arc::new(Recorded::default());
    let mut guest = Guest::new(&["ConfigMap", "Event"], observed.clone()).await;
    let secrets: Api<Secret> = Api::namespaced(guest.server.client(), "default");
    let mut versions = Vec::new();
    for name in ["top-secret", "victim"] {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            string_data: Some(BTreeMap::from([("password".into(), "hunter2".into())])),
            ..Secret::default()
        };
        let created = secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        versions.push(created.metadata.resource_version);
    }
    let state = &mut guest.state;
    let created = state
        .create(
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "y", "namespace": "default"}})
            .to_string(),
        )
        .await;
    assert!(created.is_ok(), "{created:?}");
    let patched = state
        .patch(
            target("ConfigMap", Some("default"), "y"),
            merge(json!({"data": {"k": "v"}})),
        )
        .await;
    assert!(patched.is_ok(), "{patched:?}");
    assert_eq!(
        guest.sent(),
        [
            "Create /secrets default/",
            "Create /secrets default/",
            "Create /configmaps default/",
            "Patch /configmaps default/y"
        ],
        "the control: a valid write is sent, and the log shows it"
    );

    let mut refusals = 0;
    let state = &mut guest.state;
    for (namespace, name) in ESCAPES {
        let at = || target("ConfigMap", Some(namespace), name);
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        })
        .to_string();
        let answers = [
            is_invalid(&state.patch(at(), merge(json!({"data": {}}))).await),
            is_invalid(&state.patch_status(at(), merge(json!({}))).await),
            is_invalid(&state.delete(at(), no_options()).await),
            is_invalid(&state.create(object.clone()).await),
            is_invalid(&state.update(object.clone()).await),
            is_invalid(&state.update_status(object).await),
            is_invalid(
                &state
                    .record_event(client::Event {
                        regarding: at(),
                        uid: None,
                        event_type: client::EventType::Warning,
                        reason: "Escape".into(),
                        message: "m".into(),
                    })
                    .await,
            ),
        ];
        assert_eq!(answers, [true; 7], "{namespace:?} {name:?}");
        refusals += answers.len();
    }
    // Kinds, groups and versions that are not a resource's are refused alike.
    for (group, version, kind) in [
        ("", "v1", "Secret\0"),
        ("", "v1/../secrets", "ConfigMap"),
        ("x/y", "v1", "ConfigMap"),
    ] {
        let mut at = target(kind, Some("default"), "y");
        at.gvk.group = group.into();
        at.gvk.version = version.into();
        assert!(is_invalid(&state.patch(at, merge(json!({}))).await));
        refusals += 1;
    }
    guest.recorder.flush().await;
    assert_eq!(guest.sent(), Vec::<String>::new(), "nothing was sent");
    let refused = observed.refused.lock().clone();
    assert_eq!(refused.len(), refusals, "each refusal counted once");
    assert!(refused.iter().all(|r| *r == Refusal::Invalid));
    let calls = observed.calls.lock().clone();
    assert!(
        calls[2..].iter().all(|c| c.ends_with(" other invalid")),
        "{calls:?}"
    );
    for (name, version) in ["top-secret", "victim"].into_iter().zip(versions) {
        let secret = secrets.get(name).await.unwrap();
        assert_eq!(
            secret.metadata.resource_version, version,
            "{name} unchanged"
        );
    }
    guest.server.shutdown().await;
}

#[tokio::test]
async fn the_cache_imports_refuse_invalid_namespaces_names_and_selectors() {
    let mut guest = Guest::new(&[], Arc::new(Recorded::default())).await;
    let state = &mut guest.state;
    let found = cache::Host::get(state, 0, Some("default".into()), "y".into());
    assert!(matches!(found, Ok(Some(_))), "{found:?}");
    for (namespace, name) in ESCAPES {
        let answer = cache::Host::get(state, 0, Some(namespace.into()), name.into());
        assert!(
            matches!(answer, Err(types::CacheError::Invalid(_))),
            "{namespace:?} {name:?}: {answer:?}"
        );
    }
    let page = types::PageRequest {
        limit: 10,
        continue_token: None,
    };
    let listed = state.list_keys(
        0,
        Some("default".into()),
        Some("app=web".into()),
        page.clone(),
    );
    assert_eq!(
        listed.ok().map(|p| p.items),
        Some(vec!["default/y".to_owned()])
    );
    for (namespace, selector) in [
        (Some("default/x"), None),
        (Some(".."), None),
        (None, Some("app=(".to_owned())),
        (None, Some("a".repeat(5000))),
    ] {
        let answer = state.count(0, namespace.map(str::to_owned), selector.clone());
        assert!(
            matches!(answer, Err(types::CacheError::Invalid(_))),
            "{namespace:?} {selector:?}: {answer:?}"
        );
    }
    assert_eq!(guest.sent(), Vec::<String>::new());
    guest.server.shutdown().await;
}

/// 200,000 writes of invented kinds (and one with a NUL in its kind) by a plugin with no
/// write grant reach the write observer (the host's metrics) as one kind, [`OTHER_KIND`], so
/// the series of `kubewasm_plugin_write_calls_total` stay one per verb and code, not one per
/// kind.
#[tokio::test]
async fn invented_kinds_reach_the_write_observer_as_one_kind() {
    let observed = Arc::new(Recorded::default());
    let mut guest = Guest::new(&[], observed.clone()).await;
    let state = &mut guest.state;
    for i in 0..200_000 {
        let kind = format!("Invented{i}");
        let answer = state
            .patch(target(&kind, Some("default"), "y"), merge(json!({})))
            .await;
        assert!(
            matches!(answer, Err(types::ApiError::NotGranted(_))),
            "{answer:?}"
        );
    }
    let answer = state
        .patch(target("Secret\0", Some("default"), "y"), merge(json!({})))
        .await;
    assert!(is_invalid(&answer), "{answer:?}");
    let calls = observed.calls.lock().clone();
    let distinct: std::collections::BTreeSet<&str> = calls.iter().map(String::as_str).collect();
    assert_eq!(
        distinct,
        [
            format!("patch {OTHER_KIND} invalid"),
            format!("patch {OTHER_KIND} not-granted")
        ]
        .iter()
        .map(String::as_str)
        .collect(),
    );
    assert_eq!(calls.len(), 200_001);
    assert_eq!(guest.sent(), Vec::<String>::new());
    guest.server.shutdown().await;
}

#[test]
fn a_refusal_reaches_a_0_2_guest_as_the_contract_names_it() {
    use crate::client::{Refusal, WriteError};
    let cases = [
        Refusal::NotGranted,
        Refusal::NotLeader,
        Refusal::RateLimited,
        Refusal::Invalid,
    ];
    for refusal in cases {
        let seen = types::ApiError::from(WriteError::refused(refusal, "why"));
        let matches = match refusal {
            Refusal::NotGranted | Refusal::NotLeader => {
                matches!(&seen, types::ApiError::NotGranted(m) if m == "why")
            }
            Refusal::RateLimited => {
                matches!(&seen, types::ApiError::TooManyRequests(m) if m == "why")
            }
            Refusal::Invalid => {
                matches!(&seen, types::ApiError::Invalid(d) if d.message == "why")
            }
        };
        assert!(matches, "{refusal:?}: {seen:?}");
    }
}

/// A 0.2 page ends where its objects would pass the plugin's answer budget, and the pages
/// still walk every object once; an object alone over the budget is `invalid`, not copied.
#[tokio::test]
async fn pages_end_at_the_answer_budget_and_still_walk_every_object() {
    let config_maps = TestInformer::new();
    let big = "x".repeat(10_000);
    for n in 0..20 {
        let mut json: serde_json::Value =
            serde_json::from_str(&config_map_json("default", &format!("cm-{n:02}"), &[]))
                .expect("json");
        json["data"] = json!({ "blob": big });
        config_maps.upsert(json.to_string());
    }
    config_maps.start().await;
    let access = config_map_access(&config_maps);
    let budget = 35_000;
    let limits = Limits {
        max_answer: Some(budget),
        ..Limits::default()
    };
    let mut state = HostState::new(
        "tester".into(),
        &limits,
        access,
        Arc::new(LogGate::new(LogLimits::default())),
    );
    let mut seen = Vec::new();
    let mut token = None;
    let mut pages = 0;
    loop {
        let request = types::PageRequest {
            limit: 5000,
            continue_token: token.take(),
        };
        let page = state
            .list_objects(0, None, None, request)
            .expect("a page within the budget");
        pages += 1;
        let bytes: usize = page.objects.iter().map(|o| o.len() + 8).sum();
        assert!(bytes <= budget, "page {pages}: {bytes} bytes");
        assert!(!page.objects.is_empty());
        seen.extend(page.objects.iter().map(|o| {
            let object: serde_json::Value = serde_json::from_str(o).expect("json");
            object["metadata"]["name"]
                .as_str()
                .expect("name")
                .to_owned()
        }));
        match page.continue_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    let all: Vec<String> = (0..20).map(|n| format!("cm-{n:02}")).collect();
    assert_eq!(seen, all);
    assert!(
        pages >= 7,
        "three objects of 10 KB a page at most: {pages} pages"
    );

    let mut tight = HostState::new(
        "tester".into(),
        &Limits {
            max_answer: Some(5_000),
            ..Limits::default()
        },
        state.access.clone(),
        Arc::new(LogGate::new(LogLimits::default())),
    );
    let request = types::PageRequest {
        limit: 0,
        continue_token: None,
    };
    match tight.list_objects(0, None, None, request) {
        Err(types::CacheError::Invalid(why)) => {
            assert!(
                why.contains("default/cm-00") && why.contains("5000"),
                "{why}"
            )
        }
        other => panic!("one object over the budget: {other:?}"),
    }
}
