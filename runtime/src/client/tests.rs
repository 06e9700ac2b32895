//! The write client against the dev server, through kube's real client, with faults injected.

use std::sync::Arc;
use std::time::Duration;

use kubewasm_devserver::{DevServer, Options, Verb};
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::*;
use crate::model::grants::ResourcePattern;

/// Records every write the observer hears of as `verb kind code`, the refusals and the
/// Events dropped.
#[derive(Default)]
pub(crate) struct Recorded {
    pub(crate) calls: Mutex<Vec<String>>,
    pub(crate) refused: Mutex<Vec<Refusal>>,
    pub(crate) events_dropped: std::sync::atomic::AtomicU64,
}

impl WriteObserver for Recorded {
    fn write_call(&self, _plugin: &str, verb: WriteVerb, kind: &str, code: &str) {
        self.calls.lock().push(format!("{verb} {kind} {code}"));
    }
    fn refused(&self, _plugin: &str, refusal: Refusal) {
        self.refused.lock().push(refusal);
    }
    fn event_dropped(&self, _plugin: &str) {
        self.events_dropped
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

struct Env {
    server: DevServer,
    observed: Arc<Recorded>,
    resources: Arc<Resources>,
}

impl Env {
    async fn new() -> Env {
        let server = DevServer::start(Options::default()).await.unwrap();
        let resources = Arc::new(Resources::new(server.client()));
        Env {
            server,
            observed: Arc::new(Recorded::default()),
            resources,
        }
    }

    fn client(&self, writes: &[&str], options: ClientOptions) -> WriteClient {
        write_client(
            &self.server,
            writes,
            options,
            &self.resources,
            self.observed.clone(),
        )
    }

    fn calls(&self) -> Vec<String> {
        self.observed.calls.lock().clone()
    }
}

/// A client of the plugin `tester` on `server`, granted every verb on `writes` (`Kind` or
/// `group/Kind`), without kube's own retries.
pub(crate) fn write_client(
    server: &DevServer,
    writes: &[&str],
    options: ClientOptions,
    resources: &Arc<Resources>,
    observer: Arc<dyn WriteObserver>,
) -> WriteClient {
    let grants = writes
        .iter()
        .map(|w| {
            let (group, kind) = w.split_once('/').unwrap_or(("", w));
            WriteGrant::new(ResourcePattern::new(group, kind), None).unwrap()
        })
        .collect();
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.default_retry = false;
    WriteClient::new(
        kube::Client::try_from(config).unwrap(),
        "tester".into(),
        WriteGrants::only(grants),
        options,
        resources.clone(),
        observer,
    )
}

fn config_map(name: &str, data: Value) -> String {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    })
    .to_string()
}

fn cm_ref(name: &str) -> ObjectRef {
    ObjectRef::new(
        Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
        },
        Some("default"),
        name,
    )
    .unwrap()
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[tokio::test]
async fn create_update_and_delete_answer_the_server_and_its_refusals() {
    let env = Env::new().await;
    let client = env.client(&["ConfigMap"], ClientOptions::default());
    let created = parse(
        &client
            .create(&config_map("a", json!({"k": "1"})))
            .await
            .unwrap(),
    );
    let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    let again = client.create(&config_map("a", json!({}))).await;
    assert!(
        matches!(again, Err(WriteError::AlreadyExists(_))),
        "{again:?}"
    );

    let mut changed = created.clone();
    changed["data"]["k"] = json!("2");
    let updated = parse(&client.update(&changed.to_string()).await.unwrap());
    assert_eq!(updated["data"]["k"], "2");
    let stale = client.update(&changed.to_string()).await;
    assert!(matches!(stale, Err(WriteError::Conflict(_))), "{stale:?}");
    let mut blind = changed.clone();
    blind["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let refused = client.update(&blind.to_string()).await;
    assert!(
        matches!(refused, Err(WriteError::Invalid { .. })),
        "{refused:?}"
    );

    let wrong_uid = DeleteOptions {
        uid: Some("not-the-uid".into()),
        ..DeleteOptions::default()
    };
    let refused = client.delete(&cm_ref("a"), &wrong_uid).await;
    assert!(
        matches!(refused, Err(WriteError::Conflict(_))),
        "{refused:?}"
    );
    let stale_rv = DeleteOptions {
        resource_version: Some(rv),
        ..DeleteOptions::default()
    };
    let refused = client.delete(&cm_ref("a"), &stale_rv).await;
    assert!(
        matches!(refused, Err(WriteError::Conflict(_))),
        "{refused:?}"
    );
    let exact = DeleteOptions {
        uid: Some(uid),
        propagation: Some(Propagation::Foreground),
        ..DeleteOptions::default()
    };
    assert_eq!(client.delete(&cm_ref("a"), &exact).await, Ok(Deleted::Gone));
    let gone = client.delete(&cm_ref("a"), &DeleteOptions::default()).await;
    assert!(matches!(gone, Err(WriteError::NotFound(_))), "{gone:?}");

    let calls = env.calls();
    assert_eq!(calls[0], "create ConfigMap 2xx");
    assert_eq!(calls[1], "create ConfigMap 409");
    assert!(
        calls.contains(&"delete ConfigMap 404".to_owned()),
        "{calls:?}"
    );
    env.server.shutdown().await;
}

#[tokio::test]
async fn every_patch_type_applies_and_names_the_plugin_as_field_manager() {
    let env = Env::new().await;
    let client = env.client(&["ConfigMap"], ClientOptions::default());
    client
        .create(&config_map("p", json!({"a": "1", "b": "1"})))
        .await
        .unwrap();
    let target = cm_ref("p");
    let merged = client
        .patch(
            &target,
            &PatchBody::Merge(r#"{"data":{"a":null,"c":"3"}}"#.into()),
        )
        .await
        .unwrap();
    assert_eq!(parse(&merged)["data"], json!({"b": "1", "c": "3"}));
    let patched = client
        .patch(
            &target,
            &PatchBody::Json(r#"[{"op":"replace","path":"/data/b","value":"2"}]"#.into()),
        )
        .await
        .unwrap();
    assert_eq!(parse(&patched)["data"]["b"], "2");
    let failed = client
        .patch(
            &target,
            &PatchBody::Json(r#"[{"op":"test","path":"/data/b","value":"9"}]"#.into()),
        )
        .await;
    assert!(
        matches!(failed, Err(WriteError::Invalid { .. })),
        "{failed:?}"
    );
    let strategic = client
        .patch(
            &target,
            &PatchBody::Strategic(r#"{"data":{"d":"4"}}"#.into()),
        )
        .await
        .unwrap();
    assert_eq!(parse(&strategic)["data"]["d"], "4");

    // Server-side apply creates an absent object, then merges into it.
    let intent = |value: &str| PatchBody::Apply {
        object: config_map("applied", json!({"owned": value})),
        force: true,
    };
    let applied = client
        .patch(&cm_ref("applied"), &intent("1"))
        .await
        .unwrap();
    assert_eq!(parse(&applied)["data"]["owned"], "1");
    let applied = client
        .patch(&cm_ref("applied"), &intent("2"))
        .await
        .unwrap();
    assert_eq!(parse(&applied)["data"]["owned"], "2");

    let queries: Vec<String> = env
        .server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Verb::Patch)
        .map(|r| r.query)
        .collect();
    assert!(
        queries.iter().all(|q| q.contains("fieldManager=tester")),
        "{queries:?}"
    );
    assert!(
        queries.iter().any(|q| q.contains("force=true")),
        "{queries:?}"
    );
    let not_json = client.patch(&target, &PatchBody::Merge("{".into())).await;
    assert!(matches!(not_json, Err(WriteError::Invalid { .. })));
    // A JSON patch is read as RFC 6902 operations here: a malformed one is refused unsent.
    let sent = env.server.requests().len();
    for malformed in [
        r#"{"op":"add","path":"/data/x","value":"1"}"#,
        r#"[{"op":"bogus","path":"/data/x"}]"#,
        r#"[{"op":"add","path":"/data/x"}]"#,
        r#"[{"op":"remove","path":"data/x"}]"#,
    ] {
        let refused = client
            .patch(&target, &PatchBody::Json(malformed.into()))
            .await;
        assert!(
            matches!(&refused, Err(WriteError::Invalid { message, .. }) if message.contains("not a JSON patch")),
            "{malformed}: {refused:?}"
        );
    }
    assert_eq!(
        env.server.requests().len(),
        sent,
        "{:?}",
        env.server.requests()
    );
    env.server.shutdown().await;
}

#[tokio::test]
async fn status_writes_go_to_the_status_subresource() {
    let env = Env::new().await;
    let client = env.client(&["apps/Deployment"], ClientOptions::default());
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
    });
    let created = parse(&client.create(&deployment.to_string()).await.unwrap());
    let mut with_status = created.clone();
    with_status["status"] = json!({"availableReplicas": 2});
    with_status["spec"]["replicas"] = json!(5);
    let updated = parse(
        &client
            .update_status(&with_status.to_string())
            .await
            .unwrap(),
    );
    assert_eq!(updated["status"]["availableReplicas"], 2);
    assert_eq!(
        updated["spec"]["replicas"], 2,
        "spec is not written through status"
    );
    let target = ObjectRef::new(
        Gvk {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
        },
        Some("default"),
        "web",
    )
    .unwrap();
    let patched = client
        .patch_status(
            &target,
            &PatchBody::Merge(r#"{"status":{"readyReplicas":1}}"#.into()),
        )
        .await
        .unwrap();
    assert_eq!(parse(&patched)["status"]["readyReplicas"], 1);
    env.server.shutdown().await;
}

#[tokio::test]
async fn writes_without_a_grant_are_refused_counted_and_never_sent() {
    let env = Env::new().await;
    let client = env.client(&["apps/Deployment"], ClientOptions::default());
    let refused = client.create(&config_map("x", json!({}))).await;
    assert!(
        matches!(
            refused,
            Err(WriteError::Refused {
                refusal: Refusal::NotGranted,
                ..
            })
        ),
        "{refused:?}"
    );
    let refused = client.delete(&cm_ref("x"), &DeleteOptions::default()).await;
    assert!(
        matches!(
            refused,
            Err(WriteError::Refused {
                refusal: Refusal::NotGranted,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(
        env.server.requests().is_empty(),
        "nothing reached the server"
    );
    assert_eq!(
        env.calls(),
        ["create other not-granted", "delete other not-granted"]
    );
    assert_eq!(
        *env.observed.refused.lock(),
        [Refusal::NotGranted, Refusal::NotGranted]
    );
    env.server.shutdown().await;
}

#[tokio::test]
async fn a_replica_that_does_not_lead_sends_no_write() {
    let env = Env::new().await;
    let client = env
        .client(&["ConfigMap"], ClientOptions::default())
        .with_leader(crate::leader_gate::LeaderGate::new("kubewasm", "standby"));
    let refused = client.create(&config_map("x", json!({}))).await;
    assert!(
        matches!(&refused, Err(WriteError::Refused { refusal: Refusal::NotLeader, message }) if message.contains("not the leader")),
        "{refused:?}"
    );
    assert!(
        env.server.requests().is_empty(),
        "nothing reached the server"
    );
    assert_eq!(env.calls(), ["create ConfigMap not-leader"]);
    assert_eq!(*env.observed.refused.lock(), [Refusal::NotLeader]);
    env.server.shutdown().await;
}

#[tokio::test]
async fn injected_server_faults_are_typed_errors() {
    let env = Env::new().await;
    let client = env.client(&["ConfigMap"], ClientOptions::default());
    client.create(&config_map("warm", json!({}))).await.unwrap();
    for (code, expected) in [
        (409, "conflict"),
        (429, "too many"),
        (500, "server error 500"),
    ] {
        env.server.fail_next(Verb::Create, 1, code);
        let error = client
            .create(&config_map("f", json!({})))
            .await
            .unwrap_err();
        assert!(error.to_string().starts_with(expected), "{code}: {error}");
    }
    env.server.fail_next(Verb::Patch, 1, 504);
    let error = client
        .patch(&cm_ref("warm"), &PatchBody::Merge("{}".into()))
        .await
        .unwrap_err();
    assert!(matches!(error, WriteError::Timeout(_)), "{error:?}");
    // The API server's own validation: an object with neither name nor generateName.
    env.server.clear_requests();
    let error = client.create(&config_map("", json!({}))).await.unwrap_err();
    assert_eq!(env.server.requests().len(), 1, "the server was asked");
    let WriteError::Invalid { causes, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        causes[0].field, "metadata.name",
        "the server's causes reach the guest"
    );
    assert_eq!(causes[0].reason, "FieldValueRequired");
    // A name the API server would refuse is refused as it would, but by the host: unsent.
    env.server.clear_requests();
    let error = client
        .create(&config_map("Not_A_Name", json!({})))
        .await
        .unwrap_err();
    assert!(env.server.requests().is_empty(), "nothing was sent");
    let WriteError::Invalid { causes, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(causes[0].field, "metadata.name");
    assert_eq!(causes[0].reason, "FieldValueInvalid");
    env.server.shutdown().await;
}

#[tokio::test]
async fn a_slow_server_answers_timeout_within_the_call_limit() {
    let env = Env::new().await;
    let options = ClientOptions {
        call_timeout: Duration::from_millis(100),
        ..ClientOptions::default()
    };
    let client = env.client(&["ConfigMap"], options);
    client.create(&config_map("warm", json!({}))).await.unwrap();
    env.server.set_latency(Duration::from_secs(5));
    let error = client
        .create(&config_map("slow", json!({})))
        .await
        .unwrap_err();
    assert!(matches!(error, WriteError::Timeout(_)), "{error:?}");
    assert_eq!(env.calls().last().unwrap(), "create ConfigMap timeout");
    env.server.set_latency(Duration::ZERO);
    env.server.shutdown().await;
}

#[tokio::test]
async fn the_plugins_rate_limit_refuses_a_burst_it_cannot_wait_for() {
    let env = Env::new().await;
    let options = ClientOptions {
        qps: 0.01,
        burst: 2,
        call_timeout: Duration::from_secs(1),
    };
    let client = env.client(&["ConfigMap"], options);
    client.create(&config_map("one", json!({}))).await.unwrap();
    client.create(&config_map("two", json!({}))).await.unwrap();
    let before = env.server.requests().len();
    let error = client
        .create(&config_map("three", json!({})))
        .await
        .unwrap_err();
    assert_eq!(error.refusal(), Some(Refusal::RateLimited), "{error:?}");
    assert_eq!(
        env.server.requests().len(),
        before,
        "refused before sending"
    );
    assert_eq!(env.calls().last().unwrap(), "create ConfigMap rate-limited");
    env.server.shutdown().await;
}

#[tokio::test]
async fn a_write_with_no_token_left_is_refused_at_once_and_never_waits() {
    let env = Env::new().await;
    let options = ClientOptions {
        qps: 0.001,
        burst: 1,
        // Were the limiter to wait for a token (1000 s away), the call limit would end it as
        // a timeout instead.
        call_timeout: Duration::from_secs(3600),
    };
    let client = env.client(&["ConfigMap"], options.clone());
    client.create(&config_map("one", json!({}))).await.unwrap();
    let before = env.server.requests().len();
    let error = client
        .create(&config_map("two", json!({})))
        .await
        .unwrap_err();
    assert_eq!(error.refusal(), Some(Refusal::RateLimited), "{error:?}");
    assert_eq!(env.server.requests().len(), before, "nothing sent");
    assert_eq!(*env.observed.refused.lock(), [Refusal::RateLimited]);
    // An unmetered client (the Event recorder's, which paces itself) is not held back.
    let unmetered = env.client(&["ConfigMap"], options).unmetered();
    for name in ["three", "four"] {
        unmetered
            .create(&config_map(name, json!({})))
            .await
            .unwrap();
    }
    env.server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_a_clear_error() {
    let env = Env::new().await;
    let client = env.client(
        &["ConfigMap", "example.com/Widget"],
        ClientOptions::default(),
    );
    for (object, needle) in [
        ("{", "not JSON"),
        (r#"{"kind":"ConfigMap"}"#, "apiVersion and kind"),
        (
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"}}"#,
            "namespace is required",
        ),
    ] {
        let error = client.create(object).await.unwrap_err();
        assert!(error.to_string().contains(needle), "{object}: {error}");
    }
    let widget = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#;
    let error = client.create(widget).await.unwrap_err();
    assert!(matches!(error, WriteError::NotFound(_)), "{error:?}");
    env.server.shutdown().await;
}
