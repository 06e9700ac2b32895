//! Plugins from an OCI registry, against a real registry on loopback: Debian's
//! `docker-registry` (installed by `cargo xtask test`), started here on a free port with its
//! storage in a temporary directory. Nothing of the protocol is mocked.
//!
//! Without the registry (not root, so `cargo xtask test` could not install it) these tests
//! fail saying so; `cargo xtask test` leaves them out then, and says it did.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::Verb;
use kubewasm_tests::{
    devserver, free_port, guest_bytes, guest_logs, http_get, probe_events, variant, wait_until,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");
const REGISTRY: &str = "/usr/bin/docker-registry";
/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(60);
const PASSWORD: &str = "pw-9f3c1e77-never-logged";

/// A `docker-registry serve` process on `127.0.0.1:port`, storing under `dir`.
struct TestRegistry {
    port: u16,
    dir: tempfile::TempDir,
    auth: bool,
    child: Option<Child>,
}

impl TestRegistry {
    /// Starts a registry; with `auth`, it requires user `ci` with [`PASSWORD`] (htpasswd, bcrypt).
    fn start(auth: bool) -> TestRegistry {
        assert!(
            Path::new(REGISTRY).exists(),
            "{REGISTRY} is missing: install Debian's docker-registry (`cargo xtask test` does, as root)"
        );
        let mut registry = TestRegistry {
            port: free_port(),
            dir: tempfile::tempdir().expect("registry dir"),
            auth,
            child: None,
        };
        registry.resume();
        registry
    }

    /// (Re)starts the registry on the same port and storage.
    fn resume(&mut self) {
        let storage = self.dir.path().join("storage");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{}\n",
            storage.display(),
            self.port
        );
        if self.auth {
            let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
            let htpasswd = self.dir.path().join("htpasswd");
            std::fs::write(&htpasswd, format!("ci:{hash}\n")).expect("htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: kubewasm-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let path = self.dir.path().join("config.yml");
        std::fs::write(&path, config).expect("registry config");
        let child = Command::new(REGISTRY)
            .arg("serve")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry starts");
        self.child = Some(child);
        let port = self.port;
        let up = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            http_get(port, "/v2/").is_some()
        });
        assert!(up, "the registry never answered on port {port}");
    }

    /// Stops the registry (its storage stays).
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Overwrites the stored blob `digest` with other bytes.
    fn corrupt_blob(&self, digest: &str) {
        let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
        let data = self
            .dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data");
        assert!(data.exists(), "no blob at {}", data.display());
        std::fs::write(&data, b"\0asm not what was pushed").expect("corrupt blob");
    }

    /// The stored manifest `digest` of `repo` (fetched by digest: served as pushed).
    fn manifest(&self, repo: &str, digest: &str) -> Value {
        use std::io::{Read as _, Write as _};
        let mut stream =
            std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("registry connection");
        write!(
            stream,
            "GET /v2/{repo}/manifests/{digest} HTTP/1.0\r\nHost: localhost\r\n\
             Accept: application/vnd.oci.image.manifest.v1+json\r\n\r\n"
        )
        .expect("request");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response");
        let (head, body) = response.split_once("\r\n\r\n").expect("HTTP response");
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "{response}"
        );
        serde_json::from_str(body).expect("manifest JSON")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs the `kubewasm` binary; fails the test if it prints the password anywhere.
fn kubewasm(args: &[&str], cwd: &Path) -> Output {
    let output = Command::new(BIN)
        .args(args)
        .args(["--log", "trace"])
        .current_dir(cwd)
        .env("XDG_CACHE_HOME", cwd.join("cache"))
        .env("DOCKER_CONFIG", cwd.join("no-docker-config"))
        .output()
        .expect("kubewasm runs");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let encoded = base64_of(&format!("ci:{PASSWORD}"));
    assert!(
        !all.contains(PASSWORD) && !all.contains(&encoded),
        "the password was logged: {all}"
    );
    output
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "kubewasm failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Writes `bytes` as a plugin file in `dir`.
fn plugin_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("plugin file");
    path
}

/// Pushes `file` to `reference` with the binary; its manifest digest.
fn push(dir: &Path, file: &Path, reference: &str, extra: &[&str]) -> String {
    let file = file.to_string_lossy();
    let mut args = vec!["push", &file, reference, "--plain-http"];
    args.extend_from_slice(extra);
    let out = stdout(&kubewasm(&args, dir));
    out.rsplit_once('@').expect("REF@DIGEST").1.to_owned()
}

#[test]
fn registry_push_then_pull_by_tag_and_by_digest() {
    let registry = TestRegistry::start(false);
    let dir = tempfile::tempdir().expect("work dir");
    let probe = guest_bytes("probe");
    let file = plugin_file(dir.path(), "probe.wasm", &probe);
    let reference = format!("oci://{}/team/probe:1.0", registry.host());
    let source = "https://example.org/kubewasm/probe";
    let digest = push(dir.path(), &file, &reference, &["--source", source]);

    let manifest = registry.manifest("team/probe", &digest);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    let annotations = &manifest["annotations"];
    assert_eq!(annotations["dev.kubewasm.plugin.name"], "probe");
    assert_eq!(
        annotations["dev.kubewasm.plugin.contract"],
        "kubewasm:controller@0.1.0"
    );
    assert_eq!(annotations["org.opencontainers.image.source"], source);

    // By tag, named by the artifact's plugin name; by digest, where asked.
    let out = stdout(&kubewasm(&["pull", &reference, "--plain-http"], dir.path()));
    assert_eq!(out, format!("probe.wasm {digest}"));
    assert_eq!(std::fs::read(dir.path().join("probe.wasm")).unwrap(), probe);
    let pinned = format!("{}/team/probe@{digest}", registry.host());
    let out = stdout(&kubewasm(
        &["pull", &pinned, "--plain-http", "-o", "pinned.wasm"],
        dir.path(),
    ));
    assert!(out.ends_with(&digest), "{out}");
    assert_eq!(
        std::fs::read(dir.path().join("pinned.wasm")).unwrap(),
        probe
    );

    // `kubewasm rbac` includes what a plugin configured by source needs.
    let config = dir.path().join("kubewasm.toml");
    std::fs::write(
        &config,
        format!(
            "[registries]\nplain-http = [\"{}\"]\n[plugins.fromreg]\nsource = \"{reference}\"\n\
             config = '{}'\n",
            registry.host(),
            probe_config("fromreg")
        ),
    )
    .unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let rbac = stdout(&kubewasm(
        &[
            "rbac",
            "--plugins",
            &empty.to_string_lossy(),
            "--config",
            &config.to_string_lossy(),
        ],
        dir.path(),
    ));
    assert!(rbac.contains("configmaps"), "{rbac}");

    // A tag that does not exist, and a corrupted blob: clear errors, nothing written.
    let missing = format!("{}/team/probe:nope", registry.host());
    let out = kubewasm(
        &["pull", &missing, "--plain-http", "-o", "x.wasm"],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not found"), "{err}");
    let layer = manifest["layers"][0]["digest"].as_str().unwrap().to_owned();
    registry.corrupt_blob(&layer);
    let out = kubewasm(
        &["pull", &pinned, "--plain-http", "-o", "bad.wasm"],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("digest"), "{err}");
    assert!(!dir.path().join("bad.wasm").exists());
}

#[test]
fn registry_auth_is_required_and_given_and_never_logged() {
    let registry = TestRegistry::start(true);
    let dir = tempfile::tempdir().expect("work dir");
    let file = plugin_file(dir.path(), "probe.wasm", &guest_bytes("probe"));
    let reference = format!("{}/team/private:1", registry.host());

    let out = kubewasm(
        &["push", &file.to_string_lossy(), &reference, "--plain-http"],
        dir.path(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("refused access"),
        "{err}"
    );

    // A mounted dockerconfigjson Secret: the directory holding `.dockerconfigjson`.
    let secret = dir.path().join("secret");
    std::fs::create_dir(&secret).unwrap();
    let auths = serde_json::json!({"auths": {registry.host(): {"auth": base64_of(&format!("ci:{PASSWORD}"))}}});
    std::fs::write(secret.join(".dockerconfigjson"), auths.to_string()).unwrap();
    let secret = secret.to_string_lossy();
    let digest = push(
        dir.path(),
        &file,
        &reference,
        &["--registry-config", &secret],
    );
    let out = stdout(&kubewasm(
        &[
            "pull",
            &reference,
            "--plain-http",
            "--registry-config",
            &secret,
            "-o",
            "p.wasm",
        ],
        dir.path(),
    ));
    assert!(out.ends_with(&digest), "{out}");
    let out = kubewasm(
        &["pull", &reference, "--plain-http", "-o", "q.wasm"],
        dir.path(),
    );
    assert!(!out.status.success());
}

/// A host running in this process, against the dev API server.
struct App {
    port: u16,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl App {
    fn start(client: kube::Client, plugins: &Path, cache: &Path, config: &str) -> App {
        let config =
            kubewasm::config::Config::parse(config, Path::new("test.toml")).expect("config");
        let port = free_port();
        let args = kubewasm::cli::HostArgs {
            plugins: plugins.to_owned(),
            config: None,
            cache_dir: Some(cache.to_owned()),
            metrics_addr: ([127, 0, 0, 1], port).into(),
            shutdown_grace: 5,
            registry_config: None,
            leader: Default::default(),
            webhook: Default::default(),
        };
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let task =
            tokio::spawn(async move { kubewasm::app::run(client, &args, config, stop).await });
        App { port, cancel, task }
    }

    fn status(&self) -> Value {
        http_get(self.port, "/plugins")
            .and_then(|(_, body)| serde_json::from_str(&body).ok())
            .unwrap_or(Value::Null)
    }

    fn source(&self, plugin: &str) -> Value {
        let status = self.status();
        status["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["plugin"] == plugin)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The content hash of the running plugin named `name`.
    fn running(&self, name: &str) -> Option<String> {
        let status = self.status();
        status["plugins"]
            .as_array()?
            .iter()
            .find(|p| p["name"] == name && p["state"] == "running")
            .and_then(|p| p["content_hash"].as_str().map(str::to_owned))
    }

    async fn wait(&self, what: &str, check: impl Fn(&App) -> bool) {
        let done = wait_until(PATIENCE, || check(self)).await;
        assert!(done, "{what}; /plugins: {:#}", self.status());
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("host task").expect("host ran");
    }
}

fn probe_config(name: &str) -> String {
    serde_json::json!({
        "name": name,
        "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "default"}],
    })
    .to_string()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Pushes an ordinary container image (a tar layer), which is no plugin.
async fn push_container_image(host: &str, repo_tag: &str) {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: oci_client::Reference = format!("{host}/{repo_tag}").parse().expect("reference");
    let layer = ImageLayer::oci_v1(b"not a component".to_vec(), None);
    let config = Config::oci_v1(b"{}".to_vec(), None);
    let anonymous = oci_client::secrets::RegistryAuth::Anonymous;
    client
        .push(&reference, &[layer], config, &anonymous, None)
        .await
        .expect("push a container image");
}

/// Waits until `plugin` has heard of the ConfigMap `name` at `rv` (live or replayed).
async fn wait_added(plugin: &str, name: &str, rv: &str) {
    let line = format!("EVENT add default/{name} rv={rv} ");
    let heard = wait_until(PATIENCE, || {
        probe_events(plugin).iter().any(|e| e.starts_with(&line))
    })
    .await;
    assert!(
        heard,
        "{plugin} never heard of {name}: {:?}",
        probe_events(plugin)
    );
}

async fn create(api: &Api<ConfigMap>, name: &str) -> String {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    created.metadata.resource_version.expect("resourceVersion")
}

/// A tag followed with `poll-seconds` hot-swaps the running plugin when it moves (no new LIST or
/// WATCH), bad sources fail alone with their reason shown, the registry going away mid-poll
/// leaves the last good version running until it is back, and a restart while it is down
/// starts from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_sources_hot_swap_and_survive_registry_faults() {
    guest_logs();
    let mut registry = TestRegistry::start(false);
    let work = tempfile::tempdir().expect("work dir");
    let (plugins, cache) = (work.path().join("plugins"), work.path().join("cache"));
    std::fs::create_dir_all(&plugins).unwrap();
    let probe = guest_bytes("probe");
    let versions: Vec<Vec<u8>> = (1..=3).map(|n| variant(&probe, n)).collect();
    let files: Vec<PathBuf> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| plugin_file(work.path(), &format!("v{i}.wasm"), v))
        .collect();
    let host = registry.host();
    let tag = format!("oci://{host}/team/hot:stable");
    push(work.path(), &files[0], &tag, &[]);
    // A pinned digest whose blob the registry then serves corrupted.
    let bad = push(work.path(), &files[2], &format!("{host}/team/bad:1"), &[]);
    let layer = registry.manifest("team/bad", &bad)["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    registry.corrupt_blob(&layer);
    push_container_image(&host, "team/image:1").await;

    let config = format!(
        "[registries]\nplain-http = [\"{host}\"]\n\
         [plugins.hot]\nsource = \"{tag}\"\npoll-seconds = 1\nconfig = '{}'\n\
         [plugins.bad]\nsource = \"oci://{host}/team/bad@{bad}\"\nconfig = '{}'\n\
         [plugins.missing]\nsource = \"oci://{host}/team/missing:1\"\npoll-seconds = 1\n\
         [plugins.image]\nsource = \"oci://{host}/team/image:1\"\n",
        probe_config("hot"),
        probe_config("bad"),
    );
    let (server, client) = devserver().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let app = App::start(client.clone(), &plugins, &cache, &config);
    app.wait("v1 runs", |a| {
        a.running("hot") == Some(sha256(&versions[0]))
    })
    .await;
    let rv = create(&config_maps, "a1").await;
    wait_added("hot", "a1", &rv).await;
    app.wait("the bad sources show their errors", |a| {
        a.source("bad")["error_kind"] == "digest-mismatch"
            && a.source("missing")["error_kind"] == "not-found"
            && a.source("image")["error_kind"] == "not-wasm"
    })
    .await;
    assert!(app.running("bad").is_none());
    let logged = guest_logs().host_lines("bad");
    assert!(
        logged
            .iter()
            .any(|l| l.starts_with("cannot pull the plugin")),
        "{logged:?}"
    );
    let pulls = http_get(app.port, "/metrics").expect("metrics").1;
    assert!(
        pulls.contains("kubewasm_plugin_oci_pulls_total{plugin=\"bad\",result=\"error\"}"),
        "{pulls}"
    );

    // The tag moves: the new version replaces the old through the reloader, informers warm.
    server.clear_requests();
    let d2 = push(work.path(), &files[1], &tag, &[]);
    app.wait("v2 replaces v1", |a| {
        a.running("hot") == Some(sha256(&versions[1]))
    })
    .await;
    assert_eq!(app.source("hot")["digest"], d2.as_str());
    let rv = create(&config_maps, "a2").await;
    wait_added("hot", "a2", &rv).await;
    let list_watches = server
        .requests()
        .iter()
        .filter(|r| matches!(r.verb, Verb::List | Verb::Watch) && r.resource == "configmaps")
        .count();
    assert_eq!(
        list_watches, 0,
        "the swap listed or watched ConfigMaps again"
    );

    // The registry goes away mid-poll: v2 keeps running and receiving events.
    registry.stop();
    app.wait("the outage is shown", |a| {
        a.source("hot")["error_kind"] == "unreachable"
    })
    .await;
    let rv = create(&config_maps, "a3").await;
    wait_added("hot", "a3", &rv).await;
    assert_eq!(app.running("hot"), Some(sha256(&versions[1])));
    registry.resume();
    app.wait("the source recovers", |a| {
        a.source("hot")["last_error"].is_null()
    })
    .await;
    app.stop().await;

    // A restart while the registry is down starts from the store.
    registry.stop();
    let app = App::start(client, &plugins, &cache, &config);
    app.wait("v2 runs from the store", |a| {
        a.running("hot") == Some(sha256(&versions[1]))
    })
    .await;
    assert_eq!(app.source("hot")["error_kind"], "unreachable");
    app.stop().await;
    server.shutdown().await;
}

/// The value of the series `series` (name and labels, as exposed) in `/metrics`.
fn metric(port: u16, series: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics")?;
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

/// Precompiled artifacts end to end: `kubewasm compile --out` makes them, `kubewasm push
/// --precompiled` ships them as a layer of their own (refusing code of another component), and
/// a host started from sources that trust them is ready with no compile run. Precompiled code
/// for another target, and code of a source that does not trust it, are not loaded: those
/// components are compiled, the refusal named in `/plugins` and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_started_from_precompiled_artifacts_compiles_nothing() {
    let registry = TestRegistry::start(false);
    let work = tempfile::tempdir().expect("work dir");
    let dir = work.path();
    let probe = guest_bytes("probe");
    let [trusted, foreign, untrusted] = [1, 2, 3].map(|n| variant(&probe, n));
    let files = [
        ("pre", &trusted),
        ("foreign", &foreign),
        ("untrusted", &untrusted),
    ]
    .map(|(name, bytes)| plugin_file(dir, &format!("{name}.wasm"), bytes));
    let out = dir.join("out");
    let compiled = stdout(&kubewasm(
        &[
            "compile",
            &files[0].to_string_lossy(),
            &files[2].to_string_lossy(),
            "--out",
            &out.to_string_lossy(),
        ],
        dir,
    ));
    assert!(compiled.contains("loads only into a host"), "{compiled}");
    let artifact = std::fs::read(out.join("pre.cwasm")).expect("pre.cwasm written");
    let parsed = kubewasm_runtime::precompiled::parse(&artifact).expect("a precompiled artifact");
    assert_eq!(parsed.header.component_sha256, sha256(&trusted));

    let host = registry.host();
    let precompiled = out.join("pre.cwasm");
    let pre = push(
        dir,
        &files[0],
        &format!("{host}/team/pre:1"),
        &["--precompiled", &precompiled.to_string_lossy()],
    );
    let manifest = registry.manifest("team/pre", &pre);
    assert_eq!(
        manifest["layers"][1]["mediaType"],
        kubewasm::oci::PRECOMPILED_MEDIA_TYPE
    );
    // Code of another component is refused at push, naming both.
    let refused = kubewasm(
        &[
            "push",
            &files[1].to_string_lossy(),
            &format!("{host}/team/foreign:1"),
            "--plain-http",
            "--precompiled",
            &precompiled.to_string_lossy(),
        ],
        dir,
    );
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("is not the precompiled code of") && said.contains("foreign.wasm"),
        "{said}"
    );
    // Code that claims another target (as if compiled by an aarch64 image's binary).
    let foreign_code = {
        let mut stamp = parsed.header.stamp.clone();
        stamp.target = "aarch64-linux-musl".into();
        kubewasm_runtime::precompiled::encode(&stamp, &sha256(&foreign), parsed.code)
    };
    let foreign_cwasm = dir.join("foreign.cwasm");
    std::fs::write(&foreign_cwasm, foreign_code).unwrap();
    push(
        dir,
        &files[1],
        &format!("{host}/team/foreign:1"),
        &["--precompiled", &foreign_cwasm.to_string_lossy()],
    );
    let untrusted_cwasm = out.join("untrusted.cwasm");
    push(
        dir,
        &files[2],
        &format!("{host}/team/untrusted:1"),
        &["--precompiled", &untrusted_cwasm.to_string_lossy()],
    );

    let (server, client) = devserver().await;
    let source = |name: &str, trust: bool| {
        format!(
            "[plugins.{name}]\nsource = \"oci://{host}/team/{name}:1\"\n\
             trust-precompiled = {trust}\nconfig = '{}'\n",
            probe_config(name)
        )
    };
    let registries = format!("[registries]\nplain-http = [\"{host}\"]\n");

    // A host whose only plugin ships matching precompiled code: ready, and no compile ran.
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let config = format!("{registries}{}", source("pre", true));
    let app = App::start(client.clone(), &plugins, &dir.join("cache-1"), &config);
    let ready = wait_until(PATIENCE, || {
        http_get(app.port, "/readyz").is_some_and(|(code, _)| code == 200)
    })
    .await;
    assert!(ready, "never ready; /plugins: {:#}", app.status());
    assert_eq!(app.running("pre"), Some(sha256(&trusted)));
    let plugin = |a: &App, name: &str| {
        a.status()["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["plugin"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(plugin(&app, "pre")["origin"], "precompiled");
    assert_eq!(
        app.source("pre")["precompiled"],
        manifest["layers"][1]["digest"]
    );
    let loads = |a: &App, origin: &str| {
        metric(
            a.port,
            &format!("kubewasm_plugin_code_loads_total{{origin=\"{origin}\"}}"),
        )
    };
    assert_eq!(loads(&app, "compiled"), Some(0.0), "a compile ran");
    assert_eq!(loads(&app, "precompiled"), Some(1.0));
    app.stop().await;

    // The real binary, as a pod runs it (`kubewasm dev`: the same host on its embedded API
    // server), from a fresh cache: ready with no compile.
    let config_file = dir.join("kubewasm.toml");
    std::fs::write(&config_file, &config).unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["dev", "--plugins", &plugins.to_string_lossy()])
        .args(["--config", &config_file.to_string_lossy()])
        .args(["--cache-dir", &dir.join("cache-bin").to_string_lossy()])
        .args([
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--port",
            "0",
        ])
        .args([
            "--kubeconfig-out",
            &dir.join("dev.kubeconfig").to_string_lossy(),
        ])
        .current_dir(dir)
        .env("DOCKER_CONFIG", dir.join("no-docker-config"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubewasm dev starts");
    struct Killed<'a>(&'a mut Child);
    impl Drop for Killed<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let binary = Killed(&mut child);
    let ready = wait_until(PATIENCE, || {
        http_get(port, "/readyz").is_some_and(|(code, _)| code == 200)
    })
    .await;
    let plugins_json = http_get(port, "/plugins").map(|(_, body)| body);
    assert!(ready, "the binary never became ready: {plugins_json:?}");
    let compiled = metric(
        port,
        "kubewasm_plugin_code_loads_total{origin=\"compiled\"}",
    );
    let precompiled = metric(
        port,
        "kubewasm_plugin_code_loads_total{origin=\"precompiled\"}",
    );
    assert_eq!(
        (compiled, precompiled),
        (Some(0.0), Some(1.0)),
        "the binary compiled: {plugins_json:?}"
    );
    drop(binary);

    // A restart with the registry down and the kept code gone from the compile cache: the code
    // is verified again from the store, and still nothing is compiled.
    let cache = dir.join("cache-1");
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".precompiled.cwasm") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let mut registry = registry;
    registry.stop();
    let app = App::start(client.clone(), &plugins, &cache, &config);
    let ready = wait_until(PATIENCE, || {
        http_get(app.port, "/readyz").is_some_and(|(code, _)| code == 200)
    })
    .await;
    assert!(
        ready,
        "never ready after the restart; /plugins: {:#}",
        app.status()
    );
    assert_eq!(plugin(&app, "pre")["origin"], "precompiled");
    assert_eq!(app.source("pre")["error_kind"], "unreachable");
    assert_eq!(
        loads(&app, "compiled"),
        Some(0.0),
        "a compile ran at the restart"
    );
    app.stop().await;
    registry.resume();

    // Mismatched and untrusted precompiled code is not loaded: compiled instead, and said so.
    let config = format!(
        "{registries}{}{}",
        source("foreign", true),
        source("untrusted", false)
    );
    let app = App::start(client, &plugins, &dir.join("cache-2"), &config);
    app.wait("both run, compiled", |a| {
        a.running("foreign") == Some(sha256(&foreign))
            && a.running("untrusted") == Some(sha256(&untrusted))
    })
    .await;
    for name in ["foreign", "untrusted"] {
        assert_eq!(plugin(&app, name)["origin"], "compiled", "{name}");
    }
    let why = app.source("foreign")["precompiled_error"].to_string();
    assert!(
        why.contains("target aarch64-linux-musl (this host: "),
        "{why}"
    );
    assert!(app.source("untrusted")["precompiled"].is_null());
    assert!(app.source("untrusted")["precompiled_error"].is_null());
    assert_eq!(loads(&app, "compiled"), Some(2.0));
    assert_eq!(loads(&app, "precompiled"), Some(0.0));
    assert_eq!(
        metric(
            app.port,
            "kubewasm_plugin_precompiled_refused_total{plugin=\"foreign\",reason=\"other-engine\"}"
        ),
        Some(1.0)
    );
    app.stop().await;
    server.shutdown().await;
}
