//! What several topics build the same way: a plugin host over shared informers (on the dev server
//! or a [`TestServer`](kubewasm_tests::server::TestServer)), the ConfigMaps the tests write, a
//! plugin's status, and the compile-cache check of the example tests.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use kubewasm_devserver::DevServer;
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use kubewasm_runtime::{
    EngineOptions, HostOptions, PluginEngine, PluginHost, PluginPolicy, PluginStatus,
};
use kubewasm_tests::{GuestLogs, devserver, guest_logs, workspace_root};

/// Shared informers on `client` and a plugin host over them, with `options`. Guest log lines
/// are captured from here on ([`guest_logs`]).
pub fn plugin_host(
    client: &kube::Client,
    options: HostOptions,
) -> (SharedInformerFactory, PluginHost) {
    guest_logs();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let host = PluginHost::new(factory.clone(), client.clone(), options).expect("plugin host");
    (factory, host)
}

/// Default host options, with each plugin's policy given by `policy` from its file.
pub fn policy_by_file(
    policy: impl Fn(&Path) -> PluginPolicy + Send + Sync + 'static,
) -> HostOptions {
    HostOptions {
        policy: Arc::new(policy),
        ..HostOptions::default()
    }
}

/// Where hosts that load the big (Python, Go, JavaScript) examples keep compiled code
/// (`target/test-cache/kubewasm/`): it is keyed by content hash, so sharing it between tests and
/// runs only saves compiling the same component again.
pub fn shared_compile_cache() -> Option<PathBuf> {
    Some(shared_cache_home().join("kubewasm"))
}

/// The `XDG_CACHE_HOME` under which a `kubewasm` process finds [`shared_compile_cache`] as its
/// default compile cache (`$XDG_CACHE_HOME/kubewasm`).
pub fn shared_cache_home() -> PathBuf {
    workspace_root().join("target/test-cache")
}

/// Polls the async `check` every 50 ms until it answers true or `patience` passes; whether it
/// did. Bounds a wait, times nothing.
pub async fn eventually<F: Future<Output = bool>>(
    patience: Duration,
    mut check: impl FnMut() -> F,
) -> bool {
    let deadline = tokio::time::Instant::now() + patience;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A dev API server with a plugin host over shared informers on it, and the guest log record.
pub struct DevRig {
    pub server: DevServer,
    pub client: kube::Client,
    pub factory: SharedInformerFactory,
    pub host: PluginHost,
    pub logs: Arc<GuestLogs>,
}

impl DevRig {
    /// A dev server on a free port and a host with `options` over it.
    pub async fn start(options: HostOptions) -> DevRig {
        let (server, client) = devserver().await;
        let (factory, host) = plugin_host(&client, options);
        DevRig {
            server,
            client,
            factory,
            host,
            logs: guest_logs(),
        }
    }

    /// ConfigMaps in namespace `default`.
    pub fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), "default")
    }
}

/// The status of the loaded plugin named `name`.
///
/// # Panics
/// When no plugin has that name.
pub fn plugin_status(host: &PluginHost, name: &str) -> PluginStatus {
    host.plugins()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no plugin {name}: {:?}", host.plugins()))
}

/// Namespace `name`, as JSON for the dev server's in-process `create`.
pub fn namespace(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// ConfigMap `name` with `labels` and `data`.
pub fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let pairs = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: (!labels.is_empty()).then(|| pairs(labels)),
            ..ObjectMeta::default()
        },
        data: (!data.is_empty()).then(|| pairs(data)),
        ..ConfigMap::default()
    }
}

/// Creates `config_map` through `api` and returns its resourceVersion.
pub async fn create(api: &Api<ConfigMap>, config_map: &ConfigMap) -> String {
    let created = api
        .create(&PostParams::default(), config_map)
        .await
        .unwrap_or_else(|e| panic!("creating ConfigMap {:?}: {e}", config_map.metadata.name));
    created.metadata.resource_version.expect("resourceVersion")
}

/// Replaces the data of ConfigMap `name` with `data` and returns the new resourceVersion.
pub async fn replace_data(api: &Api<ConfigMap>, name: &str, data: &[(&str, &str)]) -> String {
    let mut current = api.get(name).await.expect("get ConfigMap");
    current.data = config_map(name, &[], data).data;
    let updated = api
        .replace(name, &PostParams::default(), &current)
        .await
        .expect("update ConfigMap");
    updated.metadata.resource_version.expect("resourceVersion")
}

/// Compiles each `(name, path, bytes)` component with a fresh engine and on-disk compile cache,
/// then loads it again: the first load must compile, the second come from the cache with the
/// same content hash. Prints the sizes and times (reported, never asserted).
pub async fn compiles_then_loads_from_the_cache(examples: Vec<(String, PathBuf, Vec<u8>)>) {
    let cache = tempfile::tempdir().expect("compile cache dir");
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(cache.path().to_path_buf()),
    })
    .expect("engine");
    for (name, path, bytes) in examples {
        let size = bytes.len();
        let started = Instant::now();
        let compiled = engine
            .compile(&path, bytes.clone())
            .await
            .unwrap_or_else(|e| panic!("{name} does not load: {e}"));
        let compile_time = started.elapsed();
        assert!(!compiled.from_cache(), "{name}: the first load compiles");

        let started = Instant::now();
        let cached = engine
            .compile(&path, bytes)
            .await
            .unwrap_or_else(|e| panic!("{name} does not load from the compile cache: {e}"));
        let cached_time = started.elapsed();
        assert!(
            cached.from_cache(),
            "{name}: the second load comes from the compile cache"
        );
        assert_eq!(compiled.content_hash(), cached.content_hash());
        println!(
            "{name}: {} KB, compile {:.0} ms, load from cache {:.1} ms",
            size / 1024,
            compile_time.as_secs_f64() * 1e3,
            cached_time.as_secs_f64() * 1e3
        );
    }
}

/// Events `status` says the plugin did not receive for `reason` (`fault`, `replaced`,
/// `quarantined`, `failed`).
pub fn dropped(status: &PluginStatus, reason: &str) -> u64 {
    status
        .events_dropped
        .iter()
        .find(|(r, _)| *r == reason)
        .map_or(0, |(_, n)| *n)
}

/// A TCP proxy in front of a server, for partitions. [`StallingProxy::stall_watches`] makes
/// every connection open now that has carried a watch stop forwarding bytes, both ways, while
/// staying open: as a proxy or NAT that dropped its long-lived flows. Its other connections,
/// and every connection opened later, keep working, so a client's short requests (a Lease
/// renewal) still go through while its watches are dead.
pub struct StallingProxy {
    addr: std::net::SocketAddr,
    stall: tokio::sync::watch::Sender<u64>,
    stop: tokio_util::sync::CancellationToken,
}

impl StallingProxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: std::net::SocketAddr) -> StallingProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let stall = tokio::sync::watch::Sender::new(0);
        let stop = tokio_util::sync::CancellationToken::new();
        let (stalls, stopped) = (stall.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = stopped.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((client, _)) = accepted else { continue };
                let (stall, stop) = (stalls.subscribe(), stopped.clone());
                tokio::spawn(forward(client, upstream, stall, stop));
            }
        });
        StallingProxy { addr, stall, stop }
    }

    /// The proxy's URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every open connection that has carried a watch goes silent for good.
    pub fn stall_watches(&self) {
        self.stall.send_modify(|n| *n += 1);
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Copies bytes both ways until either side closes, or a stall finds this connection has
/// carried a watch: then holds both sockets open, silent, until the proxy stops.
async fn forward(
    mut client: tokio::net::TcpStream,
    upstream: std::net::SocketAddr,
    mut stall: tokio::sync::watch::Receiver<u64>,
    stop: tokio_util::sync::CancellationToken,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
        return;
    };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    stall.borrow_and_update();
    let (mut up, mut down) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let mut watched = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = stall.changed() => {
                if changed.is_err() {
                    return;
                }
                if watched {
                    stop.cancelled().await;
                    return;
                }
            }
            read = client.read(&mut up) => {
                let Ok(n @ 1..) = read else { return };
                let sent = &up[..n];
                watched |= sent.windows(10).any(|w| w == b"watch=true");
                if server.write_all(sent).await.is_err() {
                    return;
                }
            }
            read = server.read(&mut down) => {
                let Ok(n @ 1..) = read else { return };
                if client.write_all(&down[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The example plugins `cargo xtask build-guests` wrote, copied into `into`.
///
/// # Panics
/// When there are none, saying to run `cargo xtask build-guests`.
pub fn example_plugins(into: &Path) -> Vec<String> {
    let built = kubewasm_tests::workspace_root().join("target/plugins");
    let sources: Vec<PathBuf> = std::fs::read_dir(&built)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !sources.is_empty(),
        "no example plugins in {}{}",
        built.display(),
        kubewasm_tests::MISSING_GUESTS
    );
    let mut names = Vec::new();
    for source in sources {
        let name = source.file_name().expect("a file name").to_owned();
        std::fs::copy(&source, into.join(&name)).expect("copy an example plugin");
        names.push(name.to_string_lossy().into_owned());
    }
    names.sort();
    names
}

/// A child process (a `kubewasm` host) killed when dropped.
pub struct Host(pub std::process::Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits, five minutes at most, for `/readyz` on `port` of `host` to answer 200.
///
/// # Panics
/// When it does not, or when the process exits first, with the host's log from `log`.
pub fn wait_until_ready(host: &mut Host, port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while kubewasm_tests::http_get(port, "/readyz").map(|(code, _)| code) != Some(200) {
        if let Ok(Some(status)) = host.0.try_wait() {
            panic!(
                "the host exited ({status}) before it was ready; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "the host never got ready; its log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
