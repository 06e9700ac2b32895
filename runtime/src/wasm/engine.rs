//! The one wasmtime engine: configuration, the epoch ticker that drives call deadlines,
//! compilation through an on-disk cache keyed by content hash and engine fingerprint, and
//! precompiled artifacts: made by [`PluginEngine::precompile`], verified and kept by
//! [`PluginEngine::install_precompiled`], loaded by [`PluginEngine::compile`] instead of compiling.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

use crate::contracts::{Controller, v0_2};
use crate::error::PluginError;
use crate::wasm::compile_work::{CompileBudget, CompilePlan, CompileWork};
use crate::wasm::component::{
    CompiledPlugin, Linked, Origin, {self},
};
use crate::wasm::precompiled::{self, EngineStamp, PrecompiledError, WASMTIME_VERSION};
use crate::wasm::state::HostState;

/// How often the epoch advances while a guest call is in progress: the granularity of call
/// deadlines, and how often a guest in a long call yields its worker thread to other tasks.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(5);

/// The memory all compiles in progress may take together, MiB of their estimates
/// ([`CompileWork::plan`]): with the host's steady state (about 160 MiB with the example set)
/// it stays under the deployment's 1 GiB limit, and it is more than any example's compile, so
/// each runs with others of the set beside it.
pub const COMPILE_BUDGET_MIB: u32 = 512;

/// How often the epoch advances while no guest call is in progress, so an idle host does not
/// wake 200 times a second. A call that starts meanwhile sees its first tick at most this late.
const IDLE_TICK: Duration = Duration::from_millis(50);

/// Guest calls in progress in this process (every engine's), for the epoch ticker.
static CALLS_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Counts a guest call as in progress for as long as it is held.
pub(crate) struct CallInFlight(());

impl CallInFlight {
    pub(crate) fn start() -> Self {
        CALLS_IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        CallInFlight(())
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        CALLS_IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What hands the memory a compile freed back to the system: the allocator is the process's
/// choice (the binary's global allocator and its settings), so the binary sets it once at
/// start ([`set_memory_release`]). Unset, compiles leave freed memory to the allocator.
static MEMORY_RELEASE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Sets the function called after each compile to return freed memory to the system (for
/// glibc, `malloc_trim`): a compile allocates hundreds of MiB for a few seconds, which a
/// long-running host must not keep resident. The first call wins.
pub fn set_memory_release(release: fn()) {
    let _ = MEMORY_RELEASE.set(release);
}

fn release_freed_memory() {
    if let Some(release) = MEMORY_RELEASE.get() {
        release();
    }
}

/// How the engine is set up.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// Where compiled components are kept between runs; `None`: compile every time.
    pub cache_dir: Option<PathBuf>,
}

/// The engine and linker every plugin shares. Cheap to clone.
#[derive(Clone)]
pub struct PluginEngine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<HostState>,
    cache_dir: Option<PathBuf>,
    /// Distinguishes compiled artefacts of different wasmtime versions and settings.
    fingerprint: String,
    /// What precompiled code must have been compiled by to load here.
    stamp: EngineStamp,
    ticker_stop: Arc<AtomicBool>,
    /// Components in use, by content hash: loading the same bytes again (another copy, a
    /// restart of the file) shares the compiled code instead of mapping it once more.
    loaded: Mutex<HashMap<String, Weak<Linked>>>,
    /// Threads that compile one component's functions at once (rayon's, one per core).
    compile_threads: usize,
    /// What every compile reserves its estimated memory from.
    budget: CompileBudget,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// The wasmtime configuration of the host's engine: epoch interruption (call deadlines) and
/// the compile settings. Public so that measuring tools (`examples/compile_memory.rs`) compile
/// with exactly what the host uses.
///
/// Compiled code carries neither ELF symbols for its functions nor native unwind info
/// (`.eh_frame`): nothing in the host reads them (wasmtime's traps and backtraces use its own
/// tables and the component's name section, and a host function's panic does not unwind
/// through guest frames), and wasmtime holds both for every function until the compile
/// ends: 6-10 MiB of the Python and JavaScript examples' compile peaks (BENCHMARKS.md,
/// "Compile memory"). What they served: `objdump` and perf's DWARF unwinding of a compiled
/// artefact (`compile_memory --write` turns the symbols back on for reading one). Both are
/// part of wasmtime's compatibility check: code compiled with them on does not load here.
pub fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.debug_symbols(false);
    config.native_unwind_info(false);
    config
}

impl PluginEngine {
    /// Builds the engine (epoch interruption on), links WASI p2 and the `cache` / `log`
    /// imports, and starts the epoch ticker thread (stopped when the last clone is dropped).
    pub fn new(options: EngineOptions) -> Result<Self, PluginError> {
        let engine =
            Engine::new(&engine_config()).map_err(|e| PluginError::Engine(format!("{e:#}")))?;

        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|e| PluginError::Engine(format!("linking WASI: {e:#}")))?;
        Controller::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| PluginError::Engine(format!("linking the controller world: {e:#}")))?;
        v0_2::Controller::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| PluginError::Engine(format!("linking the 0.2 controller world: {e:#}")))?;

        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let fingerprint = format!("{:016x}", hasher.finish());

        let ticker_stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let stop = ticker_stop.clone();
        std::thread::Builder::new()
            .name("kubewasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let busy = CALLS_IN_FLIGHT.load(Ordering::Relaxed) > 0;
                    std::thread::sleep(if busy { EPOCH_TICK } else { IDLE_TICK });
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| PluginError::Engine(format!("starting the epoch ticker: {e}")))?;

        Ok(PluginEngine {
            inner: Arc::new(Inner {
                engine,
                linker,
                cache_dir: options.cache_dir,
                stamp: EngineStamp {
                    wasmtime: WASMTIME_VERSION.to_owned(),
                    engine: fingerprint.clone(),
                    target: EngineStamp::host_target(),
                },
                fingerprint,
                ticker_stop,
                loaded: Mutex::new(HashMap::new()),
                compile_threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
                budget: CompileBudget::new(COMPILE_BUDGET_MIB),
            }),
        })
    }

    /// Compiles `bytes` (read from `file`, named in errors) into a linked component.
    ///
    /// With a cache dir, the compiled code is stored as `<sha256>-<engine fingerprint>.cwasm`
    /// and reused by later loads of the same bytes, also across restarts. Compiling runs on a
    /// blocking thread, never on the async workers, after reserving its estimated memory from
    /// the engine's one budget ([`COMPILE_BUDGET_MIB`], [`CompileWork::plan`]), so that loads
    /// at once cannot add up past it; the memory is handed back to the system after each
    /// compile. A cache hit and a copy already loaded reserve nothing.
    ///
    /// Without an entry of its own, a precompiled entry that
    /// [`install_precompiled`](Self::install_precompiled) verified for these bytes is loaded
    /// instead of compiling ([`Origin::Precompiled`]); one wasmtime refuses is removed, logged
    /// and the component compiled.
    pub async fn compile(
        &self,
        file: &Path,
        bytes: Vec<u8>,
    ) -> Result<CompiledPlugin, PluginError> {
        component::classify(file, &bytes)?;
        let hash = hex(&Sha256::digest(&bytes));
        if let Some(pre) = self.loaded(&hash) {
            return Ok(CompiledPlugin {
                file: file.to_owned(),
                hash,
                pre,
                origin: Origin::Memory,
            });
        }
        let mut cached = None;
        for (entry, origin) in [
            (self.cached_entry(&hash), Origin::DiskCache),
            (self.precompiled_entry(&hash), Origin::Precompiled),
        ] {
            let Some(entry) = entry else { continue };
            let this = self.clone();
            let owned_file = file.to_owned();
            let loaded =
                tokio::task::spawn_blocking(move || this.load_cached(&owned_file, &entry, origin))
                    .await
                    .map_err(|e| PluginError::Engine(format!("cache load task: {e}")))?;
            if let Some(component) = loaded {
                cached = Some((component, origin));
                break;
            }
        }
        let (component, origin) = match cached {
            Some(loaded) => loaded,
            None => {
                let plan = CompileWork::of(file, &bytes)?.plan(self.inner.compile_threads);
                let waiting = std::time::Instant::now();
                let _reservation = self.inner.budget.reserve(plan.estimate_mib).await;
                tracing::debug!(
                    file = %file.display(),
                    bytes = bytes.len(),
                    estimate_mib = plan.estimate_mib,
                    serial = plan.serial,
                    address_map = plan.address_map,
                    waited_ms = waiting.elapsed().as_millis() as u64,
                    "compiling a component"
                );
                let this = self.clone();
                let owned_file = file.to_owned();
                let hash = hash.clone();
                let component = tokio::task::spawn_blocking(move || {
                    let compiled = this.compile_blocking(&owned_file, &hash, bytes, plan);
                    release_freed_memory();
                    compiled
                })
                .await
                .map_err(|e| PluginError::Engine(format!("compile task: {e}")))??;
                (component, Origin::Compiled)
            }
        };
        let pre = Arc::new(component::link(&self.inner.linker, &component, file)?);
        {
            let mut loaded = self.inner.loaded.lock();
            loaded.retain(|_, w| w.strong_count() > 0);
            loaded.insert(hash.clone(), Arc::downgrade(&pre));
        }
        Ok(CompiledPlugin {
            file: file.to_owned(),
            hash,
            pre,
            origin,
        })
    }

    /// The cache entry for `hash`, when there is one (loading it needs no compile).
    fn cached_entry(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.inner.cache_dir.as_ref()?;
        Some(self.cache_entry(dir, hash)).filter(|entry| entry.is_file())
    }

    /// The verified precompiled entry for `hash`, when there is one.
    fn precompiled_entry(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.inner.cache_dir.as_ref()?;
        Some(self.precompiled_path(dir, hash)).filter(|entry| entry.is_file())
    }

    /// The component of cache entry `entry`; `None` when it is unusable (it is then compiled
    /// again and the entry rewritten; a precompiled entry is removed).
    fn load_cached(&self, file: &Path, entry: &Path, origin: Origin) -> Option<Component> {
        // SAFETY: the file is in a directory only the host writes, written either by
        // `precompile_component` of an engine with the same fingerprint, or by
        // `install_precompiled` from an artifact whose header names this engine's stamp and
        // these bytes' hash, and whose publisher the operator trusts with native code
        // (docs/security.md). wasmtime also checks the code's own engine section.
        match unsafe { Component::deserialize_file(&self.inner.engine, entry) } {
            Ok(c) => Some(c),
            Err(e) if origin == Origin::Precompiled => {
                tracing::warn!(
                    file = %file.display(), precompiled = %entry.display(),
                    "precompiled code refused by wasmtime, compiling the component instead: {e:#}"
                );
                let _ = std::fs::remove_file(entry);
                None
            }
            Err(e) => {
                tracing::warn!(
                    file = %file.display(), cache = %entry.display(),
                    "compile cache entry unusable, recompiling: {e:#}"
                );
                None
            }
        }
    }

    fn cache_entry(&self, dir: &Path, hash: &str) -> PathBuf {
        dir.join(format!("{hash}-{}.cwasm", self.inner.fingerprint))
    }

    /// Where verified precompiled code for `hash` is kept: beside the host's own entries, under
    /// a name of its own so that its origin stays known.
    fn precompiled_path(&self, dir: &Path, hash: &str) -> PathBuf {
        dir.join(format!(
            "{hash}-{}.precompiled.cwasm",
            self.inner.fingerprint
        ))
    }

    /// What precompiled code must have been compiled by to load into this engine.
    pub fn stamp(&self) -> &EngineStamp {
        &self.inner.stamp
    }

    /// Compiles `bytes` (read from `file`, named in errors) into a precompiled artifact for
    /// engines like this one ([`precompiled::encode`]): what `kubewasm compile --out` writes
    /// and `kubewasm push --precompiled` ships. The component must load into this host (it is
    /// linked against the host's imports) so that an artifact is never made for a file the
    /// host would refuse. Reserves its memory from the compile budget like [`Self::compile`].
    pub async fn precompile(&self, file: &Path, bytes: Vec<u8>) -> Result<Vec<u8>, PluginError> {
        component::classify(file, &bytes)?;
        let hash = hex(&Sha256::digest(&bytes));
        let plan = CompileWork::of(file, &bytes)?.plan(self.inner.compile_threads);
        let _reservation = self.inner.budget.reserve(plan.estimate_mib).await;
        let this = self.clone();
        let owned_file = file.to_owned();
        tokio::task::spawn_blocking(move || {
            let code = this.precompile_blocking(&owned_file, &bytes, plan);
            drop(bytes);
            release_freed_memory();
            let code = code?;
            let invalid = |e: wasmtime::Error| PluginError::Invalid {
                file: owned_file.clone(),
                reason: format!("{e:#}"),
            };
            // SAFETY: `code` was produced just now by a compiler whose settings differ from
            // this engine's at most in parallel compilation and the address map (`CompilePlan`).
            let component =
                unsafe { Component::deserialize(&this.inner.engine, &code) }.map_err(invalid)?;
            component::link(&this.inner.linker, &component, &owned_file)?;
            Ok(precompiled::encode(&this.inner.stamp, &hash, &code))
        })
        .await
        .map_err(|e| PluginError::Engine(format!("compile task: {e}")))?
    }

    /// Verifies the precompiled artifact `artifact` for the component whose SHA-256 (hex) is
    /// `component_sha256` and keeps its code in the compile cache, where [`Self::compile`]
    /// of those component bytes finds it. Refused, naming what differs, unless its header
    /// names this engine's wasmtime version, settings fingerprint and target and that
    /// component; nothing is written then.
    ///
    /// This checks what the code was made for, not who made it: the caller hands it only
    /// bytes whose origin the operator trusts (a digest-pinned layer of an artifact the
    /// operator marked `trust-precompiled`).
    pub fn install_precompiled(
        &self,
        artifact: &[u8],
        component_sha256: &str,
    ) -> Result<(), PrecompiledError> {
        // The hash names the file the code is kept in: nothing but 64 hex digits gets there.
        if component_sha256.len() != 64
            || !component_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(PrecompiledError::Header(format!(
                "the component's digest `{}` is not 64 lowercase hex digits",
                component_sha256.escape_debug()
            )));
        }
        let parsed = precompiled::parse(artifact)?;
        parsed.check(&self.inner.stamp, Some(component_sha256))?;
        let dir = self
            .inner
            .cache_dir
            .as_ref()
            .ok_or(PrecompiledError::NoCache)?;
        let entry = self.precompiled_path(dir, component_sha256);
        write_cache_entry(dir, &entry, parsed.code)?;
        Ok(())
    }

    /// Compiles `bytes` as `plan` says with a compiler of its own (see
    /// [`Self::compile_blocking`]); wasmtime's serialized component.
    fn precompile_blocking(
        &self,
        file: &Path,
        bytes: &[u8],
        plan: CompilePlan,
    ) -> Result<Vec<u8>, PluginError> {
        let mut config = engine_config();
        plan.configure(&mut config);
        let compiler = Engine::new(&config).map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let compiled = compiler
            .precompile_component(bytes)
            .map_err(|e| PluginError::Invalid {
                file: file.to_owned(),
                reason: format!("{e:#}"),
            });
        drop(compiler);
        compiled
    }

    fn loaded(&self, hash: &str) -> Option<Arc<Linked>> {
        self.inner.loaded.lock().get(hash).and_then(Weak::upgrade)
    }

    /// Compiles `bytes` as `plan` says, writes the cache entry when there is a cache dir, and
    /// loads the result into the host's engine. The component's bytes and the compile's freed
    /// memory are handed back before the entry is written and loaded, so that writing and
    /// mapping the entry run beside the serialized code alone, not beside what the compile
    /// left in the allocator.
    fn compile_blocking(
        &self,
        file: &Path,
        hash: &str,
        bytes: Vec<u8>,
        plan: CompilePlan,
    ) -> Result<Component, PluginError> {
        let engine = &self.inner.engine;
        let invalid = |e: wasmtime::Error| PluginError::Invalid {
            file: file.to_owned(),
            reason: format!("{e:#}"),
        };
        // A compiler of its own for each compile, dropped right after it: wasmtime keeps
        // Cranelift's per-function contexts for reuse, at the size of the largest function
        // compiled (300 MiB kept after a serial compile of the Rust sample-controller). Its
        // output loads into `engine`: the settings differ at most in parallel compilation
        // and the address map, which do not change the code (`CompilePlan`).
        let compiled = self.precompile_blocking(file, &bytes, plan);
        drop(bytes);
        release_freed_memory();
        let compiled = compiled?;
        if let Some(dir) = &self.inner.cache_dir {
            let cached = self.cache_entry(dir, hash);
            // The cache only saves later compiles: a plugin whose entry cannot be written (a
            // full or read-only disk) still loads.
            match write_cache_entry(dir, &cached, &compiled) {
                Ok(()) => {
                    // Mapped from the entry just written, as a later start would: the code's
                    // pages are the file's (shared, and reclaimable under memory pressure)
                    // instead of a private copy held for as long as the plugin runs.
                    // SAFETY: the entry was written just now from this engine's output.
                    match unsafe { Component::deserialize_file(engine, &cached) } {
                        Ok(c) => return Ok(c),
                        Err(e) => tracing::warn!(
                            file = %file.display(), cache = %cached.display(),
                            "the compile cache entry just written is unusable, loading without it: {e:#}"
                        ),
                    }
                }
                Err(e) => tracing::warn!(
                    file = %file.display(), cache = %cached.display(),
                    "cannot write the compile cache entry, loading without it: {e}"
                ),
            }
        }
        // SAFETY: `compiled` was produced just now by a compiler whose settings differ from
        // this engine's at most in parallel compilation and the address map (`CompilePlan`).
        unsafe { Component::deserialize(engine, &compiled) }.map_err(invalid)
    }
}

/// Writes a compile cache entry atomically: to a temporary file of its own, then renamed into
/// place. Plugin files with the same bytes compile in parallel, so each write needs its own
/// temporary name; the last rename wins with identical contents.
fn write_cache_entry(dir: &Path, cached: &Path, compiled: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let name = cached
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, compiled)?;
    std::fs::rename(&tmp, cached).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> Vec<u8> {
        kubewasm_tests::guest_bytes("probe")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn identical_files_compiled_at_once_both_load_and_leave_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let engine = PluginEngine::new(EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        let compiles: Vec<_> = (0..4)
            .map(|i| {
                let engine = engine.clone();
                tokio::spawn(async move {
                    engine
                        .compile(Path::new(&format!("copy-{i}.wasm")), probe())
                        .await
                        .map(|c| c.content_hash().to_owned())
                })
            })
            .collect();
        for compile in compiles {
            compile.await.unwrap().expect("every copy loads");
        }
        let entries: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            entries.len(),
            1,
            "one entry, no temporary left: {entries:?}"
        );
    }

    /// The host's compiled code leaves out the functions' ELF symbols and the native unwind
    /// info (`engine_config`), which wasmtime's defaults put in.
    #[test]
    fn compiled_code_has_no_function_symbols_or_unwind_info() {
        fn has(code: &[u8], needle: &[u8]) -> bool {
            code.windows(needle.len()).any(|w| w == needle)
        }
        let probe = probe();
        let host = Engine::new(&engine_config())
            .unwrap()
            .precompile_component(&probe)
            .unwrap();
        let mut defaults = engine_config();
        defaults.debug_symbols(true).native_unwind_info(true);
        let with_both = Engine::new(&defaults)
            .unwrap()
            .precompile_component(&probe)
            .unwrap();
        assert!(has(&with_both, b"]::function[") && has(&with_both, b".eh_frame"));
        assert!(
            !has(&host, b"]::function["),
            "function symbols in the host's code"
        );
        assert!(!has(&host, b".eh_frame"), "unwind info in the host's code");
        assert!(host.len() < with_both.len());
    }

    #[tokio::test]
    async fn a_cache_that_cannot_be_written_does_not_stop_the_load() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the cache directory should be: nothing can be written under it.
        let blocked = dir.path().join("cache");
        std::fs::write(&blocked, b"not a directory").unwrap();
        let engine = PluginEngine::new(EngineOptions {
            cache_dir: Some(blocked),
        })
        .unwrap();
        let compiled = engine
            .compile(Path::new("probe.wasm"), probe())
            .await
            .expect("loads without its cache entry");
        assert_eq!(compiled.origin(), Origin::Compiled);
    }

    #[tokio::test]
    async fn compile_cache_is_reused_by_a_new_engine() {
        let dir = tempfile::tempdir().unwrap();
        let options = EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        };
        let first = PluginEngine::new(options.clone()).unwrap();
        let compiled = first
            .compile(Path::new("probe.wasm"), probe())
            .await
            .unwrap();
        assert!(!compiled.from_cache());
        let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);

        let restarted = PluginEngine::new(options).unwrap();
        let again = restarted
            .compile(Path::new("probe.wasm"), probe())
            .await
            .unwrap();
        assert_eq!(again.origin(), Origin::DiskCache);
        assert_eq!(again.content_hash(), compiled.content_hash());
    }

    #[tokio::test]
    async fn loading_the_same_bytes_again_shares_the_compiled_component() {
        let engine = PluginEngine::new(EngineOptions::default()).unwrap();
        let a = engine.compile(Path::new("a.wasm"), probe()).await.unwrap();
        assert!(!a.from_cache());
        let b = engine.compile(Path::new("b.wasm"), probe()).await.unwrap();
        assert_eq!(b.origin(), Origin::Memory);
        assert!(Arc::ptr_eq(&a.pre, &b.pre));
        assert_eq!(b.file(), Path::new("b.wasm"));
        drop((a, b));
        let c = engine.compile(Path::new("c.wasm"), probe()).await.unwrap();
        assert!(
            !c.from_cache(),
            "no cache dir and no copy in use: compiled again"
        );
    }

    #[tokio::test]
    async fn corrupt_cache_entry_is_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let engine = PluginEngine::new(EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        engine.compile(Path::new("p.wasm"), probe()).await.unwrap();
        let entry = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        std::fs::write(entry.path(), b"garbage").unwrap();
        let compiled = engine.compile(Path::new("p.wasm"), probe()).await.unwrap();
        assert!(!compiled.from_cache());
        // The entry was rewritten and is usable again.
        let compiled = engine.compile(Path::new("p.wasm"), probe()).await.unwrap();
        assert!(compiled.from_cache());
    }

    /// Precompiled by one engine, verified and kept by another with a cache dir of its own,
    /// loaded there without a compile.
    #[tokio::test]
    async fn a_verified_precompiled_artifact_loads_without_compiling() {
        let maker = PluginEngine::new(EngineOptions::default()).unwrap();
        let artifact = maker
            .precompile(Path::new("probe.wasm"), probe())
            .await
            .unwrap();
        let hash = hex(&Sha256::digest(probe()));
        let dir = tempfile::tempdir().unwrap();
        let host = PluginEngine::new(EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        host.install_precompiled(&artifact, &hash).unwrap();
        let loaded = host.compile(Path::new("p.wasm"), probe()).await.unwrap();
        assert_eq!(loaded.origin(), Origin::Precompiled);
        assert_eq!(loaded.content_hash(), hash);
    }

    #[tokio::test]
    async fn a_precompiled_artifact_for_another_engine_or_component_is_refused_and_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let host = PluginEngine::new(EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        let artifact = host
            .precompile(Path::new("probe.wasm"), probe())
            .await
            .unwrap();
        let code = precompiled::parse(&artifact).unwrap().code.to_vec();
        let hash = hex(&Sha256::digest(probe()));
        let mut other = host.stamp().clone();
        other.target = "riscv64-linux-musl".into();
        let err = host
            .install_precompiled(&precompiled::encode(&other, &hash, &code), &hash)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("target riscv64-linux-musl (this host: "),
            "{err}"
        );
        let err = host
            .install_precompiled(&artifact, &"0".repeat(64))
            .unwrap_err();
        assert_eq!(err.kind(), "other-component");
        let err = host
            .install_precompiled(&artifact, "../../escape")
            .unwrap_err();
        assert!(err.to_string().contains("not 64 lowercase hex"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let compiled = host.compile(Path::new("p.wasm"), probe()).await.unwrap();
        assert_eq!(compiled.origin(), Origin::Compiled);
    }

    /// Code whose header matches but which wasmtime refuses is removed and the component
    /// compiled: never loaded wrong, never refused for good.
    #[tokio::test]
    async fn precompiled_code_wasmtime_refuses_falls_back_to_a_compile() {
        let dir = tempfile::tempdir().unwrap();
        let host = PluginEngine::new(EngineOptions {
            cache_dir: Some(dir.path().to_owned()),
        })
        .unwrap();
        let hash = hex(&Sha256::digest(probe()));
        let garbage = precompiled::encode(host.stamp(), &hash, b"\x7fELF not code");
        host.install_precompiled(&garbage, &hash).unwrap();
        let compiled = host.compile(Path::new("p.wasm"), probe()).await.unwrap();
        assert_eq!(compiled.origin(), Origin::Compiled);
        assert!(
            host.precompiled_entry(&hash).is_none(),
            "the bad entry was removed"
        );
    }

    async fn compile_err(name: &str, bytes: Vec<u8>) -> PluginError {
        let engine = PluginEngine::new(EngineOptions::default()).unwrap();
        match engine.compile(Path::new(name), bytes).await {
            Ok(_) => panic!("{name} compiled"),
            Err(e) => {
                assert!(e.to_string().contains(name), "{e}");
                e
            }
        }
    }

    #[tokio::test]
    async fn text_file_is_refused_as_not_wasm() {
        let e = compile_err("notes.wasm", b"not wasm at all".to_vec()).await;
        assert!(matches!(e, PluginError::NotWasm { .. }));
    }

    #[tokio::test]
    async fn core_module_is_refused() {
        let e = compile_err("core.wasm", b"\0asm\x01\0\0\0".to_vec()).await;
        assert!(matches!(e, PluginError::CoreModule { .. }));
    }

    #[tokio::test]
    async fn truncated_component_is_refused_as_invalid() {
        let mut bytes = probe();
        bytes.truncate(bytes.len() / 2);
        let e = compile_err("half.wasm", bytes).await;
        assert!(matches!(e, PluginError::Invalid { .. }), "{e}");
    }

    #[tokio::test]
    async fn component_of_another_world_is_refused() {
        let e = compile_err("other.wasm", kubewasm_tests::guest_bytes("other-world")).await;
        assert!(matches!(e, PluginError::WrongWorld { .. }), "{e}");
        assert!(e.to_string().contains("example:other"), "{e}");
    }

    #[tokio::test]
    async fn component_without_handler_exports_is_refused() {
        let e = compile_err("nohandler.wasm", kubewasm_tests::guest_bytes("no-handler")).await;
        assert!(matches!(e, PluginError::MissingExports { .. }), "{e}");
    }
}
