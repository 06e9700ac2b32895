//! One real API server shared by the real-server tests of a run that neither restart nor compact
//! it (each works in namespaces of its own), instead of an etcd and a kube-apiserver per test
//! (about 3 s each, more on a loaded machine).
//!
//! nextest runs every test in a process of its own, so the server cannot live in a test
//! process: it lives in a *keeper*, the test binary itself started again to run only its ignored
//! test [`KEEPER_TEST`] (which calls [`keep`]). The first test of a run that asks for the server
//! starts the keeper; the run's later tests attach to it. A run is nextest's `NEXTEST_RUN_ID`
//! (under `cargo test`, the test process): the next run starts a server of its own, so no run
//! sees what an earlier one left behind.
//!
//! The processes agree through `flock`s on files in `target/envtest-shared/RUN/`:
//! - `lock`, exclusive: held by a test while it looks for the server or starts it, and by the
//!   keeper while it decides to stop, so no test attaches to a keeper that is stopping;
//! - `users`, shared: held by each test for as long as it uses the server;
//! - `alive`, exclusive: held by the keeper for its whole life and released by the kernel when it
//!   ends, however it ends;
//! - `server.json`: where the server is (its harness directory and port), written once it is
//!   ready and removed when the keeper stops.
//!
//! The keeper stops once no test has used the server for [`IDLE`]; etcd and kube-apiserver die
//! with it (`PR_SET_PDEATHSIG`, see `process.rs`), also when it is killed.

use std::fs::{File, TryLockError};
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use super::error::io;
use super::{Connection, Envtest, Error, assets_from_env};

/// The test, at the root of a test binary, that [`keep`]s the server when the binary is started
/// as a keeper; every binary using [`SharedEnvtest`] must have it:
///
/// ```no_run
/// #[test]
/// #[ignore = "run only as the keeper of the shared real API server"]
/// fn envtest_keeper() {
///     kubewasm_tests::envtest::shared::keep();
/// }
/// ```
pub const KEEPER_TEST: &str = "envtest_keeper";

/// Set, to the run's directory, in the environment of a keeper.
const KEEPER_VAR: &str = "KUBEWASM_ENVTEST_KEEPER";

/// How long the keeper keeps a server no test uses. Longer than the gaps between the real tests
/// of one run (a later test would only start a new server), short enough not to outlive the run
/// by much.
pub const IDLE: Duration = Duration::from_secs(30);

/// How long a test waits for a keeper to have its server ready.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Leftovers of earlier runs whose keeper is gone are removed once this old.
const STALE: Duration = Duration::from_secs(3600);

/// A real API server shared with the other tests of the run: use it through its
/// [`Connection`] (`Deref`), in namespaces of the test's own. It cannot be restarted, stopped or
/// compacted (that would disturb the other tests): a test that does so starts an [`Envtest`].
pub struct SharedEnvtest {
    connection: Connection,
    /// Shared lock on `users`, held while this value lives: the keeper stays.
    _user: File,
}

impl std::ops::Deref for SharedEnvtest {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.connection
    }
}

impl SharedEnvtest {
    /// Attaches to the run's shared server, starting its keeper when there is none (from the
    /// assets `KUBEBUILDER_ASSETS` names, like [`Envtest::start`]).
    pub async fn attach() -> Result<SharedEnvtest, Error> {
        let assets = assets_from_env()?;
        for binary in ["etcd", "kube-apiserver"] {
            if !assets.join(binary).is_file() {
                return Err(Error::MissingBinary {
                    binary,
                    dir: assets.clone(),
                });
            }
        }
        let dir = run_dir()?;
        let lock = open(&dir.join("lock"))?;
        let lock = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
            .await
            .map_err(|e| Error::Shared(format!("waiting for the lock: {e}")))?
            .map_err(io("locking the shared server's directory"))?;
        if !keeper_alive(&dir)? {
            start_keeper(&dir).await?;
        }
        let (server_dir, port) = read_state(&dir)?;
        let connection = Connection::open(&server_dir, port).await?;
        let user = open(&dir.join("users"))?;
        user.lock_shared()
            .map_err(io("registering as a user of the shared server"))?;
        drop(lock);
        Ok(SharedEnvtest {
            connection,
            _user: user,
        })
    }
}

/// The body of [`KEEPER_TEST`]: in a test binary started as a keeper, starts the server, says
/// where it is and keeps it until no test has used it for [`IDLE`]; otherwise returns at once.
///
/// # Panics
/// When the server cannot start; the test waiting for it reports the keeper's output.
pub fn keep() {
    let Some(dir) = std::env::var_os(KEEPER_VAR) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the keeper");
    if let Err(e) = runtime.block_on(keep_in(Path::new(&dir))) {
        panic!("the shared API server's keeper failed: {e}");
    }
}

async fn keep_in(dir: &Path) -> Result<(), Error> {
    let alive = open(&dir.join("alive"))?;
    alive
        .try_lock()
        .map_err(|e| Error::Shared(format!("another keeper holds {}: {e}", dir.display())))?;
    let server = Envtest::start().await?;
    let state = json!({"dir": server.dir.path(), "port": server.connection.api_port});
    let partial = dir.join("server.json.partial");
    std::fs::write(&partial, state.to_string()).map_err(io("writing server.json"))?;
    std::fs::rename(&partial, dir.join("server.json")).map_err(io("writing server.json"))?;
    eprintln!("keeper: {} ready", server.url());
    let users = open(&dir.join("users"))?;
    let mut idle_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !unused(&users)? {
            idle_since = Instant::now();
            continue;
        }
        if idle_since.elapsed() < IDLE {
            continue;
        }
        // Stop only while no test is attaching: with `lock` held, no test can register as a
        // user between this check and the removal of server.json.
        let lock = open(&dir.join("lock"))?;
        if lock.try_lock().is_ok() && unused(&users)? {
            std::fs::remove_file(dir.join("server.json")).map_err(io("removing server.json"))?;
            eprintln!("keeper: unused for {IDLE:?}, stopping");
            drop(server);
            return Ok(());
        }
    }
}

/// Whether no test holds `users`.
fn unused(users: &File) -> Result<bool, Error> {
    match users.try_lock() {
        Ok(()) => {
            users.unlock().map_err(io("releasing the users lock"))?;
            Ok(true)
        }
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(io("checking the users lock")(e)),
    }
}

/// Whether a keeper holds `alive` (and so serves `server.json`).
fn keeper_alive(dir: &Path) -> Result<bool, Error> {
    let alive = open(&dir.join("alive"))?;
    match alive.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(io("checking the keeper's lock")(e)),
    }
}

/// Starts the test binary as a keeper, in a process group of its own (a test runner ending
/// this test's group leaves it be), and waits until its server is ready.
async fn start_keeper(dir: &Path) -> Result<(), Error> {
    let _ = std::fs::remove_file(dir.join("server.json"));
    let exe = std::env::current_exe().map_err(io("finding the test binary"))?;
    let log_path = dir.join("keeper.log");
    let log = File::create(&log_path).map_err(io("creating keeper.log"))?;
    let err = log.try_clone().map_err(io("creating keeper.log"))?;
    let mut keeper = Command::new(exe)
        .args([KEEPER_TEST, "--exact", "--ignored", "--nocapture"])
        .env(KEEPER_VAR, dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(io("starting the shared API server's keeper"))?;
    let deadline = Instant::now() + START_TIMEOUT;
    let failed = |what: String| {
        let mut log = String::new();
        let _ = File::open(&log_path).and_then(|mut f| f.read_to_string(&mut log));
        Error::Shared(format!(
            "{what}; its output ({}):\n{log}",
            log_path.display()
        ))
    };
    loop {
        if dir.join("server.json").is_file() {
            return Ok(());
        }
        if let Ok(Some(status)) = keeper.try_wait() {
            return Err(failed(format!(
                "the keeper exited ({status}) before its server was ready"
            )));
        }
        if Instant::now() >= deadline {
            return Err(failed(format!("no server ready within {START_TIMEOUT:?}")));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The harness directory and API server port in `server.json`.
fn read_state(dir: &Path) -> Result<(PathBuf, u16), Error> {
    let path = dir.join("server.json");
    let text = std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?;
    let state: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::Shared(format!("{}: {e}", path.display())))?;
    let server_dir = state["dir"].as_str().map(PathBuf::from);
    let port = state["port"].as_u64().and_then(|p| u16::try_from(p).ok());
    server_dir
        .zip(port)
        .ok_or_else(|| Error::Shared(format!("{} names no server: {text}", path.display())))
}

/// This run's directory under `target/envtest-shared/`, created; leftovers of earlier runs
/// whose keeper is gone are removed on the way.
fn run_dir() -> Result<PathBuf, Error> {
    let root = crate::workspace_root()
        .join("target")
        .join("envtest-shared");
    let run = std::env::var("NEXTEST_RUN_ID")
        .unwrap_or_else(|_| format!("process-{}", std::process::id()));
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > STALE);
            if old && path.file_name() != Some(run.as_ref()) && !keeper_alive(&path)? {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    let dir = root.join(run);
    std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
    Ok(dir)
}

fn open(path: &Path) -> Result<File, Error> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io(format!("opening {}", path.display())))
}
