//! Watches the plugins directory and loads, replaces or unloads plugins as files come and go.
//!
//! Every file-system event only triggers a rescan: the directory's `*.wasm` files are hashed and
//! diffed against what is loaded, by path and content hash. This one
//! rule covers files created, rewritten, `mv`-ed into place, deleted, and the atomic `..data`
//! symlink swap Kubernetes does for ConfigMap and Secret volumes. A touched but unchanged file
//! hashes the same and does nothing, and so does a file rewritten with the bytes already running
//! (`cat a > a`). A file modified less than one debounce period ago may still be being written:
//! it is left alone until it has been quiet that long. A file that fails to load while it is
//! younger than the settle period ([`settle_period`]) is retried silently once it changes or
//! settles; only a file that stays invalid is reported.
//!
//! Only file-system events that can change a plugin trigger a scan (creation, a write closed,
//! a rename, a removal): never the open and access events a scan's own reads produce, which
//! would otherwise keep the watcher rescanning forever.
//!
//! Replacing is the loader's job ([`Loader::replace`]): it compiles the new version first and keeps
//! the old one running if that fails, so this module never leaves a path without a plugin because
//! of a bad file.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the reloader drives: in the host, the plugin manager.
pub trait Loader: Send + Sync + 'static {
    /// Identifies a loaded plugin.
    type Id: Clone + Send + Sync + 'static;

    /// Loads a new plugin from `path`, whose content is `bytes`; returns its id and name.
    fn load(
        &self,
        path: &Path,
        bytes: Vec<u8>,
    ) -> impl Future<Output = anyhow::Result<(Self::Id, String)>> + Send;

    /// Replaces a loaded plugin with a new version. On error the old version must keep running.
    fn replace(
        &self,
        id: &Self::Id,
        bytes: Vec<u8>,
    ) -> impl Future<Output = anyhow::Result<String>> + Send;

    /// Unloads a plugin whose file is gone.
    fn unload(&self, id: &Self::Id) -> impl Future<Output = ()> + Send;
}

/// The outcome of one load, replace or unload, for logs and metrics.
#[derive(Debug, Clone)]
pub struct ReloadEvent {
    pub path: PathBuf,
    /// The plugin's name, or the file stem when it never loaded.
    pub plugin: String,
    pub action: Action,
    /// `Err(reason)` when the file could not be (re)loaded.
    pub result: Result<(), String>,
    /// From reading the file to the new version running (compile, `init`, replay handed over).
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Load,
    Replace,
    Unload,
}

/// The state of one file in the plugins directory, for the status listing.
#[derive(Debug, Clone)]
pub struct FileStatus {
    pub path: PathBuf,
    /// The plugin running for this file, if any (a failed replace keeps the old one).
    pub plugin: Option<String>,
    /// Why the file's current content could not be loaded.
    pub error: Option<String>,
    /// The file's current content has not been settled yet: it is still being written, or it
    /// failed to load while young and will be retried or reported once it settles.
    pub pending: bool,
}

struct Entry<Id> {
    /// Size and modification time when last hashed: unchanged means not read again.
    stamp: Stamp,
    /// Content hash of the content last looked at (running, or failed).
    hash: [u8; 32],
    /// The version running and its content hash.
    loaded: Option<Loaded<Id>>,
    error: Option<String>,
    /// A failure of a young file not reported yet: reported once the file settles unchanged,
    /// forgotten if it changes first.
    unreported: Option<ReloadEvent>,
}

struct Loaded<Id> {
    id: Id,
    name: String,
    hash: [u8; 32],
}

type Stamp = (u64, Option<SystemTime>);

/// How long a file that fails to load must stay unmodified before the failure is reported: a
/// younger file may be half written by a slow writer (a copy over the network, `cat a > a`).
pub fn settle_period(debounce: Duration) -> Duration {
    (debounce * 10).max(Duration::from_secs(1))
}

/// A new or changed file to load, or to replace its running version with.
struct Job<Id> {
    path: PathBuf,
    stamp: Stamp,
    hash: [u8; 32],
    /// Taken by the load.
    bytes: Vec<u8>,
    young: bool,
    running: Option<Loaded<Id>>,
}

type Outcome<Id> = anyhow::Result<(Id, String)>;

/// A job, how it came out and how long it took.
type Done<Id> = (Job<Id>, Outcome<Id>, Duration);

/// Loads `job`'s file, or replaces its running version: the id and name of what runs now.
async fn apply<L: Loader>(loader: &L, job: &mut Job<L::Id>) -> Outcome<L::Id> {
    let bytes = std::mem::take(&mut job.bytes);
    match &job.running {
        Some(l) => loader
            .replace(&l.id, bytes)
            .await
            .map(|name| (l.id.clone(), name)),
        None => loader.load(&job.path, bytes).await,
    }
}

/// Keeps the loaded plugins in step with a directory (and the directories added with
/// [`Reloader::also_watch`]).
pub struct Reloader<L: Loader> {
    dir: PathBuf,
    /// More directories whose files are plugins too: the links of OCI sources.
    more: Vec<PathBuf>,
    loader: L,
    debounce: Duration,
    entries: BTreeMap<PathBuf, Entry<L::Id>>,
    /// Files seen but not looked at yet (too fresh): shown as pending.
    fresh: BTreeSet<PathBuf>,
    /// [`Reloader::status`] as of the last scan, for readers on other tasks.
    shared: SharedStatus,
}

/// The files of the plugins directory and their state as of the reloader's last scan; empty
/// until the first scan has finished.
pub type SharedStatus = Arc<Mutex<Option<Vec<FileStatus>>>>;

impl<L: Loader> Reloader<L> {
    pub fn new(dir: PathBuf, loader: L, debounce: Duration) -> Self {
        Reloader {
            dir,
            more: Vec::new(),
            loader,
            debounce,
            entries: BTreeMap::new(),
            fresh: BTreeSet::new(),
            shared: SharedStatus::default(),
        }
    }

    /// Also loads the `*.wasm` files of `dir`, under the same rules: the directory OCI sources
    /// are linked into ([`crate::oci::Sources`]), so a pulled version reloads like a changed file.
    pub fn also_watch(mut self, dir: PathBuf) -> Self {
        self.more.push(dir);
        self
    }

    /// The status as of the last scan (`None` before the first), updated by every scan.
    pub fn shared_status(&self) -> SharedStatus {
        self.shared.clone()
    }

    /// The files seen so far and their state, by path.
    pub fn status(&self) -> Vec<FileStatus> {
        let mut files: Vec<FileStatus> = self
            .entries
            .iter()
            .filter(|(path, _)| !self.fresh.contains(*path))
            .map(|(path, e)| FileStatus {
                path: path.clone(),
                plugin: e.loaded.as_ref().map(|l| l.name.clone()),
                error: e.error.clone(),
                pending: e.unreported.is_some(),
            })
            .collect();
        files.extend(self.fresh.iter().map(|path| {
            let running = self.entries.get(path).and_then(|e| e.loaded.as_ref());
            FileStatus {
                path: path.clone(),
                plugin: running.map(|l| l.name.clone()),
                error: None,
                pending: true,
            }
        }));
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// Diffs the directory against what is loaded and acts on every difference. Returns what was
    /// done and whether some file is not settled yet (the caller should scan again soon).
    pub async fn scan(&mut self) -> std::io::Result<(Vec<ReloadEvent>, bool)> {
        let mut events = Vec::new();
        let mut deferred = false;
        let mut present = BTreeSet::new();
        let mut jobs = Vec::new();
        self.fresh.clear();
        let settle = settle_period(self.debounce);
        let mut files = wasm_files(&self.dir)?;
        for dir in &self.more {
            files.extend(wasm_files(dir)?);
        }
        for path in files {
            present.insert(path.clone());
            // Follows symlinks, so a `..data` swap shows the new target's content and time.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if age(&meta) < self.debounce {
                deferred = true;
                self.fresh.insert(path);
                continue;
            }
            let stamp = (meta.len(), meta.modified().ok());
            let young = age(&meta) < settle;
            let known = self.entries.get(&path);
            let read = if known.is_some_and(|e| e.stamp == stamp) {
                None
            } else {
                match std::fs::read(&path) {
                    Ok(bytes) => {
                        let hash: [u8; 32] = Sha256::digest(&bytes).into();
                        Some((bytes, hash))
                    }
                    Err(err) => {
                        tracing::warn!(path = %path.display(), error = %err, "cannot read plugin file");
                        continue;
                    }
                }
            };
            if let Some(entry) = self.entries.get_mut(&path) {
                let new_hash = read.as_ref().map(|(_, hash)| *hash);
                if new_hash.is_none_or(|h| h == entry.hash) {
                    // Content unchanged since it was last looked at: a failure kept quiet while
                    // the file was young is reported once it has settled.
                    entry.stamp = stamp;
                    if entry.unreported.is_some() {
                        if young {
                            deferred = true;
                        } else if let Some(event) = entry.unreported.take() {
                            events.push(event);
                        }
                    }
                    continue;
                }
                if entry.loaded.as_ref().map(|l| l.hash) == new_hash {
                    // Back to the bytes already running (a rewrite with the same content, or
                    // a half-written version that never loaded): nothing to reload.
                    entry.stamp = stamp;
                    entry.hash = entry.loaded.as_ref().map_or(entry.hash, |l| l.hash);
                    entry.error = None;
                    entry.unreported = None;
                    continue;
                }
            }
            let Some((bytes, hash)) = read else {
                continue;
            };
            let running = self.entries.remove(&path).and_then(|e| e.loaded);
            jobs.push(Job {
                path,
                stamp,
                hash,
                bytes,
                young,
                running,
            });
        }
        // Compile and start the new and changed files in parallel, bounded by the cores, the
        // smallest first: each plugin is registered as soon as it is ready, and a small plugin
        // never waits for a slot behind large compiles (which the engine's compile memory
        // budget runs few at a time).
        jobs.sort_by_key(|job| job.bytes.len());
        let parallel = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        let loader = &self.loader;
        let mut done: Vec<Done<L::Id>> = futures::stream::iter(jobs)
            .map(|mut job| async move {
                let started = Instant::now();
                let outcome = apply(loader, &mut job).await;
                (job, outcome, started.elapsed())
            })
            .buffer_unordered(parallel)
            .collect()
            .await;
        done.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        for (job, outcome, elapsed) in done {
            let young = job.young;
            let path = job.path.clone();
            let event = self.record(job, outcome, elapsed);
            if event.result.is_err() && young {
                // Possibly still being written: retried when it changes, reported if it
                // settles as it is.
                deferred = true;
                if let Some(entry) = self.entries.get_mut(&path) {
                    entry.unreported = Some(event);
                }
                continue;
            }
            events.push(event);
        }
        let gone: Vec<PathBuf> = self
            .entries
            .keys()
            .filter(|p| !present.contains(*p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(entry) = self.entries.remove(&path)
                && let Some(loaded) = entry.loaded
            {
                let started = Instant::now();
                self.loader.unload(&loaded.id).await;
                events.push(ReloadEvent {
                    path,
                    plugin: loaded.name,
                    action: Action::Unload,
                    result: Ok(()),
                    elapsed: started.elapsed(),
                });
            }
        }
        *self.shared.lock() = Some(self.status());
        Ok((events, deferred))
    }

    /// Records what loading or replacing `job` came to, and the event to report.
    fn record(
        &mut self,
        job: Job<L::Id>,
        outcome: Outcome<L::Id>,
        elapsed: Duration,
    ) -> ReloadEvent {
        let stem = job
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let action = if job.running.is_some() {
            Action::Replace
        } else {
            Action::Load
        };
        let (loaded, error, plugin, result) = match outcome {
            Ok((id, name)) => (
                Some(Loaded {
                    id,
                    name: name.clone(),
                    hash: job.hash,
                }),
                None,
                name,
                Ok(()),
            ),
            Err(err) => {
                let reason = format!("{err:#}");
                let plugin = job.running.as_ref().map_or(stem, |l| l.name.clone());
                (job.running, Some(reason.clone()), plugin, Err(reason))
            }
        };
        self.entries.insert(
            job.path.clone(),
            Entry {
                stamp: job.stamp,
                hash: job.hash,
                loaded,
                error,
                unreported: None,
            },
        );
        ReloadEvent {
            path: job.path,
            plugin,
            action,
            result,
            elapsed,
        }
    }

    /// Scans once, then watches the directory until `cancel` fires, calling `report` for every
    /// load, replace and unload. Returns an error only when the directory cannot be watched.
    pub async fn run(
        mut self,
        cancel: CancellationToken,
        mut report: impl FnMut(&ReloadEvent, &[FileStatus]) + Send,
    ) -> anyhow::Result<()> {
        use anyhow::Context as _;
        use notify::Watcher as _;

        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.as_ref().map_or(true, changes_plugins) {
                    // The receiver only goes away on shutdown; nothing to do then.
                    let _ = tx.send(());
                }
            })
            .context("cannot create a file watcher")?;
        for dir in std::iter::once(&self.dir).chain(&self.more) {
            watcher
                .watch(dir, notify::RecursiveMode::NonRecursive)
                .with_context(|| format!("cannot watch plugins directory {}", dir.display()))?;
        }

        // Scan at once on the first event of a burst (no fixed delay before a reload) and
        // again whenever events arrived during a scan. A file still being written is left
        // alone by `scan` and looked at again once it has been quiet for the debounce period.
        let mut scan_now = true;
        loop {
            if !scan_now {
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    got = rx.recv() => if got.is_none() { return Ok(()) },
                }
            }
            while rx.try_recv().is_ok() {}
            let deferred = match self.scan().await {
                Ok((events, deferred)) => {
                    let status = self.status();
                    for event in &events {
                        report(event, &status);
                    }
                    deferred
                }
                Err(err) => {
                    tracing::error!(
                        dir = %self.dir.display(), error = %err, "cannot scan plugins directory"
                    );
                    false
                }
            };
            if deferred {
                // Events meanwhile are drained before the next scan.
                tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(self.debounce) => {}
                }
                scan_now = true;
            } else {
                scan_now = !rx.is_empty();
            }
        }
    }
}

/// The `*.wasm` entries of `dir`, skipping hidden ones (such as the `..data` directory of a
/// Kubernetes volume), sorted for a stable load order.
fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name
            && !name.starts_with('.')
            && name.ends_with(".wasm")
            && path.is_file()
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// How long ago the file was last modified; unknown or in the future counts as long ago (settled):
/// a clock skew must not hold a file back forever.
fn age(meta: &std::fs::Metadata) -> Duration {
    meta.modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or(Duration::MAX)
}

/// Whether a file-system event can change a plugin: a file or link created, a write closed, a
/// rename (including the `..data` link swap of a Kubernetes volume) or a removal. Opens, reads
/// and closes without writing, which every scan produces itself, do not; nor do writes still in
/// progress (their closing event follows) or metadata changes (same content). An event the
/// watcher could not classify, or a queue overflow, does.
fn changes_plugins(event: &notify::Event) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    if event.need_rescan() {
        return true;
    }
    match event.kind {
        EventKind::Create(_) | EventKind::Remove(_) | EventKind::Any | EventKind::Other => true,
        EventKind::Modify(ModifyKind::Name(_) | ModifyKind::Any) => true,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_) | ModifyKind::Other) => {
            false
        }
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records calls; content starting with "bad" fails to load. With a barrier, each load
    /// waits at it (so loads that must meet there only finish when run in parallel).
    #[derive(Clone, Default)]
    struct FakeLoader {
        calls: Arc<Mutex<Vec<String>>>,
        barrier: Option<Arc<tokio::sync::Barrier>>,
    }

    impl Loader for FakeLoader {
        type Id = String;

        async fn load(&self, path: &Path, bytes: Vec<u8>) -> anyhow::Result<(String, String)> {
            let text = String::from_utf8(bytes)?;
            if let Some(barrier) = &self.barrier {
                barrier.wait().await;
            }
            self.calls.lock().unwrap().push(format!("load {text}"));
            anyhow::ensure!(!text.starts_with("bad"), "not a component");
            let id = path.display().to_string();
            Ok((id, text))
        }

        async fn replace(&self, _id: &String, bytes: Vec<u8>) -> anyhow::Result<String> {
            let text = String::from_utf8(bytes)?;
            self.calls.lock().unwrap().push(format!("replace {text}"));
            anyhow::ensure!(!text.starts_with("bad"), "not a component");
            Ok(text)
        }

        async fn unload(&self, id: &String) {
            let name = Path::new(id).file_name().unwrap().to_string_lossy();
            self.calls.lock().unwrap().push(format!("unload {name}"));
        }
    }

    /// Writes a file whose modification time is old enough to be loaded at once.
    fn write_settled(path: &Path, content: &str) {
        write_aged(path, content, Duration::from_secs(10));
    }

    /// Writes a file last modified `age` ago.
    fn write_aged(path: &Path, content: &str, age: Duration) {
        std::fs::write(path, content).unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(SystemTime::now() - age)
            .unwrap();
    }

    /// Past the test debounce (100 ms), well within the settle period (1 s).
    const YOUNG: Duration = Duration::from_millis(300);

    fn reloader(dir: &Path) -> (Reloader<FakeLoader>, Arc<Mutex<Vec<String>>>) {
        let loader = FakeLoader::default();
        let calls = loader.calls.clone();
        (
            Reloader::new(dir.to_path_buf(), loader, Duration::from_millis(100)),
            calls,
        )
    }

    fn take(calls: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        std::mem::take(&mut *calls.lock().unwrap())
    }

    #[tokio::test]
    async fn scan_loads_replaces_and_unloads_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        let a = dir.path().join("a.wasm");
        write_settled(&a, "v1");
        write_settled(&dir.path().join("notes.txt"), "ignored");
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["load v1"]);

        // Touched, same content: nothing happens.
        write_settled(&a, "v1");
        r.scan().await.unwrap();
        assert!(take(&calls).is_empty());

        write_settled(&a, "v2");
        let (events, _) = r.scan().await.unwrap();
        assert_eq!(take(&calls), ["replace v2"]);
        assert_eq!(events[0].action, Action::Replace);

        std::fs::remove_file(&a).unwrap();
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["unload a.wasm"]);
        assert!(r.status().is_empty());
    }

    #[tokio::test]
    async fn files_load_in_parallel() {
        let dir = tempfile::tempdir().unwrap();
        let loader = FakeLoader {
            barrier: Some(Arc::new(tokio::sync::Barrier::new(2))),
            ..FakeLoader::default()
        };
        let calls = loader.calls.clone();
        let mut r = Reloader::new(dir.path().to_path_buf(), loader, Duration::from_millis(100));
        write_settled(&dir.path().join("a.wasm"), "va");
        write_settled(&dir.path().join("b.wasm"), "vb");
        // One after the other, the first load would wait at the barrier for ever.
        let (events, _) = tokio::time::timeout(Duration::from_secs(20), r.scan())
            .await
            .expect("both loads ran at once")
            .unwrap();
        assert_eq!(events.len(), 2);
        let mut calls = take(&calls);
        calls.sort();
        assert_eq!(calls, ["load va", "load vb"]);
        assert_eq!(r.status().len(), 2);
    }

    #[tokio::test]
    async fn failed_replace_keeps_old_version_and_is_not_retried_until_changed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        let a = dir.path().join("a.wasm");
        write_settled(&a, "v1");
        r.scan().await.unwrap();
        write_settled(&a, "bad bytes");
        let (events, _) = r.scan().await.unwrap();
        assert!(events[0].result.is_err());
        let status = r.status();
        assert_eq!(status[0].plugin.as_deref(), Some("v1"));
        assert!(
            status[0]
                .error
                .as_deref()
                .unwrap()
                .contains("not a component")
        );
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["load v1", "replace bad bytes"]);

        write_settled(&a, "v3");
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["replace v3"]);
        assert!(r.status()[0].error.is_none());
    }

    #[tokio::test]
    async fn rewriting_the_running_bytes_reloads_nothing_even_after_a_half_written_version() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        let a = dir.path().join("a.wasm");
        write_settled(&a, "v1");
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["load v1"]);

        // `cat a > a`: first a half-written (invalid) file, then the same bytes as before.
        write_aged(&a, "bad half", YOUNG);
        let (events, deferred) = r.scan().await.unwrap();
        assert!(events.is_empty(), "a young failure is not reported");
        assert!(deferred);
        assert!(r.status()[0].pending);
        assert_eq!(take(&calls), ["replace bad half"]);
        write_aged(&a, "v1", YOUNG);
        let (events, _) = r.scan().await.unwrap();
        assert!(events.is_empty());
        assert!(take(&calls).is_empty(), "same bytes as running: no reload");
        let status = r.status();
        assert_eq!(status[0].plugin.as_deref(), Some("v1"));
        assert!(status[0].error.is_none() && !status[0].pending);
        write_settled(&a, "v1");
        r.scan().await.unwrap();
        assert!(take(&calls).is_empty());
    }

    #[tokio::test]
    async fn a_young_invalid_file_is_reported_only_once_it_settles_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        let a = dir.path().join("a.wasm");
        write_aged(&a, "bad", YOUNG);
        let (events, deferred) = r.scan().await.unwrap();
        assert!(events.is_empty() && deferred);
        assert_eq!(take(&calls), ["load bad"]);
        // Unchanged and still young: neither retried nor reported.
        let (events, deferred) = r.scan().await.unwrap();
        assert!(events.is_empty() && deferred);
        assert!(take(&calls).is_empty());
        // Settled as it is: reported once, not loaded again.
        write_settled(&a, "bad");
        let (events, deferred) = r.scan().await.unwrap();
        assert!(!deferred);
        assert_eq!(events.len(), 1);
        assert!(events[0].result.is_err());
        assert_eq!(take(&calls), Vec::<String>::new());
        assert!(r.status()[0].error.is_some());
        let (events, _) = r.scan().await.unwrap();
        assert!(events.is_empty());
    }

    #[test]
    fn only_events_that_can_change_a_plugin_trigger_a_scan() {
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, MetadataKind, ModifyKind, RemoveKind,
            RenameMode,
        };
        use notify::{Event, EventKind};
        let triggers = |kind| changes_plugins(&Event::new(kind));
        assert!(triggers(EventKind::Create(CreateKind::File)));
        assert!(triggers(EventKind::Remove(RemoveKind::File)));
        assert!(triggers(EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(triggers(EventKind::Access(AccessKind::Close(
            AccessMode::Write
        ))));
        // What a scan itself causes (opening the directory, reading a file), and writes whose
        // close is still to come, do not.
        assert!(!triggers(EventKind::Access(AccessKind::Open(
            AccessMode::Any
        ))));
        assert!(!triggers(EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        assert!(!triggers(EventKind::Access(AccessKind::Read)));
        assert!(!triggers(EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
        assert!(!triggers(EventKind::Modify(ModifyKind::Metadata(
            MetadataKind::Any
        ))));
    }

    #[tokio::test]
    async fn file_being_written_is_deferred() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        std::fs::write(dir.path().join("a.wasm"), "half").unwrap();
        let (events, deferred) = r.scan().await.unwrap();
        assert!(events.is_empty());
        assert!(deferred);
        assert!(take(&calls).is_empty());
    }

    #[tokio::test]
    async fn symlink_swap_of_data_dir_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, calls) = reloader(dir.path());
        // The layout of a ConfigMap volume: a.wasm -> ..data/a.wasm, ..data -> ..v1
        for (version, content) in [("..v1", "v1"), ("..v2", "v2")] {
            std::fs::create_dir(dir.path().join(version)).unwrap();
            write_settled(&dir.path().join(version).join("a.wasm"), content);
        }
        std::os::unix::fs::symlink("..v1", dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.wasm", dir.path().join("a.wasm")).unwrap();
        r.scan().await.unwrap();
        std::os::unix::fs::symlink("..v2", dir.path().join("..data_tmp")).unwrap();
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        r.scan().await.unwrap();
        assert_eq!(take(&calls), ["load v1", "replace v2"]);
    }

    #[tokio::test]
    async fn run_reacts_to_files_moved_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let staging = tempfile::tempdir().unwrap();
        let (r, calls) = reloader(dir.path());
        let cancel = CancellationToken::new();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(r.run(cancel.clone(), move |event, _| {
            let _ = tx.send(event.action);
        }));
        let staged = staging.path().join("b.wasm");
        write_settled(&staged, "v1");
        std::fs::rename(&staged, dir.path().join("b.wasm")).unwrap();
        let action = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .expect("the reloader noticed the new file");
        assert_eq!(action, Some(Action::Load));
        assert_eq!(take(&calls), ["load v1"]);
        cancel.cancel();
        task.await.unwrap().unwrap();
    }
}
