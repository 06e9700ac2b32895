//! Shared helpers of the end-to-end tests: building test guests on demand, starting a dev API
//! server with a client, capturing what guests log, and bounded polling.
//!
//! This crate must not depend on `kubewasm` (the host's own tests use these helpers).

use std::collections::HashMap;
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

/// Builds the workspace guest crate `package` for wasm32-wasip2 with the `guest` profile and
/// returns the component's path. Built once per process; the build uses its own target dir
/// (`target/wasm-guests`) so it does not wait for the outer cargo's lock.
///
/// # Panics
/// When cargo fails: the test cannot go on without its guest.
pub fn build_guest(package: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    // Held across the build: two tests asking for guests build them one after the other.
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(package) {
        return path.clone();
    }
    let root = workspace_root();
    let target_dir = root.join("target").join("wasm-guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "-p",
            package,
            "--target",
            "wasm32-wasip2",
            "--profile",
            "guest",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        // Flags meant for the host build (coverage, sanitizers) must not leak into the guest.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .status()
        .unwrap_or_else(|e| panic!("running cargo to build guest {package}: {e}"));
    assert!(
        status.success(),
        "building guest {package} failed: {status}"
    );
    let path = target_dir
        .join("wasm32-wasip2")
        .join("guest")
        .join(format!("{}.wasm", package.replace('-', "_")));
    assert!(
        path.is_file(),
        "guest {package} built but {path:?} is missing"
    );
    built.insert(package.to_owned(), path.clone());
    path
}

/// The bytes of a test guest (built on demand).
pub fn guest_bytes(package: &str) -> Vec<u8> {
    let path = build_guest(package);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"))
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
    pub plugin: String,
    pub message: String,
}

/// Every guest line logged in this process, plus host warnings and errors that name a plugin
/// (faults, handler errors). Install with [`guest_logs`].
#[derive(Default)]
pub struct GuestLogs {
    lines: Mutex<Vec<GuestLine>>,
    host: Mutex<Vec<GuestLine>>,
}

impl GuestLogs {
    /// The messages `plugin` logged, oldest first.
    pub fn lines(&self, plugin: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        lines
            .iter()
            .filter(|l| l.plugin == plugin)
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

    /// The host's warnings and errors about `plugin`, oldest first.
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
    message: String,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "plugin" => self.plugin = Some(value.to_owned()),
            "message" => self.message = value.to_owned(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "plugin" => self.plugin = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "message" => self.message = format!("{value:?}"),
            _ => {}
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
            message: fields.message,
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
