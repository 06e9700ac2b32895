//! Plugins configured by registry reference (`[plugins.NAME] source = "oci://..."`): each is
//! resolved to a manifest digest, its component pulled once into the [`BlobStore`], and linked
//! as `NAME.wasm` into the directory the reloader watches beside the plugins directory. With
//! `poll-seconds`, a tag is resolved again on that period and a moved tag is pulled and linked
//! in place of the old version: the reloader then replaces the running plugin exactly as for a
//! changed file.
//!
//! # Failure
//! Nothing that goes wrong with a source touches its link: a registry that is down, refuses
//! access or rate limits, a digest that does not match, an artifact that is not a component,
//! all leave the last good version linked (and running). The error is logged once per change,
//! shown in `/plugins` and counted; the source is tried again at its next poll. A restart while
//! the registry is down starts from the link left by the last run.
//!
//! # Precompiled code
//! A source with `trust-precompiled` whose artifact ships a precompiled layer has it pulled
//! (bounded, checked against the digest the manifest pins), verified by the engine against its
//! own wasmtime version, settings and target and the component's digest, and kept in the
//! compile cache before the link is swapped: the reloader's load then finds it and compiles
//! nothing. Precompiled code that cannot be had or does not match is refused, logged,
//! counted and shown in `/plugins` (`precompiled_error`); the component is linked anyway and
//! compiled at its load, as without it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kubewasm_runtime::{PluginEngine, PrecompiledError};
use oci_client::Reference;
use parking_lot::Mutex;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::reference::parse_reference;
use super::registry::{Pulled, Registry, RegistryError};
use super::store::{BlobStore, Linked};

/// How often a source that has never been pulled is tried again when it has no `poll-seconds`.
const RETRY: Duration = Duration::from_secs(30);

/// One configured source.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// The plugin's config key: its link is `NAME.wasm`.
    pub name: String,
    /// As configured (`oci://...`).
    pub source: String,
    pub reference: Reference,
    /// How often to look for a moved tag; `None`: resolved once per start.
    pub poll: Option<Duration>,
    /// Whether the artifact's precompiled code may be loaded instead of compiling the
    /// component: the operator trusts its publisher with native code in the host's process
    /// (`trust-precompiled`).
    pub trust_precompiled: bool,
}

impl SourceSpec {
    /// Parses a configured source.
    pub fn new(name: &str, source: &str, poll: Option<Duration>) -> Result<SourceSpec, String> {
        if !source.starts_with("oci://") {
            return Err(format!(
                "source `{source}` must start with oci:// (the only kind of source)"
            ));
        }
        let reference = parse_reference(source).map_err(|e| e.to_string())?;
        Ok(SourceSpec {
            name: name.to_owned(),
            source: source.to_owned(),
            reference,
            poll,
            trust_precompiled: false,
        })
    }

    /// The same source, loading its artifact's precompiled code when `trust` is set.
    pub fn trusting_precompiled(self, trust: bool) -> SourceSpec {
        SourceSpec {
            trust_precompiled: trust,
            ..self
        }
    }
}

/// What `/plugins` shows of a source.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceStatus {
    pub plugin: String,
    pub source: String,
    /// The manifest digest linked (and so loaded, unless the component itself is refused:
    /// see the file's entry).
    pub digest: Option<String>,
    /// The component's digest, the blob the link points at.
    pub layer: Option<String>,
    /// The last attempt's error, until one succeeds.
    pub last_error: Option<String>,
    /// Its kind (`unauthorized`, `not-found`, `rate-limited`, `server-error`, `unreachable`,
    /// `digest-mismatch`, `not-wasm`, ...).
    pub error_kind: Option<String>,
    /// Registry checks (resolve, pull) so far, and how many failed.
    pub checks: u64,
    pub failures: u64,
    /// The precompiled layer installed for the linked version (its digest), when the source
    /// trusts precompiled code and the artifact ships it.
    pub precompiled: Option<String>,
    /// Why the linked version's precompiled code was refused (it is compiled instead).
    pub precompiled_error: Option<String>,
}

/// Counts registry checks of sources, by plugin and outcome.
pub trait PullObserver: Send + Sync {
    fn pulled(&self, plugin: &str, ok: bool);
    /// The precompiled code of `plugin`'s artifact was refused for `reason` (a
    /// [`PrecompiledError::kind`], or `fetch`): its component is compiled instead.
    fn precompiled_refused(&self, _plugin: &str, _reason: &str) {}
}

/// Every source's status, by plugin.
pub type SharedSources = Arc<Mutex<BTreeMap<String, SourceStatus>>>;

/// The configured sources and what keeps them in step.
pub struct Sources {
    specs: Vec<SourceSpec>,
    registry: Arc<Registry>,
    store: BlobStore,
    status: SharedSources,
    observer: Option<Arc<dyn PullObserver>>,
    /// What verifies and keeps precompiled code (`None`: every component is compiled).
    engine: Option<PluginEngine>,
}

/// What one check of a source came to.
#[derive(Debug, PartialEq, Eq)]
enum Checked {
    /// The linked version is still the current one.
    Unchanged,
    /// A new version was linked.
    Linked,
}

impl Sources {
    pub fn new(
        specs: Vec<SourceSpec>,
        registry: Registry,
        store: BlobStore,
        observer: Option<Arc<dyn PullObserver>>,
    ) -> Sources {
        let status = specs
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    SourceStatus {
                        plugin: s.name.clone(),
                        source: s.source.clone(),
                        ..SourceStatus::default()
                    },
                )
            })
            .collect();
        Sources {
            specs,
            registry: Arc::new(registry),
            store,
            status: Arc::new(Mutex::new(status)),
            observer,
            engine: None,
        }
    }

    /// Installs the precompiled code of sources that trust it into `engine`'s compile cache.
    pub fn with_engine(self, engine: PluginEngine) -> Sources {
        Sources {
            engine: Some(engine),
            ..self
        }
    }

    /// The directory of links, for the reloader.
    pub fn dir(&self) -> std::path::PathBuf {
        self.store.plugins_dir()
    }

    /// Every source's status, updated as they are checked.
    pub fn shared_status(&self) -> SharedSources {
        self.status.clone()
    }

    /// Before the first scan: creates the store, removes links no source (or another source)
    /// made, and checks every source once, in parallel. A source that cannot be reached keeps
    /// the link the last run left.
    pub async fn prepare(&self) -> anyhow::Result<()> {
        use anyhow::Context as _;
        self.store
            .create()
            .context("cannot create the OCI store in the cache directory")?;
        for name in self.store.link_names() {
            let wanted = self.specs.iter().find(|s| s.name == name);
            let linked = self.store.linked(&name);
            if wanted.is_none_or(|s| linked.is_none_or(|l| l.source != s.source)) {
                tracing::info!(plugin = %name, "removing the link of a source no longer configured");
                self.store.unlink(&name);
            }
        }
        for spec in &self.specs {
            if let Some(linked) = self.store.linked(&spec.name) {
                if let Some(s) = self.status.lock().get_mut(&spec.name) {
                    s.digest = Some(linked.manifest.clone());
                    s.layer = Some(linked.layer.clone());
                }
                self.reinstall_precompiled(spec, &linked).await;
            }
        }
        futures::future::join_all(self.specs.iter().map(|spec| self.check_and_report(spec))).await;
        Ok(())
    }

    /// Checks each source again on its period until `cancel` fires. A source without a poll
    /// period is only retried while it has never been pulled.
    pub async fn run(self, cancel: CancellationToken) {
        let this = &self;
        let loops = self.specs.iter().map(|spec| {
            let cancel = cancel.clone();
            async move {
                loop {
                    let period = match spec.poll {
                        Some(poll) => poll,
                        None if this.store.linked(&spec.name).is_none() => RETRY,
                        None => return,
                    };
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(period) => {}
                    }
                    this.check_and_report(spec).await;
                }
            }
        });
        futures::future::join_all(loops).await;
    }

    /// Checks one source, records and logs the outcome.
    async fn check_and_report(&self, spec: &SourceSpec) {
        let outcome = self.check(spec).await;
        if let Some(observer) = &self.observer {
            observer.pulled(&spec.name, outcome.is_ok());
        }
        let linked = self.store.linked(&spec.name);
        let mut status = self.status.lock();
        let Some(s) = status.get_mut(&spec.name) else {
            return;
        };
        s.checks += 1;
        s.digest = linked.as_ref().map(|l| l.manifest.clone());
        s.layer = linked.as_ref().map(|l| l.layer.clone());
        match outcome {
            Ok(Checked::Linked) => {
                tracing::info!(
                    plugin = %spec.name,
                    source = %spec.source,
                    digest = s.digest.as_deref().unwrap_or_default(),
                    "pulled a new version of the plugin"
                );
                s.last_error = None;
                s.error_kind = None;
            }
            Ok(Checked::Unchanged) => {
                if s.last_error.take().is_some() {
                    tracing::info!(plugin = %spec.name, source = %spec.source, "source reachable again");
                }
                s.error_kind = None;
            }
            Err(err) => {
                s.failures += 1;
                let message = err.to_string();
                // Logged when it changes, not on every poll of a registry that stays down.
                if s.last_error.as_deref() != Some(message.as_str()) {
                    let running = s.digest.as_deref().unwrap_or("none");
                    tracing::error!(
                        plugin = %spec.name,
                        source = %spec.source,
                        kind = err.kind(),
                        running,
                        error = %message,
                        "cannot pull the plugin; the last good version (if any) keeps running"
                    );
                }
                s.last_error = Some(message);
                s.error_kind = Some(err.kind().to_owned());
            }
        }
    }

    /// Resolves a source and, when it names a version not linked yet, pulls and links it.
    async fn check(&self, spec: &SourceSpec) -> Result<Checked, RegistryError> {
        let linked = self.store.linked(&spec.name);
        let digest = match spec.reference.digest() {
            // A pinned digest needs the network only to fetch what the store lacks.
            Some(digest) => digest.to_owned(),
            None => self.registry.resolve(&spec.reference).await?,
        };
        if linked.as_ref().is_some_and(|l| l.manifest == digest) {
            return Ok(Checked::Unchanged);
        }
        let stored = self
            .store
            .read(&digest)
            .ok()
            .flatten()
            .and_then(|bytes| Pulled::parse(&spec.reference, &digest, bytes).ok());
        let pulled = match stored {
            Some(pulled) => pulled,
            None => {
                let pulled = self
                    .registry
                    .fetch_manifest(&spec.reference, &digest)
                    .await?;
                self.store_blob(spec, &digest, &pulled.manifest_bytes)?;
                pulled
            }
        };
        let layer = pulled.layer_digest().to_owned();
        if self.store.read(&layer).ok().flatten().is_none() {
            let component = self
                .registry
                .fetch_component(&spec.reference, &pulled)
                .await?;
            self.store_blob(spec, &layer, &component)?;
        }
        let precompiled = self.install_precompiled(spec, &pulled, &layer).await;
        self.store
            .link(
                &spec.name,
                &Linked {
                    source: spec.source.clone(),
                    manifest: digest,
                    layer,
                    precompiled,
                },
            )
            .map_err(|e| RegistryError::Other {
                reference: spec.reference.whole(),
                message: format!("cannot link the pulled plugin: {e}"),
            })?;
        Ok(Checked::Linked)
    }

    /// At start, for the version the last run linked: installs its precompiled code again from
    /// the store, verified against this run's engine (which may be another build than the one
    /// that installed it, or the cache entry may be gone), so a restart compiles nothing either.
    async fn reinstall_precompiled(&self, spec: &SourceSpec, linked: &Linked) {
        let Some(Ok(pulled)) = self
            .store
            .read(&linked.manifest)
            .ok()
            .flatten()
            .map(|bytes| Pulled::parse(&spec.reference, &linked.manifest, bytes))
        else {
            return;
        };
        self.install_precompiled(spec, &pulled, &linked.layer).await;
    }

    /// When `spec` trusts precompiled code and `pulled` ships it: pulls it into the store
    /// (unless there), has the engine verify it for the component `layer` and keep it. Its
    /// digest when installed; a refusal is logged, counted and shown, and the component is
    /// then compiled at its load.
    async fn install_precompiled(
        &self,
        spec: &SourceSpec,
        pulled: &Pulled,
        layer: &str,
    ) -> Option<String> {
        let engine = self.engine.as_ref().filter(|_| spec.trust_precompiled)?;
        let digest = pulled.precompiled_digest()?.to_owned();
        let installed = async {
            let code = match self.store.read(&digest).ok().flatten() {
                Some(code) => code,
                None => {
                    let code = self
                        .registry
                        .fetch_precompiled(&spec.reference, pulled)
                        .await
                        .map_err(|e| ("fetch", e.to_string()))?
                        .ok_or(("fetch", "the precompiled layer is gone".to_owned()))?;
                    self.store_blob(spec, &digest, &code)
                        .map_err(|e| ("fetch", e.to_string()))?;
                    code
                }
            };
            let component = layer.strip_prefix("sha256:").unwrap_or(layer);
            engine
                .install_precompiled(&code, component)
                .map_err(|e: PrecompiledError| (e.kind(), e.to_string()))
        }
        .await;
        let mut status = self.status.lock();
        let s = status.get_mut(&spec.name);
        match installed {
            Ok(()) => {
                tracing::info!(plugin = %spec.name, precompiled = %digest, "precompiled code verified and kept: the plugin loads without a compile");
                if let Some(s) = s {
                    s.precompiled = Some(digest.clone());
                    s.precompiled_error = None;
                }
                Some(digest)
            }
            Err((reason, message)) => {
                tracing::warn!(
                    plugin = %spec.name,
                    source = %spec.source,
                    precompiled = %digest,
                    reason,
                    error = %message,
                    "precompiled code refused: the component is compiled instead"
                );
                if let Some(observer) = &self.observer {
                    observer.precompiled_refused(&spec.name, reason);
                }
                if let Some(s) = s {
                    s.precompiled = None;
                    s.precompiled_error = Some(message);
                }
                None
            }
        }
    }

    fn store_blob(
        &self,
        spec: &SourceSpec,
        digest: &str,
        bytes: &[u8],
    ) -> Result<(), RegistryError> {
        self.store
            .write(digest, bytes)
            .map_err(|source| match source {
                source @ super::StoreError::DigestMismatch { .. } => RegistryError::Digest {
                    reference: spec.reference.whole(),
                    source,
                },
                e => RegistryError::Other {
                    reference: spec.reference.whole(),
                    message: format!("cannot store the pulled artifact: {e}"),
                },
            })
    }
}
