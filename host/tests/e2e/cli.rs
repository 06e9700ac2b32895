//! The `kubewasm` binary driven as a user would: `dev` with the Rust example plugins, `run`
//! against a dev API server, `check`, `rbac`, bad configs, metrics, probes and SIGTERM, and
//! several `run` replicas electing leaders ([`replicas`]).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kubewasm_tests::{guest_path, wait_until};
use serde::Deserialize as _;
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(60);
const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");

/// A running `kubewasm` process whose JSON log lines are collected as they come.
struct Host {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

impl Host {
    fn spawn(args: &[&str], cwd: &Path, env: &[(&str, &Path)], dir: tempfile::TempDir) -> Host {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .args(["--log-format", "json", "--metrics-addr", "127.0.0.1:0"])
            .current_dir(cwd)
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("kubewasm starts");
        let stderr = child.stderr.take().expect("stderr piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                sink.lock().unwrap().push(value);
            }
        });
        Host {
            child,
            lines,
            _dir: dir,
        }
    }

    fn logs(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// Messages logged by `plugin`'s guest code.
    fn guest_lines(&self, plugin: &str) -> Vec<String> {
        self.logs()
            .iter()
            .filter(|l| l["target"] == "kubewasm::guest" && l["fields"]["plugin"] == plugin)
            .filter_map(|l| l["fields"]["message"].as_str().map(str::to_owned))
            .collect()
    }

    /// The value of field `field` on the first log line whose message contains `message`.
    async fn logged_field(&self, message: &str, field: &str) -> String {
        let mut found = None;
        let ok = wait_until(PATIENCE, || {
            found = self.logs().iter().find_map(|l| {
                let msg = l["fields"]["message"].as_str()?;
                msg.contains(message)
                    .then(|| l["fields"][field].as_str().map(str::to_owned))?
            });
            found.is_some()
        })
        .await;
        assert!(ok, "never logged {message:?}: {:#?}", self.logs());
        found.unwrap_or_default()
    }

    async fn wait_guest_line(&self, plugin: &str, wanted: &str) {
        let ok = wait_until(PATIENCE, || {
            self.guest_lines(plugin).iter().any(|l| l.contains(wanted))
        })
        .await;
        assert!(
            ok,
            "{plugin} never logged {wanted:?}; it logged {:#?}",
            self.guest_lines(plugin)
        );
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid}");
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().expect("wait for kubewasm") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!(
            "kubewasm did not exit within 30 s of SIGTERM: {:#?}",
            self.logs()
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn plugins_dir(dir: &Path, guests: &[&str]) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).expect("plugins dir");
    for guest in guests {
        std::fs::copy(guest_path(guest), plugins.join(format!("{guest}.wasm")))
            .expect("copy guest");
    }
    plugins
}

/// A plain HTTP/1.0 GET: status code and body (0 when nothing answers).
fn get(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let Some(rest) = url.strip_prefix("http://") else {
        return (0, String::new());
    };
    let (addr, path) = rest.split_once('/').unwrap_or((rest, ""));
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return (0, String::new());
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!("GET /{path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).is_err()
        || stream.read_to_string(&mut response).is_err()
    {
        return (0, String::new());
    }
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// The value of a sample in Prometheus text format, labels given as `k="v"` pairs.
fn sample(metrics: &str, name: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `kubewasm dev` with an admission policy and no certificate flag: it serves the webhook on
/// loopback with a certificate of its own and stores the configurations in its API server, so
/// a client's write is denied or mutated by the policy with no setup; removing the policy's file
/// removes its configurations (a write it would deny is then stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_serves_an_admission_policy_on_loopback_with_no_setup() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(dir.path(), &["admission-probe"]);
    let kubeconfig = dir.path().join("dev.kubeconfig");
    // Its mutating webhook on ConfigMaps needs the grant to patch them.
    let config = dir.path().join("kubewasm.toml");
    std::fs::write(
        &config,
        "[plugins.admission-probe]\nwrites = [\"ConfigMap:patch\"]\n",
    )
    .expect("config");
    let cwd = dir.path().to_path_buf();
    let host = Host::spawn(
        &[
            "dev",
            "--plugins",
            plugins.to_str().expect("utf-8 path"),
            "--config",
            config.to_str().expect("utf-8 path"),
            "--kubeconfig-out",
            kubeconfig.to_str().expect("utf-8 path"),
        ],
        &cwd,
        &[],
        tempfile::tempdir().expect("tempdir"),
    );
    let url = host
        .logged_field("serving admission webhooks on loopback", "url")
        .await;
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let configured = host
        .logged_field(
            "admission webhooks configured in the development API server",
            "plugins",
        )
        .await;
    assert_eq!(configured, "admission-probe");
    let kube_config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig written"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig usable");
    let client = kube::Client::try_from(kube_config).expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let named = |name: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };

    match cms.create(&PostParams::default(), &named("deny-me")).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(
                status.message,
                "admission webhook \"admission-probe.kubewasm.dev\" denied the request: denied deny-me"
            );
        }
        other => panic!("expected the policy's denial, got {other:?}"),
    }
    let stored = cms
        .create(&PostParams::default(), &named("fine"))
        .await
        .expect("an allowed ConfigMap is stored");
    let labels = stored.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("admitted-by").map(String::as_str),
        Some("admission-probe-v0"),
        "the mutating webhook labels it"
    );

    // The policy goes: so do its configurations, and nothing is denied any more.
    std::fs::remove_file(plugins.join("admission-probe.wasm")).expect("removing the policy");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let remaining = (
            validating
                .get_opt("kubewasm-admission-probe")
                .await
                .expect("get")
                .is_some(),
            mutating
                .get_opt("kubewasm-admission-probe")
                .await
                .expect("get")
                .is_some(),
        );
        if remaining == (false, false) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "configurations left (validating, mutating): {remaining:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cms.create(&PostParams::default(), &named("deny-again"))
        .await
        .expect("without the policy the write is stored");
    host.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_runs_the_example_plugins_and_reports_metrics_and_readiness() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(dir.path(), &["pod-diff", "ready-pods"]);
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).expect("manifests dir");
    std::fs::write(
        manifests.join("seed.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seeded\n  namespace: default\n\
         data:\n  color: red\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
    )
    .expect("manifest");
    let kubeconfig = dir.path().join("dev.kubeconfig");
    let cwd = dir.path().to_path_buf();
    let host = Host::spawn(
        &[
            "dev",
            "--plugins",
            plugins.to_str().expect("utf-8 path"),
            "--manifests",
            manifests.to_str().expect("utf-8 path"),
            "--kubeconfig-out",
            kubeconfig.to_str().expect("utf-8 path"),
        ],
        &cwd,
        &[],
        tempfile::tempdir().expect("tempdir"),
    );
    let addr = host.logged_field("serving /metrics", "addr").await;
    let base = format!("http://{addr}");

    host.wait_guest_line("pod-diff", "ConfigMap default/seeded added (initial list)")
        .await;
    let ready = wait_until(PATIENCE, || get(&format!("{base}/readyz")).0 == 200).await;
    assert!(ready, "/readyz never became 200");
    assert_eq!(get(&format!("{base}/healthz")).0, 200);

    let kube_config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig written"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("kubeconfig usable");
    let client = kube::Client::try_from(kube_config).expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(client, "shop");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("menu".into()),
            ..ObjectMeta::default()
        },
        data: Some([("dish".to_string(), "soup".to_string())].into()),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    host.wait_guest_line("pod-diff", "ConfigMap shop/menu added")
        .await;
    cms.patch(
        "menu",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"dish": "stew"}})),
    )
    .await
    .expect("patch");
    host.wait_guest_line(
        "pod-diff",
        r#"ConfigMap shop/menu changed: data.dish: "soup" -> "stew""#,
    )
    .await;

    // pod-diff heard: seeded (add), menu (add, update). Each is one event on ConfigMaps,
    // counted when its call returns, a moment after the guest logged its line.
    let count_in = |metrics: &str, event: &str| {
        sample(
            metrics,
            "kubewasm_plugin_events_total",
            &[
                r#"plugin="pod-diff""#,
                r#"resource="ConfigMap""#,
                &format!(r#"event="{event}""#),
                r#"outcome="ok""#,
            ],
        )
    };
    let counted = wait_until(PATIENCE, || {
        count_in(&get(&format!("{base}/metrics")).1, "update") == Some(1.0)
    })
    .await;
    assert!(counted, "the update was never counted");
    let (code, metrics) = get(&format!("{base}/metrics"));
    assert_eq!(code, 200);
    assert_eq!(count_in(&metrics, "add"), Some(2.0), "{metrics}");
    assert_eq!(count_in(&metrics, "update"), Some(1.0), "{metrics}");
    assert_eq!(
        sample(
            &metrics,
            "kubewasm_plugin_reloads_total",
            &[r#"plugin="ready-pods""#, r#"result="ok""#]
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "kubewasm_informer_objects",
            &[r#"resource="v1/configmaps""#]
        ),
        Some(2.0),
        "{metrics}"
    );
    let (_, listing) = get(&format!("{base}/plugins"));
    let listing: Value = serde_json::from_str(&listing).expect("/plugins is JSON");
    let mut names: Vec<&str> = listing["plugins"]
        .as_array()
        .expect("plugins array")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    // Listed by id, given as each load completes: the plugins compile in parallel.
    names.sort_unstable();
    assert_eq!(names, ["pod-diff", "ready-pods"]);

    let status = host.terminate();
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_is_not_ready_until_the_informers_sync() {
    let (server, _client) = kubewasm_tests::devserver().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(dir.path(), &["pod-diff"]);
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_yaml()).expect("kubeconfig");
    // The API server refuses every list and watch until told otherwise.
    server.fail_next(kubewasm_devserver::Verb::List, 1_000_000, 500);
    server.fail_next(kubewasm_devserver::Verb::Watch, 1_000_000, 500);
    let host = Host::spawn(
        &["run", "--plugins", plugins.to_str().expect("utf-8 path")],
        dir.path(),
        &[("KUBECONFIG", &kubeconfig)],
        tempfile::tempdir().expect("tempdir"),
    );
    let addr = host.logged_field("serving /metrics", "addr").await;
    host.logged_field("plugin loaded", "plugin").await;
    assert_eq!(get(&format!("http://{addr}/readyz")).0, 503);

    server.fail_next(kubewasm_devserver::Verb::List, 0, 500);
    server.fail_next(kubewasm_devserver::Verb::Watch, 0, 500);
    let ready = wait_until(PATIENCE, || get(&format!("http://{addr}/readyz")).0 == 200).await;
    assert!(ready, "/readyz never became 200 after the server recovered");
    assert!(host.terminate().success());
}

fn run(args: &[&str], cache: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("kubewasm runs")
}

/// `compile` fills a cache dir ahead of a start: one entry per plugin file, each file reported
/// (a directory stands for its `*.wasm` files), a second run finds them all cached, and the
/// host's engine over that dir loads the plugin from the cache without compiling. A file that
/// is not a component fails the run and is named.
#[tokio::test]
async fn compile_fills_the_cache_that_the_host_then_loads_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("compiled");
    let plugins = plugins_dir(dir.path(), &["pod-diff", "probe"]);
    let cache_arg = cache.to_str().expect("utf-8");
    let with = |extra: &Path| {
        let extra = extra.to_str().expect("utf-8").to_owned();
        vec![
            "compile".to_owned(),
            "--cache-dir".to_owned(),
            cache_arg.to_owned(),
            extra,
        ]
    };
    let run = |args: Vec<String>, cwd: &Path| {
        run(&args.iter().map(String::as_str).collect::<Vec<_>>(), cwd)
    };
    let out = run(with(&plugins), dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches(": compiled (").count(), 2, "{text}");
    let entries = std::fs::read_dir(&cache).expect("cache dir").count();
    assert_eq!(entries, 2, "one entry per plugin");

    let out = run(with(&plugins), dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        text.matches(": already in the cache (").count(),
        2,
        "{text}"
    );

    let engine = kubewasm_runtime::PluginEngine::new(kubewasm_runtime::EngineOptions {
        cache_dir: Some(cache.clone()),
    })
    .expect("engine");
    let file = plugins.join("pod-diff.wasm");
    let bytes = std::fs::read(&file).expect("plugin");
    let loaded = engine.compile(&file, bytes).await.expect("loads");
    assert_eq!(loaded.origin(), kubewasm_runtime::Origin::DiskCache);

    let bad = dir.path().join("broken.wasm");
    std::fs::write(&bad, b"this is not wasm").expect("bad file");
    let out = run(with(&bad), dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("broken.wasm: FAILED"), "{text}");
    let mut keep_going = with(&bad);
    keep_going.push("--keep-going".to_owned());
    let out = run(keep_going, dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("broken.wasm: FAILED"), "{text}");
}

/// The Deployment of `deploy/kubernetes/kubewasm.yaml`, as JSON.
fn shipped_deployment() -> Value {
    let path = kubewasm_tests::workspace_root().join("deploy/kubernetes/kubewasm.yaml");
    let text = std::fs::read_to_string(&path).expect("kubewasm.yaml");
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("a YAML document"))
        .find(|doc| doc["kind"] == "Deployment")
        .expect("a Deployment in kubewasm.yaml")
}

/// The shipped deployment starts from precompiled code: its init container's own command, run
/// with its volumes standing in as directories, over plugins whose precompiled artifacts (made
/// by `compile --out` of the same binary, as the image's binary makes them) are in its
/// precompiled volume, compiles nothing, and the host's engine over the cache it filled (the
/// volume the host container mounts) loads each plugin as precompiled code. A plugin without an
/// artifact, and one whose artifact is of other bytes (refused, with the reason), are compiled.
#[tokio::test]
async fn the_deployment_starts_from_precompiled_code_without_compiling() {
    let deployment = shipped_deployment();
    let pod = &deployment["spec"]["template"]["spec"];
    let init = &pod["initContainers"][0];
    let mounts = |container: &Value| -> Vec<(String, String)> {
        container["volumeMounts"]
            .as_array()
            .expect("volume mounts")
            .iter()
            .map(|m| {
                let field = |k: &str| m[k].as_str().expect("a string").to_owned();
                (field("name"), field("mountPath"))
            })
            .collect()
    };
    let host_cache = mounts(&pod["containers"][0])
        .into_iter()
        .find(|(name, _)| name == "cache")
        .expect("the host mounts the cache volume");
    assert!(
        mounts(init).contains(&host_cache),
        "the init container fills the cache the host loads from"
    );
    // The image's `KUBEWASM_CACHE_DIR`, where `compile` writes without `--cache-dir`.
    assert_eq!(host_cache.1, "/var/cache/kubewasm");

    let dir = tempfile::tempdir().expect("tempdir");
    let volumes: Vec<(String, PathBuf)> = mounts(init)
        .into_iter()
        .map(|(name, path)| {
            let local = dir.path().join(&name);
            std::fs::create_dir_all(&local).expect("volume dir");
            (path, local)
        })
        .collect();
    let local = |name: &str| dir.path().join(name);
    let command: Vec<String> = init["command"]
        .as_array()
        .expect("the init container's command")
        .iter()
        .map(|a| a.as_str().expect("a string").to_owned())
        .collect();
    assert_eq!(command[0], "/usr/local/bin/kubewasm");
    let run_init = || {
        let args: Vec<String> = command[1..]
            .iter()
            .map(|arg| {
                volumes
                    .iter()
                    .find_map(|(path, local)| {
                        arg.strip_prefix(path.as_str())
                            .map(|rest| format!("{}{rest}", local.display()))
                    })
                    .unwrap_or_else(|| arg.clone())
            })
            .collect();
        let out = Command::new(BIN)
            .args(&args)
            .env("KUBEWASM_CACHE_DIR", local("cache"))
            .output()
            .expect("kubewasm runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{args:?}: {text}");
        text
    };

    let plugins = local("plugins");
    for guest in ["pod-diff", "ready-pods"] {
        std::fs::copy(guest_path(guest), plugins.join(format!("{guest}.wasm"))).expect("copy");
    }
    let made = Command::new(BIN)
        .args(["compile", "--out"])
        .arg(local("precompiled"))
        .arg(&plugins)
        .output()
        .expect("kubewasm runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stdout)
    );

    let text = run_init();
    assert_eq!(text.matches(": compiled (").count(), 0, "{text}");
    assert_eq!(
        text.matches(": precompiled code in the cache (").count(),
        2,
        "{text}"
    );
    assert!(
        text.contains("(0 compiled, 2 from precompiled code"),
        "{text}"
    );
    let engine = kubewasm_runtime::PluginEngine::new(kubewasm_runtime::EngineOptions {
        cache_dir: Some(local("cache")),
    })
    .expect("engine");
    for guest in ["pod-diff", "ready-pods"] {
        let file = plugins.join(format!("{guest}.wasm"));
        let bytes = std::fs::read(&file).expect("plugin");
        let loaded = engine.compile(&file, bytes).await.expect("loads");
        assert_eq!(loaded.origin(), kubewasm_runtime::Origin::Precompiled);
    }

    // A new pod (an empty cache): a plugin dropped in without an artifact, and one whose
    // artifact is of other bytes, are compiled; the others still are not.
    std::fs::remove_dir_all(local("cache")).expect("empty the cache");
    std::fs::copy(guest_path("probe"), plugins.join("probe.wasm")).expect("copy");
    std::fs::copy(
        local("precompiled").join("pod-diff.cwasm"),
        local("precompiled").join("ready-pods.cwasm"),
    )
    .expect("copy");
    let text = run_init();
    assert_eq!(text.matches(": compiled (").count(), 2, "{text}");
    assert!(
        text.contains("ready-pods.cwasm refused (other-component), compiling instead"),
        "{text}"
    );
    assert!(
        text.contains("(2 compiled, 1 from precompiled code"),
        "{text}"
    );
}

#[test]
fn check_accepts_a_plugin_and_names_what_is_wrong_with_a_bad_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = guest_path("pod-diff");
    let bad = dir.path().join("broken.wasm");
    std::fs::write(&bad, b"this is not wasm").expect("bad file");

    let out = run(&["check", good.to_str().expect("utf-8")], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("name:    pod-diff"), "{text}");
    assert!(text.contains("subscribes: v1/Pod"), "{text}");
    assert!(text.contains("subscribes: v1/ConfigMap"), "{text}");

    let out = run(&["check", bad.to_str().expect("utf-8")], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("broken.wasm: FAILED"), "{text}");
    assert!(text.contains("not a WebAssembly file"), "{text}");

    // A config that grants nothing makes the good plugin fail the check.
    let config = dir.path().join("strict.toml");
    std::fs::write(&config, "[defaults]\ngrants = [\"apps/*\"]\n").expect("config");
    let out = run(
        &[
            "check",
            "--config",
            config.to_str().expect("utf-8"),
            good.to_str().expect("utf-8"),
        ],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("Pod"), "{text}");
}

/// `check` shows a plugin's key, its effective grants and a policy's webhooks, checked against
/// its grants as a load checks them: a mutating webhook without a write grant fails the check
/// naming the line to add.
#[test]
fn check_shows_the_key_the_grants_and_a_policys_webhooks_within_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("cm-policy.wasm");
    std::fs::copy(guest_path("admission-probe"), &policy).expect("copy guest");
    let policy = policy.to_str().expect("utf-8");
    let out = run(&["check", policy], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("writes = [..., \"ConfigMap:patch\"] in [plugins.cm-policy]"),
        "{text}"
    );

    let config = dir.path().join("granted.toml");
    std::fs::write(
        &config,
        "[plugins.cm-policy]\nwrites = [\"ConfigMap:patch\"]\n",
    )
    .expect("config");
    let out = run(
        &["check", "--config", config.to_str().expect("utf-8"), policy],
        dir.path(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for line in [
        "plugin:  cm-policy (its config is [plugins.cm-policy])",
        "name:    admission-probe (declared by init, a label)",
        "reads:   */*",
        "webhook: validating core configmaps (Fail), within the grants",
        "webhook: mutating core configmaps (Fail), within the grants",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
}

/// `check` names the contract and world of 0.1 and 0.2 components (each 0.2 world loads), the
/// writes granted with the RBAC verbs they need, and refuses a declaration its world cannot
/// honour.
#[test]
fn check_shows_the_contract_world_and_write_grants() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    let copy = |package: &str, file: &str| {
        let to = plugins.join(file);
        std::fs::copy(guest_path(package), &to).expect("copy guest");
        to.to_str().expect("utf-8").to_owned()
    };
    let controller = copy("sample-controller", "sample-controller.wasm");
    let raw_controller = copy("contract-v0-2", "contract.wasm");
    let batch_observer = copy("batch-observer", "batch-observer.wasm");
    let observer = copy("observer-v0-2", "observer.wasm");
    let reconciler = copy("reconciler-v0-2", "reconciler.wasm");
    let wrong = copy("observer-v0-2", "wrong.wasm");
    let old = copy("pod-diff", "pod-diff.wasm");
    let config = dir.path().join("kubewasm.toml");
    std::fs::write(
        &config,
        "[plugins.sample-controller]\nwrites = [\"apps/Deployment\", \"Event\"]\n\n\
         [plugins.wrong]\nconfig = '{\"queue\": true}'\n",
    )
    .expect("config");
    let config = config.to_str().expect("utf-8");
    let check = |file: &str| {
        let out = run(&["check", "--config", config, file], dir.path());
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };

    let (code, text) = check(&controller);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("contract: kubewasm:controller@0.2.2, world batch-controller"),
        "the SDK builds batch-controllers: {text}"
    );
    assert!(
        text.contains("writes:  apps deployments: RBAC verbs create, update, patch, delete"),
        "{text}"
    );
    assert!(text.contains("writes:  core events"), "{text}");

    let (code, text) = check(&raw_controller);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("contract: kubewasm:controller@0.2.0, world controller"),
        "{text}"
    );
    let (code, text) = check(&batch_observer);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("@0.2.1, world batch-observer"), "{text}");
    let (code, text) = check(&observer);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("@0.2.0, world observer"), "{text}");
    assert!(text.contains("writes:  none granted"), "{text}");
    let (code, text) = check(&reconciler);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("@0.2.0, world reconciler"), "{text}");
    let (code, text) = check(&old);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("contract: kubewasm:controller@0.1.0, world controller"),
        "{text}"
    );

    let (code, text) = check(&wrong);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("wrong.wasm: FAILED") && text.contains("world `observer`"),
        "{text}"
    );
}

/// `kubewasm rbac --plugins DIR --config FILE | kubectl apply -f -` against the development API
/// server: one plugin takes its custom kind from its config string, one file is no component.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_output_applies_with_kubectl_and_grants_what_the_plugins_watch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(
        dir.path(),
        &["pod-diff", "ready-pods", "custom-resource-log"],
    );
    std::fs::write(plugins.join("broken.wasm"), b"not a component").expect("bad file");
    let plugins = plugins.to_str().expect("utf-8");
    let dev_config = kubewasm_tests::workspace_root().join("examples/kubewasm-dev.toml");
    let dev_config = dev_config.to_str().expect("utf-8");
    let out = run(
        &[
            "rbac",
            "--plugins",
            plugins,
            "--config",
            dev_config,
            "--namespace",
            "ops",
            "--service-account",
            "runner",
        ],
        dir.path(),
    );
    let (text, errors) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{text}{errors}");
    assert!(
        errors.contains("broken.wasm: skipped"),
        "the bad file is reported: {errors}"
    );
    assert!(
        !errors.contains('\u{1b}'),
        "no colour codes in a log that is not a terminal: {errors}"
    );

    let list: Value = serde_norway::from_str(&text).expect("the output is YAML");
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().expect("items");
    let kinds: Vec<&str> = items.iter().filter_map(|i| i["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding"
        ]
    );
    let role: k8s_openapi::api::rbac::v1::ClusterRole =
        serde_json::from_value(items[2].clone()).expect("a ClusterRole");
    let mut granted: Vec<(String, String, Vec<String>)> = Vec::new();
    for rule in role.rules.unwrap_or_default() {
        for group in rule.api_groups.unwrap_or_default() {
            for resource in rule.resources.clone().unwrap_or_default() {
                granted.push((group.clone(), resource, rule.verbs.clone()));
            }
        }
    }
    granted.sort();
    let verbs = vec!["get".to_string(), "list".into(), "watch".into()];
    let want: Vec<(String, String, Vec<String>)> = [
        ("", "configmaps"),
        ("", "pods"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("demo.kubewasm.io", "backups"),
    ]
    .iter()
    .map(|(g, r)| (g.to_string(), r.to_string(), verbs.clone()))
    .collect();
    assert_eq!(
        granted, want,
        "the custom kind comes from the config string"
    );

    let (server, client) = kubewasm_tests::devserver().await;
    let kubectl = kubewasm_tests::Kubectl::for_server(&server, dir.path());
    let applied = kubectl
        .run_with_input(&["apply", "-f", "-"], Some(text.clone()))
        .await;
    assert_eq!(
        applied.lines().filter(|l| l.ends_with(" created")).count(),
        4,
        "{applied}"
    );
    let again = kubectl
        .run_with_input(&["apply", "-f", "-"], Some(text))
        .await;
    assert!(
        again.lines().all(|line| line.ends_with(" unchanged")),
        "applying twice changes nothing: {again}"
    );
    let account: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), "ops");
    account.get("runner").await.expect("the service account");
    let stored: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
    let stored = stored.get("kubewasm").await.expect("the ClusterRole");
    assert_eq!(
        serde_json::to_value(&stored.rules).expect("rules"),
        items[2]["rules"]
    );
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = Api::all(client);
    let binding = bindings
        .get("kubewasm")
        .await
        .expect("the ClusterRoleBinding");
    assert_eq!(binding.role_ref.name, "kubewasm");
    let subject = &binding.subjects.unwrap_or_default()[0];
    assert_eq!(
        (
            subject.kind.as_str(),
            subject.name.as_str(),
            subject.namespace.as_deref()
        ),
        ("ServiceAccount", "runner", Some("ops"))
    );
    server.shutdown().await;

    // Without the config the plugin that needs a kind from it does not load: it is reported and
    // skipped, not guessed.
    let out = run(&["rbac", "--plugins", plugins], dir.path());
    let (text, errors) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{text}{errors}");
    assert!(
        errors.contains("custom-resource-log.wasm: skipped")
            && errors.contains("group/version/Kind"),
        "{errors}"
    );
    assert!(!text.contains("backups"), "{text}");
}

#[test]
fn bad_config_and_unreadable_plugins_dir_exit_2_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins dir");
    let plugins = plugins.to_str().expect("utf-8");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("config");
        path.to_str().expect("utf-8").to_owned()
    };
    let cases = [
        (
            write("unknown.toml", "[defaults]\nmemory = 3\n"),
            "unknown field `memory`",
        ),
        (
            write("value.toml", "[defaults]\ncall-deadline-ms = 0\n"),
            "call-deadline-ms must be > 0",
        ),
        (
            write("grant.toml", "[defaults]\ngrants = [\"a/b/c\"]\n"),
            "bad grant `a/b/c`",
        ),
        (
            dir.path()
                .join("missing.toml")
                .to_str()
                .expect("utf-8")
                .to_owned(),
            "cannot read config file",
        ),
    ];
    for (config, wanted) in &cases {
        let out = run(
            &["dev", "--plugins", plugins, "--config", config],
            dir.path(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {err}");
        assert!(err.contains(wanted), "{config}: wanted {wanted:?} in {err}");
        assert!(err.contains(config.as_str()), "{config} not named in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }

    let missing = dir.path().join("no-such-dir");
    let out = run(
        &["dev", "--plugins", missing.to_str().expect("utf-8")],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot read plugins directory"), "{err}");

    let out = run(&["dev", "--plugins", plugins, "--no-such-flag"], dir.path());
    assert_eq!(out.status.code(), Some(2));
}

/// `rbac --leader-elect` adds a Role with the Lease verbs in the Lease's namespace (the service
/// account's unless named), more verbs with `--shards`; without either, no Lease access is asked
/// for.
#[test]
fn rbac_with_leader_elect_grants_the_lease_verbs_in_the_lease_namespace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(dir.path(), &[]);
    let plugins = plugins.to_str().expect("utf-8");
    let items = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["rbac", "--plugins", plugins, "--namespace", "ops"];
        args.extend(extra);
        let out = run(&args, dir.path());
        assert!(out.status.success(), "{out:?}");
        let list: Value = serde_norway::from_str(&String::from_utf8_lossy(&out.stdout))
            .expect("the output is YAML");
        list["items"].as_array().expect("items").clone()
    };
    let kinds = |items: &[Value]| -> Vec<String> {
        items
            .iter()
            .filter_map(|i| i["kind"].as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(kinds(&items(&[])), ["Namespace", "ServiceAccount"]);
    for (extra, namespace) in [
        (&["--leader-elect"][..], "ops"),
        (
            &["--leader-elect", "--leader-elect-namespace", "kube-system"][..],
            "kube-system",
        ),
    ] {
        let items = items(extra);
        assert_eq!(
            kinds(&items),
            ["Namespace", "ServiceAccount", "Role", "RoleBinding"]
        );
        assert_eq!(items[2]["metadata"]["namespace"], namespace);
        assert_eq!(
            items[2]["rules"],
            json!([{
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "verbs": ["create", "get", "update"],
            }])
        );
    }
    // Sharded: the member Leases are also applied, listed and deleted.
    let sharded = items(&["--shards", "4"]);
    assert_eq!(sharded[2]["metadata"]["namespace"], "ops");
    assert_eq!(
        sharded[2]["rules"][0]["verbs"],
        json!(["create", "delete", "get", "list", "patch", "update"])
    );
}

/// Several replicas of the sample-controller: failover, sharding, benchmarks.
mod replicas;

/// The real-server tier: a real kube-apiserver from `KUBEBUILDER_ASSETS` (see
/// `kubewasm_tests::envtest`), where RBAC is enforced.
mod real {
    use kubewasm_tests::envtest::{Connection, Envtest, SharedEnvtest, User};
    use kubewasm_tests::{Kubectl, kubectl_binary, workspace_root};

    use super::*;

    /// The example plugins, one of which takes its kind (the Backup CRD) from its config string.
    const EXAMPLES: [&str; 3] = ["pod-diff", "ready-pods", "custom-resource-log"];

    /// `kubewasm rbac` applied with kubectl as admin grants exactly what the host needs: run as
    /// that service account, every plugin syncs with no 403 and /readyz answers 200. Without the
    /// rule for the custom resource, that informer is refused (403) and /readyz stays 503.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rbac_output_grants_exactly_what_the_host_run_as_its_service_account_needs() {
        let server = Envtest::start().await.expect("the real API server starts");
        let dir = tempfile::tempdir().expect("tempdir");
        let plugins = plugins_dir(dir.path(), &EXAMPLES);
        let config = workspace_root().join("examples/kubewasm-dev.toml");
        let kubectl = Kubectl {
            binary: kubectl_binary(),
            kubeconfig: server.kubeconfig(User::Admin),
            cache_dir: dir.path().join("kubectl-cache"),
        };
        apply_example_backups(&kubectl).await;

        // Everything `kubewasm rbac` prints, applied as admin.
        let full = rbac_objects(&plugins, &config, "ops", "runner", "kubewasm", dir.path());
        apply(&kubectl, &full).await;
        let user = "system:serviceaccount:ops:runner";
        wait_granted(&kubectl, user, "backups.demo.kubewasm.io").await;
        let host = run_as(&server, &plugins, &config, "ops", "runner").await;
        let addr = host.logged_field("serving /metrics", "addr").await;
        let ready = wait_until(PATIENCE, || get(&format!("http://{addr}/readyz")).0 == 200).await;
        assert!(ready, "/readyz never answered 200: {:#?}", host.logs());
        host.wait_guest_line(
            "custom-resource-log",
            "Backup shop/web-config-nightly added (initial list)",
        )
        .await;
        let refused = refusals(&host);
        assert!(refused.is_empty(), "403s with the full RBAC: {refused:#?}");
        let listed = listed_by(&server, user);
        for resource in [
            "pods",
            "configmaps",
            "deployments",
            "replicasets",
            "backups",
        ] {
            assert!(
                listed.iter().any(|r| r == resource),
                "{user} never listed {resource}: {listed:?}"
            );
        }
        assert!(host.terminate().success());

        // The same output minus the rule for the custom resource, for another account.
        let mut partial = rbac_objects(&plugins, &config, "ops2", "partial", "partial", dir.path());
        let role = partial
            .iter_mut()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("a ClusterRole");
        let rules = role["rules"].as_array_mut().expect("rules");
        let before = rules.len();
        rules.retain(|rule| rule["apiGroups"] != json!(["demo.kubewasm.io"]));
        assert_eq!(
            rules.len(),
            before - 1,
            "one rule names the custom resource"
        );
        apply(&kubectl, &partial).await;
        let user = "system:serviceaccount:ops2:partial";
        wait_granted(&kubectl, user, "pods").await;
        let host = run_as(&server, &plugins, &config, "ops2", "partial").await;
        let addr = host.logged_field("serving /metrics", "addr").await;
        let refused = wait_until(PATIENCE, || {
            refusals(&host).iter().any(|line| line.contains("backups"))
        })
        .await;
        assert!(refused, "no 403 for backups logged: {:#?}", host.logs());
        // The other plugins' informers sync meanwhile; the host stays not ready.
        let synced = wait_until(PATIENCE, || {
            let listed = listed_by(&server, user);
            ["pods", "configmaps", "deployments", "replicasets"]
                .iter()
                .all(|r| listed.iter().any(|l| l == r))
        })
        .await;
        assert!(synced, "{user} listed only {:?}", listed_by(&server, user));
        assert_eq!(get(&format!("http://{addr}/readyz")).0, 503);
        let refused = refusals(&host);
        assert!(
            refused.iter().all(|line| line.contains("backups")),
            "only the custom resource is refused: {refused:#?}"
        );
        assert!(host.terminate().success());
    }

    /// With `[impersonation]`, each plugin writes as its own service account from `kubewasm
    /// rbac`'s output, and the API server, not only the host, enforces each plugin's grants.
    /// Two copies of the mirror guest are both granted ConfigMap writes by the host's config;
    /// `mirror`'s account has the rule `kubewasm rbac` printed, `copycat`'s has it taken away (a
    /// grant the host wrongly allows). The host runs as its own restricted account, which may
    /// not write ConfigMaps at all: `mirror`'s create succeeds and the audit log shows the host's
    /// account impersonating `plugin-mirror` (with its groups) and `plugin/mirror` as the agent;
    /// `copycat`'s create is refused by the server (403, audited as `plugin-copycat`), counted in
    /// the host's metrics and reported to the guest. The host's own LISTs and WATCHes are not
    /// impersonated. Without the Impersonate-User header both creates would be the host's, and
    /// refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_plugin_writes_as_its_own_service_account_and_the_server_enforces_its_grants() {
        let server = SharedEnvtest::attach()
            .await
            .expect("the shared real API server");
        let dir = tempfile::tempdir().expect("tempdir");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        let mirror = kubewasm_tests::guest_bytes("mirror-v0-2");
        for name in ["mirror", "copycat"] {
            std::fs::write(plugins.join(format!("{name}.wasm")), &mirror).expect("plugin file");
        }
        let config = dir.path().join("kubewasm.toml");
        std::fs::write(
            &config,
            "[defaults]\ngrants = [\"ConfigMap\"]\n\
             [impersonation]\nnamespace = \"imp-plugins\"\n\
             [plugins.mirror]\nconfig = \"mirror\"\nwrites = [\"ConfigMap\"]\n\
             [plugins.copycat]\nconfig = \"copycat\"\nwrites = [\"ConfigMap\"]\n",
        )
        .expect("config");
        let kubectl = Kubectl {
            binary: kubectl_binary(),
            kubeconfig: server.kubeconfig(User::Admin),
            cache_dir: dir.path().join("kubectl-cache"),
        };

        let mut objects = rbac_objects(&plugins, &config, "imp-ops", "runner", "imp", dir.path());
        let host_rules = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "imp")
            .map(|o| o["rules"].clone())
            .expect("the host's ClusterRole");
        assert_eq!(
            host_rules,
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]),
            "the host itself may only read"
        );
        let copycat = objects
            .iter_mut()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "imp-plugin-copycat")
            .expect("copycat's ClusterRole");
        copycat["rules"] = json!([]);
        apply(&kubectl, &objects).await;
        let mirror_user = "system:serviceaccount:imp-plugins:plugin-mirror";
        let copycat_user = "system:serviceaccount:imp-plugins:plugin-copycat";
        let host_user = "system:serviceaccount:imp-ops:runner";
        wait_can(
            &kubectl,
            mirror_user,
            &["create", "configmaps", "-n", "imp-work"],
        )
        .await;
        for account in ["plugin-mirror", "plugin-copycat"] {
            let resource = format!("serviceaccounts/{account}");
            wait_can(
                &kubectl,
                host_user,
                &["impersonate", &resource, "-n", "imp-plugins"],
            )
            .await;
        }
        wait_can(
            &kubectl,
            host_user,
            &["list", "configmaps", "--all-namespaces"],
        )
        .await;

        let admin = server.admin();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "imp-work"}})).expect("ns"),
            )
            .await
            .expect("the work namespace");
        // copycat runs alone first: once mirror's copy is in the cache, copycat would not try.
        let aside = dir.path().join("mirror.wasm.aside");
        std::fs::rename(plugins.join("mirror.wasm"), &aside).expect("mirror set aside");
        let host = run_as(&server, &plugins, &config, "imp-ops", "runner").await;
        let addr = host.logged_field("serving /metrics", "addr").await;
        let config_maps: Api<ConfigMap> = Api::namespaced(admin, "imp-work");
        config_maps
            .create(
                &PostParams::default(),
                &ConfigMap {
                    metadata: ObjectMeta {
                        name: Some("src".into()),
                        labels: Some([("kubewasm.io/mirror".into(), "true".into())].into()),
                        ..ObjectMeta::default()
                    },
                    data: Some([("k".into(), "v".into())].into()),
                    ..ConfigMap::default()
                },
            )
            .await
            .expect("the source ConfigMap");

        let creates = || {
            server
                .audit_events()
                .expect("the audit log")
                .into_iter()
                .filter(|e| {
                    e.verb == "create"
                        && e.resource == "configmaps"
                        && e.namespace.as_deref() == Some("imp-work")
                        && e.user == host_user
                })
                .collect::<Vec<_>>()
        };
        let audited = |user: &str, code: u16| {
            creates()
                .into_iter()
                .any(|e| e.impersonated_user.as_deref() == Some(user) && e.code == Some(code))
        };
        let refused = wait_until(PATIENCE, || audited(copycat_user, 403)).await;
        assert!(
            refused,
            "copycat's create refused by the server: {:#?}\n{:#?}",
            creates(),
            host.logs()
        );
        std::fs::rename(&aside, plugins.join("mirror.wasm")).expect("mirror added");
        let both = wait_until(PATIENCE, || {
            audited(mirror_user, 201) && audited(copycat_user, 403)
        })
        .await;
        assert!(
            both,
            "mirror's create allowed and copycat's refused by the server: {:#?}\n{:#?}",
            creates(),
            host.logs()
        );
        config_maps
            .get("src-mirror")
            .await
            .expect("mirror's copy exists");
        let version = env!("CARGO_PKG_VERSION");
        for event in creates() {
            let (user, agent) = match event.impersonated_user.as_deref() {
                Some(user) if user == mirror_user => (user, "mirror"),
                Some(user) if user == copycat_user => (user, "copycat"),
                other => panic!("a create not made as a plugin's account: {other:?} {event:?}"),
            };
            assert_eq!(
                event.user_agent,
                format!("kubewasm/{version} plugin/{agent}"),
                "{user}"
            );
            let namespace_group = "system:serviceaccounts:imp-plugins".to_owned();
            assert!(
                event.impersonated_groups.contains(&namespace_group),
                "{event:?}"
            );
        }
        assert!(
            !creates().iter().any(
                |e| e.impersonated_user.as_deref() == Some(copycat_user) && e.code == Some(201)
            ),
            "copycat never wrote"
        );
        // The host's own reads go as the host.
        let reads: Vec<_> = server
            .audit_events()
            .expect("the audit log")
            .into_iter()
            .filter(|e| e.user == host_user && ["list", "watch"].contains(&e.verb.as_str()))
            .collect();
        assert!(!reads.is_empty(), "the host's informers list as the host");
        assert!(
            reads.iter().all(|e| e.impersonated_user.is_none()),
            "{reads:#?}"
        );
        // The host counts the server's refusal and tells the guest.
        let refused = r#"kubewasm_plugin_write_calls_total{plugin="copycat",verb="create",resource="ConfigMap",code="403"}"#;
        let counted = wait_until(PATIENCE, || {
            get(&format!("http://{addr}/metrics"))
                .1
                .lines()
                .any(|l| l.starts_with(refused))
        })
        .await;
        assert!(counted, "no {refused} in /metrics");
        host.wait_guest_line("copycat", "REFUSED Forbidden").await;
        assert!(host.terminate().success());
    }

    /// Waits until the API server's authorizer has taken in the applied RBAC: `user` may do
    /// what `can` says (`kubectl auth can-i ARGS`, as admin impersonating `user`).
    async fn wait_can(kubectl: &Kubectl, user: &str, can: &[&str]) {
        let mut args = vec!["auth", "can-i"];
        args.extend_from_slice(can);
        args.extend_from_slice(&["--as", user]);
        let granted = wait_until(PATIENCE, || {
            kubectl
                .command(&args)
                .output()
                .is_ok_and(|out| out.status.success())
        })
        .await;
        assert!(granted, "{user} is never allowed {can:?}");
    }

    /// The example namespaces, the Backup CRD and two Backups (as `cargo xtask dev` has them).
    async fn apply_example_backups(kubectl: &Kubectl) {
        let manifests = workspace_root().join("examples/manifests");
        let namespaces = manifests.join("00-namespaces.yaml");
        let crd = manifests.join("40-backup-crd.yaml");
        let (namespaces, crd) = (
            namespaces.to_str().expect("utf-8"),
            crd.to_str().expect("utf-8"),
        );
        kubectl.run(&["apply", "-f", namespaces]).await;
        // The Backups in the CRD's file are refused until the CRD is established, so the file
        // is applied once for the CRD (that attempt fails on the Backups), then again.
        let first = kubectl.command(&["apply", "-f", crd]).output();
        assert!(first.is_ok(), "running kubectl apply: {first:?}");
        kubectl
            .run(&[
                "wait",
                "--for",
                "condition=established",
                "--timeout=60s",
                "crd/backups.demo.kubewasm.io",
            ])
            .await;
        kubectl.run(&["apply", "-f", crd]).await;
    }

    /// Waits until the API server's authorizer has taken in the applied RBAC: `user` may list
    /// `resource` in every namespace (`kubectl auth can-i`, as admin impersonating `user`).
    async fn wait_granted(kubectl: &Kubectl, user: &str, resource: &str) {
        let args = [
            "auth",
            "can-i",
            "list",
            resource,
            "--all-namespaces",
            "--as",
            user,
        ];
        let granted = wait_until(PATIENCE, || {
            kubectl
                .command(&args)
                .output()
                .is_ok_and(|out| out.status.success())
        })
        .await;
        assert!(granted, "{user} is never allowed to list {resource}");
    }

    /// The objects `kubewasm rbac` prints for the example plugins and this identity.
    fn rbac_objects(
        plugins: &Path,
        config: &Path,
        namespace: &str,
        account: &str,
        name: &str,
        cache: &Path,
    ) -> Vec<Value> {
        let out = run(
            &[
                "rbac",
                "--plugins",
                plugins.to_str().expect("utf-8"),
                "--config",
                config.to_str().expect("utf-8"),
                "--namespace",
                namespace,
                "--service-account",
                account,
                "--name",
                name,
            ],
            cache,
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list: Value = serde_norway::from_str(&text).expect("the output is YAML");
        list["items"].as_array().expect("items").clone()
    }

    /// `kubectl apply -f -` of `objects` as a List, as admin.
    async fn apply(kubectl: &Kubectl, objects: &[Value]) {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let applied = kubectl
            .run_with_input(&["apply", "-f", "-"], Some(list.to_string()))
            .await;
        assert_eq!(
            applied.lines().filter(|l| l.ends_with(" created")).count(),
            objects.len(),
            "{applied}"
        );
    }

    /// `kubewasm run` with the example plugins, authenticated as service account
    /// `namespace/account` with a token from the TokenRequest API.
    async fn run_as(
        server: &Connection,
        plugins: &Path,
        config: &Path,
        namespace: &str,
        account: &str,
    ) -> Host {
        let kubeconfig = server
            .service_account_kubeconfig(namespace, account)
            .await
            .expect("a token for the service account");
        Host::spawn(
            &[
                "run",
                "--plugins",
                plugins.to_str().expect("utf-8"),
                "--config",
                config.to_str().expect("utf-8"),
                "--kubeconfig",
                kubeconfig.to_str().expect("utf-8"),
            ],
            plugins,
            // One compilation cache for both runs of the same plugins.
            &[("XDG_CACHE_HOME", &plugins.with_file_name("cache"))],
            tempfile::tempdir().expect("tempdir"),
        )
    }

    /// The host's log lines that report a refusal (403 Forbidden) from the API server.
    fn refusals(host: &Host) -> Vec<String> {
        host.logs()
            .iter()
            .map(Value::to_string)
            .filter(|line| line.to_lowercase().contains("forbidden"))
            .collect()
    }

    /// The resources `user` has listed or watched, from the audit log.
    fn listed_by(server: &Envtest, user: &str) -> Vec<String> {
        server
            .audit_events()
            .expect("the audit log")
            .into_iter()
            .filter(|e| e.user == user && ["list", "watch"].contains(&e.verb.as_str()))
            .map(|e| e.resource)
            .collect()
    }
}

/// `kubewasm webhooks` prints the configurations of the admission policies in a directory (a
/// controller there serves none, a broken file is reported, a policy matching more than its
/// grants is skipped naming the grant it needs) with the Service and the caBundle, each
/// policy's configuration its own.
#[test]
fn webhooks_prints_a_configuration_per_declared_webhook() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(
        dir.path(),
        &["unique-ingress-host", "pod-diff", "admission-probe"],
    );
    std::fs::write(plugins.join("broken.wasm"), b"not a component").expect("bad file");
    let ca = dir.path().join("ca.crt");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
    )
    .expect("ca");
    let out = run(
        &[
            "webhooks",
            "--plugins",
            plugins.to_str().expect("utf-8"),
            "--service",
            "ops/kubewasm-webhooks",
            "--ca-bundle",
            ca.to_str().expect("utf-8"),
        ],
        dir.path(),
    );
    let (text, errors) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{text}{errors}");
    assert!(errors.contains("broken.wasm: skipped"), "{errors}");
    assert!(
        errors.contains("admission-probe.wasm: skipped")
            && errors.contains(
                "the mutating webhook's rule 0 matches `configmaps` (ConfigMap); it needs \
                 writes = [..., \"ConfigMap:patch\"] in [plugins.admission-probe]"
            ),
        "{errors}"
    );
    let list: Value = serde_norway::from_str(&text).expect("the output is YAML");
    let items = list["items"].as_array().expect("items");
    let kinds: Vec<&str> = items.iter().filter_map(|i| i["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Service", "ValidatingWebhookConfiguration"],
        "{text}"
    );
    let hooks = items[1]["webhooks"].as_array().expect("webhooks");
    assert_eq!(
        hooks.len(),
        1,
        "only the admission policy serves one: {text}"
    );
    assert_eq!(items[1]["metadata"]["name"], "kubewasm-unique-ingress-host");
    let hook = &hooks[0];
    assert_eq!(hook["name"], "unique-ingress-host.kubewasm.dev");
    assert_eq!(
        hook["clientConfig"]["service"]["path"],
        "/validate/unique-ingress-host"
    );
    assert_eq!(hook["clientConfig"]["service"]["namespace"], "ops");
    assert!(
        hook["clientConfig"]["caBundle"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    assert_eq!(hook["rules"][0]["resources"][0], "ingresses");
    assert_eq!(hook["failurePolicy"], "Fail");
}

/// The Python and JavaScript admission examples are contract 0.3 policies to `check`, `webhooks`
/// prints their webhooks, and `rbac` grants what allowed-registries reads: the ConfigMaps of
/// its namespace (the only thing it subscribes to).
#[test]
fn the_python_and_javascript_policies_check_serve_webhooks_and_get_their_rbac() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugins = plugins_dir(dir.path(), &["allowed-registries", "default-requests-js"]);
    // The big components compile once for every test that loads them.
    let cache = crate::fixture::shared_cache_home();
    // The mutating policy needs the grant to patch Pods: `check` refuses it without.
    let config = dir.path().join("kubewasm.toml");
    std::fs::write(
        &config,
        "[plugins.default-requests-js]\nwrites = [\"Pod:patch\"]\n",
    )
    .expect("config");
    let config_arg = config.to_str().expect("utf-8");
    for guest in ["allowed-registries", "default-requests-js"] {
        let file = plugins.join(format!("{guest}.wasm"));
        let file = file.to_str().expect("utf-8");
        let out = run(&["check", "--config", config_arg, file], &cache);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(
            text.contains("contract: kubewasm:controller@0.3.0, world admission-policy"),
            "{text}"
        );
    }
    let ungranted = plugins.join("default-requests-js.wasm");
    let out = run(&["check", ungranted.to_str().expect("utf-8")], &cache);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("writes = [..., \"Pod:patch\"] in [plugins.default-requests-js]"),
        "{text}"
    );
    let plugins = plugins.to_str().expect("utf-8");
    let out = run(
        &[
            "webhooks",
            "--plugins",
            plugins,
            "--config",
            config.to_str().expect("utf-8"),
            "--url",
            "https://127.0.0.1:8443",
        ],
        &cache,
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    // kubectl reads YAML 1.1, where a plain `off` is the boolean false: the opt-out label's
    // value must be quoted or the API server gets `values: [false]` and refuses the object.
    assert!(text.contains("- \"off\"\n"), "{text}");
    let list: Value = serde_norway::from_str(&text).expect("YAML");
    let hooks: Vec<(&str, &str, &str)> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .flat_map(|item| {
            let kind = item["kind"].as_str().unwrap_or_default();
            item["webhooks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |hook| {
                    (
                        kind,
                        hook["name"].as_str().unwrap_or_default(),
                        hook["failurePolicy"].as_str().unwrap_or_default(),
                    )
                })
        })
        .collect();
    assert_eq!(
        hooks,
        [
            (
                "ValidatingWebhookConfiguration",
                "allowed-registries.kubewasm.dev",
                "Fail"
            ),
            (
                "MutatingWebhookConfiguration",
                "default-requests-js.kubewasm.dev",
                "Ignore"
            ),
        ]
    );
    let out = run(
        &["rbac", "--plugins", plugins, "--namespace", "ops"],
        &cache,
    );
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_norway::from_str(&String::from_utf8_lossy(&out.stdout)).expect("YAML");
    let role = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["kind"] == "Role" && i["metadata"]["namespace"] == "kubewasm-system")
        .unwrap_or_else(|| panic!("no Role in kubewasm-system: {list:?}"));
    assert_eq!(role["rules"][0]["resources"][0], "configmaps");
    let verbs = &role["rules"][0]["verbs"];
    assert!(
        ["list", "watch"]
            .iter()
            .all(|v| verbs.as_array().unwrap().iter().any(|have| have == v)),
        "{verbs:?}"
    );
}
