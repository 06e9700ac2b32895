//! `/readyz` end to end: the whole host (`app::run`, as `kubewasm dev` runs it) on the dev API
//! server with a plugins directory, probed over HTTP. Kept apart from the reload tests, whose
//! memory measurements the extra hosts here would disturb.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
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
    _server: DevServer,
    _cache: tempfile::TempDir,
}

impl App {
    async fn start(server: DevServer, plugins: &Path, config: &str) -> App {
        guest_logs();
        let client = server.client();
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
