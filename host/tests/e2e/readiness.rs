//! `/readyz`, `/metrics` and `/plugins` end to end: the whole host (`app::run`, as `kubewasm dev`
//! runs it) on the dev API server with a plugins directory, probed over HTTP; and (`real::`) on
//! a real kube-apiserver behind a proxy that cuts its connections. Kept apart from the reload
//! tests, whose memory measurements the extra hosts here would disturb.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::DevServer;
use kubewasm_tests::{devserver, guest_bytes, guest_logs, write_settled};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Bounds every wait; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(30);

/// The whole host (`app::run`, as `kubewasm dev` runs it) on a dev server, serving its probes
/// on a free port.
struct App {
    port: u16,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// What the host's API server needs kept alive (the dev server).
    _server: Box<dyn std::any::Any + Send>,
    _cache: tempfile::TempDir,
}

impl App {
    async fn start(server: DevServer, plugins: &Path, config: &str) -> App {
        let client = server.client();
        App::start_with(client, Box::new(server), plugins, config)
    }

    /// The host on `client`'s API server; `server` is kept until the host is dropped.
    fn start_with(
        client: kube::Client,
        server: Box<dyn std::any::Any + Send>,
        plugins: &Path,
        config: &str,
    ) -> App {
        guest_logs();
        let config =
            kubewasm::config::Config::parse(config, Path::new("test.toml")).expect("config");
        let port = kubewasm_tests::free_port();
        let cache = tempfile::tempdir().expect("cache dir");
        let args = kubewasm::cli::HostArgs {
            plugins: plugins.to_owned(),
            config: None,
            cache_dir: Some(cache.path().to_owned()),
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
        App {
            port,
            cancel,
            task,
            _server: server,
            _cache: cache,
        }
    }

    async fn get(&self, path: &'static str) -> Option<(u16, String)> {
        let port = self.port;
        tokio::task::spawn_blocking(move || kubewasm_tests::http_get(port, path))
            .await
            .expect("GET task")
    }

    /// `/metrics` now.
    async fn metrics(&self) -> String {
        let (code, body) = self.get("/metrics").await.expect("/metrics answers");
        assert_eq!(code, 200, "{body}");
        body
    }

    /// `/plugins` now.
    async fn plugins(&self) -> serde_json::Value {
        let (_, body) = self.get("/plugins").await.expect("/plugins answers");
        serde_json::from_str(&body).expect("/plugins is JSON")
    }

    /// Waits until `check` holds for `/metrics`; the last scrape either way.
    async fn metrics_until(&self, check: impl Fn(&str) -> bool) -> (bool, String) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let text = self.metrics().await;
            if check(&text) || tokio::time::Instant::now() >= deadline {
                return (check(&text), text);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the first 200 from `/readyz` and returns `/plugins` as it was right then.
    async fn plugins_when_ready(&self) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some((200, _)) = self.get("/readyz").await {
                let (_, body) = self.get("/plugins").await.expect("/plugins answers");
                return serde_json::from_str(&body).expect("/plugins is JSON");
            }
            assert!(tokio::time::Instant::now() < deadline, "never ready");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("host task").expect("host ran");
    }
}

/// A `[plugins.NAME]` config entry for the probe.
fn probe_entry(file: &str, config: serde_json::Value) -> String {
    let config = serde_json::to_string(&config.to_string()).expect("a TOML string");
    format!("[plugins.{file}]\nconfig = {config}\n")
}

fn probe_config(name: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut config = json!({
        "name": name,
        "subscriptions": [{"group": "", "version": "v1", "kind": "ConfigMap", "namespace": "default"}],
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_a_plugin_file_found_at_start_that_is_not_loaded_yet() {
    let (server, _) = devserver().await;
    let dir = tempfile::tempdir().expect("plugins dir");
    // Just written: with a long debounce the host holds it back at its first scan.
    std::fs::write(dir.path().join("late.wasm"), guest_bytes("probe")).expect("write");
    let config = format!(
        "[reload]\ndebounce-ms = 1500\n{}",
        probe_entry("late", probe_config("ready-late", json!({})))
    );
    let app = App::start(server, dir.path(), &config).await;
    let listing = app.plugins_when_ready().await;
    let plugins = listing["plugins"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        plugins.len(),
        1,
        "ready before the plugin was loaded: {listing}"
    );
    assert_eq!(plugins[0]["name"], "ready-late");
    assert_eq!(plugins[0]["replay_done"], true, "{listing}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_not_held_back_by_a_plugin_that_keeps_failing_its_replay() {
    let (server, client) = devserver().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..20 {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("seed{i:02}")),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .expect("seed");
    }
    let dir = tempfile::tempdir().expect("plugins dir");
    write_settled(&dir.path().join("good.wasm"), &guest_bytes("probe"));
    write_settled(&dir.path().join("flappy.wasm"), &guest_bytes("probe"));
    let config = format!(
        "{}{}",
        probe_entry("good", probe_config("ready-good", json!({}))),
        probe_entry(
            "flappy",
            probe_config("ready-flappy", json!({"mode": "trap-every", "every": 3}))
        ),
    );
    let app = App::start(server, dir.path(), &config).await;
    let listing = app.plugins_when_ready().await;
    let plugins = listing["plugins"].as_array().cloned().unwrap_or_default();
    assert_eq!(plugins.len(), 2, "{listing}");
    for p in &plugins {
        let settled =
            (p["state"] == "running" && p["replay_done"] == true) || p["state"] == "failed";
        assert!(
            settled,
            "ready while a plugin was neither running nor failed: {listing}"
        );
    }
    let flappy = plugins
        .iter()
        .find(|p| p["name"] == "ready-flappy")
        .expect("flappy listed");
    assert_eq!(flappy["state"], "failed", "{listing}");
    assert!(
        flappy["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("trap")
    );
    app.stop().await;
}

/// The value of the sample `series` (name and labels, exactly as exposed), if it is there.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// A ConfigMap in `default` labelled for the mirror guest.
async fn mirrored(client: &kube::Client, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubewasm.io/mirror".to_owned(), "true".to_owned())].into()),
            ..ObjectMeta::default()
        },
        data: Some([("v".to_owned(), "one".to_owned())].into()),
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .expect("create ConfigMap");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_a_0_2_plugins_workqueue_writes_and_refusals_until_it_is_unloaded() {
    let (server, client) = devserver().await;
    let dir = tempfile::tempdir().expect("plugins dir");
    // The read-only mirror retries its refused create from 1 ms, doubling to at most 1 s:
    // ten refusals within its first second. The writing mirror comes later (its mirror
    // would end the refusals).
    write_settled(
        &dir.path().join("mirror-ro.wasm"),
        &guest_bytes("mirror-v0-2"),
    );
    let config = r#"
        [plugins.mirror]
        config = "wq-mirror"
        grants = ["ConfigMap"]
        writes = ["ConfigMap"]
        [plugins.mirror-ro]
        config = "wq-mirror-ro"
        grants = ["ConfigMap"]
        retry-base-delay-ms = 1
        retry-max-delay-seconds = 1
    "#;
    let app = App::start(server, dir.path(), config).await;
    app.plugins_when_ready().await;
    let started = tokio::time::Instant::now();
    mirrored(&client, "wq").await;
    let refused =
        r#"kubewasm_plugin_writes_refused_total{plugin="mirror-ro",reason="not-granted"}"#;
    let (ok, text) = app
        .metrics_until(|t| sample(t, refused).is_some_and(|n| n >= 10.0))
        .await;
    assert!(ok, "too few refusals counted:\n{text}");
    let elapsed = started.elapsed();
    // The refusals are counted, but the host's log has at most one line of them a second.
    let refusals = sample(&text, refused).unwrap_or_default();
    let logged = guest_logs()
        .host_lines("mirror-ro")
        .iter()
        .filter(|l| l.starts_with("write refused"))
        .count();
    assert!(
        logged >= 1 && (logged as f64) < refusals && logged as u64 <= elapsed.as_secs() + 1,
        "{logged} refusal lines logged for {refusals} refusals in {elapsed:?}"
    );
    for (series, least) in [
        (r#"workqueue_retries_total{name="mirror-ro"}"#, 10.0),
        // A write that is not granted is counted under the kind `other`: the guest names it.
        (
            r#"kubewasm_plugin_write_calls_total{plugin="mirror-ro",verb="create",resource="other",code="not-granted"}"#,
            10.0,
        ),
    ] {
        assert!(
            sample(&text, series).is_some_and(|v| v >= least),
            "{series} below {least}:\n{text}"
        );
    }

    write_settled(&dir.path().join("mirror.wasm"), &guest_bytes("mirror-v0-2"));
    let created = r#"kubewasm_plugin_write_calls_total{plugin="mirror",verb="create",resource="ConfigMap",code="2xx"}"#;
    let (ok, text) = app.metrics_until(|t| sample(t, created) == Some(1.0)).await;
    assert!(ok, "the mirror's create not counted:\n{text}");
    for (series, least) in [
        (r#"workqueue_adds_total{name="mirror"}"#, 1.0),
        (
            r#"workqueue_queue_duration_seconds_count{name="mirror"}"#,
            1.0,
        ),
        (
            r#"workqueue_work_duration_seconds_count{name="mirror"}"#,
            1.0,
        ),
        (r#"workqueue_depth{name="mirror"}"#, 0.0),
        (r#"workqueue_unfinished_work_seconds{name="mirror"}"#, 0.0),
        (
            r#"workqueue_longest_running_processor_seconds{name="mirror"}"#,
            0.0,
        ),
    ] {
        assert!(
            sample(&text, series).is_some_and(|v| v >= least),
            "{series} below {least}:\n{text}"
        );
    }

    // `/plugins` shows the 0.2 plugin's workqueue.
    let listing = app.plugins().await;
    let mirror = listing["plugins"]
        .as_array()
        .and_then(|p| {
            p.iter()
                .find(|p| p["plugin"] == "mirror" && p["name"] == "wq-mirror")
        })
        .cloned()
        .unwrap_or_else(|| panic!("wq-mirror not listed: {listing}"));
    assert!(mirror["workqueue"]["depth"].is_u64(), "{listing}");
    assert!(mirror["workqueue"]["processing"].is_u64(), "{listing}");

    // Unloading the read-only mirror removes its series; the other's stay.
    std::fs::remove_file(dir.path().join("mirror-ro.wasm")).expect("remove plugin file");
    let (gone, text) = app.metrics_until(|t| !t.contains(r#""mirror-ro""#)).await;
    assert!(gone, "series of the unloaded plugin left:\n{text}");
    assert!(sample(&text, created) == Some(1.0), "{text}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_shows_its_waiting_keys_and_the_oldest_ones_age() {
    let (server, client) = devserver().await;
    // Another replica holds the Lease for an hour: this host never leads, so its 0.2 plugin's
    // keys wait in the queue.
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("wq-held".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("another-replica".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(MicroTime(Timestamp::now())),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &lease)
        .await
        .expect("create Lease");
    let dir = tempfile::tempdir().expect("plugins dir");
    write_settled(&dir.path().join("mirror.wasm"), &guest_bytes("mirror-v0-2"));
    let config = r#"
        [leader-election]
        enabled = true
        namespace = "default"
        lease-name = "wq-held"
        [plugins.mirror]
        config = "wq-standby"
        grants = ["ConfigMap"]
        writes = ["ConfigMap"]
    "#;
    let app = App::start(server, dir.path(), config).await;
    app.plugins_when_ready().await;
    mirrored(&client, "waits").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let queue = loop {
        let listing = app.plugins().await;
        assert_eq!(listing["leader"]["leader"], false, "{listing}");
        let queue = listing["plugins"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "wq-standby"))
            .map(|p| p["workqueue"].clone())
            .unwrap_or_default();
        if queue["oldest_ready_seconds"]
            .as_f64()
            .is_some_and(|s| s > 0.2)
        {
            break queue;
        }
        assert!(tokio::time::Instant::now() < deadline, "{listing}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(queue["depth"], 1, "{queue}");
    assert_eq!(queue["processing"], 0, "{queue}");
    let text = app.metrics().await;
    assert_eq!(
        sample(&text, r#"workqueue_depth{name="mirror"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"workqueue_work_duration_seconds_count{name="mirror"}"#
        ),
        Some(0.0),
        "{text}"
    );
    app.stop().await;
}

/// The host on a real kube-apiserver over TLS and HTTP/2, reached through a proxy that makes its
/// connections go silent: readiness follows what the HTTP/2 PING finds.
mod real {
    use std::time::{Duration, Instant};

    use kubewasm::api_client::{self, ConnectionOptions};
    use kubewasm_tests::envtest::{Envtest, User};
    use kubewasm_tests::proxy::SilencingProxy;
    use kubewasm_tests::{guest_bytes, write_settled};
    use serde_json::json;

    use super::{App, probe_config, probe_entry};

    /// Bounds every wait on the real server; the bounds that are the point are asserted apart.
    const PATIENCE: Duration = Duration::from_secs(90);

    /// The sum of `kubewasm_informer_dead_connections_total` over its series.
    fn dead_connections(metrics: &str) -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with("kubewasm_informer_dead_connections_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Polls `/readyz` until its code is `code`; the body then, or `None` past `PATIENCE`.
    async fn readyz_until(app: &App, code: u16) -> Option<String> {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if let Some((got, body)) = app.get("/readyz").await
                && got == code
            {
                return Some(body);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Every connection the host has goes silent (open, carrying nothing) while new ones pass:
    /// the HTTP/2 PING (1 s read-idle, 1 s timeout) finds the connection dead within about
    /// 2 s; the watches that died with it are counted as dead connections, `/readyz` answers
    /// 503 naming the informer within 10 s of that, and 200 again once the watches are back
    /// (after the 15 s hold). Before, the watch streams' failure was not seen as a dead
    /// connection at all: `/readyz` stayed 200 and the counter 0.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_its_ping_finds_dead_makes_readyz_fail_until_the_watches_are_back() {
        let server = Envtest::start().await.expect("the real API server starts");
        let upstream: std::net::SocketAddr = server
            .url()
            .trim_start_matches("https://")
            .parse()
            .expect("address");
        let proxy = SilencingProxy::start(upstream).await.expect("the proxy");
        let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig(User::Admin))
            .expect("kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        config.cluster_url = format!("https://{}", proxy.addr()).parse().expect("url");
        let options = ConnectionOptions {
            http2_read_idle: Duration::from_secs(1),
            http2_ping_timeout: Duration::from_secs(1),
            ..ConnectionOptions::default()
        };
        let client = api_client::build(config, &options).expect("client");

        let dir = tempfile::tempdir().expect("plugins dir");
        write_settled(&dir.path().join("probe.wasm"), &guest_bytes("probe"));
        let host_config = probe_entry("probe", probe_config("ready-ping", json!({})));
        let app = App::start_with(client, Box::new(server), dir.path(), &host_config);
        assert!(readyz_until(&app, 200).await.is_some(), "never ready");
        let before = dead_connections(&app.metrics().await);

        proxy.silence();
        let silenced = Instant::now();
        let why = readyz_until(&app, 503).await;
        let unready_after = silenced.elapsed();
        let why = why.expect("/readyz kept answering 200 with the connection dead");
        eprintln!("/readyz 503 {unready_after:?} after the silence: {why}");
        assert!(
            why.contains("informer v1 configmaps in default") && why.contains("dead"),
            "/readyz says which informer and why: {why}"
        );
        // The PING fails within read-idle plus timeout (2 s) of the silence.
        assert!(
            unready_after <= Duration::from_secs(12),
            "503 only {unready_after:?} after the silence"
        );
        let (counted, metrics) = app
            .metrics_until(|text| dead_connections(text) > before)
            .await;
        assert!(counted, "no dead connection counted:\n{metrics}");

        // New connections pass: the watches are made again and the host is ready after its
        // hold.
        let ready = readyz_until(&app, 200).await;
        eprintln!(
            "/readyz 200 again {:?} after the silence",
            silenced.elapsed()
        );
        assert!(ready.is_some(), "never ready again after the re-watch");
        app.stop().await;
        drop(proxy);
    }
}
