//! The running host: shared informers, the plugins, the directory watcher and the HTTP endpoint,
//! wired together and shut down in order.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use tokio_util::sync::CancellationToken;

use crate::api_client::{self, ConnectionOptions};
use crate::cli::{HostArgs, LeaderElectArgs};
use crate::config::{Config, LeaderElectionConfig};
use crate::health::{ApiHealth, HealthOptions};
use crate::leader::{Balance, ElectionOptions, LeaderElector};
use crate::metrics::{InformerSample, Metrics, PluginSample, PluginSource};
use crate::oci::{
    BlobStore, Credentials, PullObserver, Registry, RegistryOptions, SourceStatus, Sources,
};
use crate::reload::{Action, FileStatus, Loader, Reloader, SharedStatus};
use crate::server::{self, Probes};
use crate::status_page::{
    FileView, InformerView, LeaderView, PluginView, RecentLogs, Snapshot, SnapshotSource,
    StatusPage,
};
use kubewasm_runtime::{HostOptions, LeaderGate, PluginHost, PluginId, PluginPolicy, PluginStatus};

/// An error in what the user gave us (config file, plugins dir): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct UsageError(pub anyhow::Error);

/// Loads the config file named on the command line, or the defaults.
pub fn load_config(path: Option<&Path>) -> Result<Config, UsageError> {
    match path {
        Some(path) => Config::load(path).map_err(|e| UsageError(e.into())),
        None => Ok(Config::default()),
    }
}

/// The file an author's commands (`build`, `check`, `test`, `dev`) read when `--config` names
/// none: the project's, as `kubewasm new` writes it.
pub const PROJECT_CONFIG: &str = "kubewasm.toml";

/// Loads the config file named on the command line; without one, the project's
/// [`PROJECT_CONFIG`] in `project` when there is one, else the defaults. Also returns the file
/// read, so the command can say which.
pub fn load_project_config(
    path: Option<&Path>,
    project: &Path,
) -> Result<(Config, Option<PathBuf>), UsageError> {
    let file = match path {
        Some(path) => path.to_path_buf(),
        None => {
            let file = project.join(PROJECT_CONFIG);
            if !file.is_file() {
                return Ok((Config::default(), None));
            }
            file
        }
    };
    let config = load_config(Some(&file))?;
    Ok((config, Some(file)))
}

/// Checks that the plugins directory can be read before anything starts.
pub fn check_plugins_dir(dir: &Path) -> Result<(), UsageError> {
    std::fs::read_dir(dir)
        .map(drop)
        .with_context(|| format!("cannot read plugins directory {}", dir.display()))
        .map_err(UsageError)
}

/// The cluster `kubewasm run` talks to: the kubeconfig file given (`--kubeconfig`), else the
/// one kubectl would use (`KUBECONFIG`, then `~/.kube/config`), else the in-cluster config;
/// `context` picks a context other than the file's current one.
pub async fn cluster_config(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> anyhow::Result<kube::Config> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let chosen = match context {
        Some(context) => format!("context `{context}` of "),
        None => String::new(),
    };
    match (kubeconfig, context) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))
                .map_err(UsageError)?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("cannot use {chosen}kubeconfig {}", path.display()))
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .with_context(|| {
                format!("cannot use {chosen}the kubeconfig (KUBECONFIG or ~/.kube/config)")
            }),
        (None, None) => kube::Config::infer()
            .await
            .context("cannot find a cluster: no kubeconfig and not in a cluster"),
    }
}

/// Where compiled plugins are cached when no `--cache-dir` is given.
pub fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("kubewasm")
}

/// The policy for a plugin file, from the config (keyed by file stem).
pub fn policy_lookup(config: Arc<Config>) -> impl Fn(&Path) -> PluginPolicy + Send + Sync {
    move |path: &Path| {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        config.policy_for(&stem)
    }
}

/// The leader election this replica takes part in, the flags over the config file's
/// `[leader-election]`; `None` when neither turns it on. `default_namespace` is the Lease's
/// namespace when neither names one (the pod's, or the kubeconfig context's). More than one
/// shard ([`shard_count`]) turns it on.
pub fn election_options(
    args: &LeaderElectArgs,
    config: &LeaderElectionConfig,
    default_namespace: &str,
) -> Result<Option<ElectionOptions>, UsageError> {
    if !(args.leader_elect || config.enabled || shard_count(args, config) > 1) {
        return Ok(None);
    }
    let [lease_duration, renew_deadline, retry_period] = config
        .timings()
        .map_err(|m| UsageError(anyhow::anyhow!(m)))?;
    let options = ElectionOptions {
        lease_name: args
            .leader_elect_lease_name
            .clone()
            .unwrap_or_else(|| config.lease_name.clone()),
        namespace: args
            .leader_elect_namespace
            .clone()
            .or_else(|| config.namespace.clone())
            .unwrap_or_else(|| default_namespace.to_owned()),
        identity: crate::leader::default_identity(),
        lease_duration: args.leader_elect_lease_duration.unwrap_or(lease_duration),
        renew_deadline: args.leader_elect_renew_deadline.unwrap_or(renew_deadline),
        retry_period: args.leader_elect_retry_period.unwrap_or(retry_period),
    };
    options.validate().map_err(|e| UsageError(e.into()))?;
    Ok(Some(options))
}

/// How many shards the work is split into: `--shards`, else `[leader-election] shards`.
pub fn shard_count(args: &LeaderElectArgs, config: &LeaderElectionConfig) -> usize {
    args.shards.map_or(config.shards, usize::from).max(1)
}

/// This replica's part in leader election: the gate, the balance of shards (when sharded) and
/// the tasks that end once they have released what they held.
struct Election {
    gate: LeaderGate,
    balance: Option<Arc<Balance>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts contending when leader election is on: for the one Lease, or, with `shards` above 1,
/// for each shard's Lease beside a membership heartbeat that keeps the shards spread fairly.
/// The gate says what this replica leads (everything, when it is off); the metric per Lease
/// and `/plugins` follow it.
fn start_election(
    client: &kube::Client,
    options: Option<ElectionOptions>,
    shards: usize,
    eligible: Option<tokio::sync::watch::Receiver<crate::health::Verdict>>,
    metrics: &Arc<Metrics>,
    cancel: CancellationToken,
) -> anyhow::Result<Election> {
    let Some(options) = options else {
        return Ok(Election {
            gate: LeaderGate::always(),
            balance: None,
            tasks: Vec::new(),
        });
    };
    let invalid = |e: crate::leader::LeaderError| UsageError(e.into());
    let (gate, balance, tasks) = if shards <= 1 {
        let mut elector = LeaderElector::new(client.clone(), options).map_err(invalid)?;
        if let Some(eligible) = eligible {
            elector = elector.with_eligibility(eligible);
        }
        let gate = elector.gate();
        (gate, None, vec![tokio::spawn(elector.run(cancel))])
    } else {
        let sharded = crate::leader::spawn_sharded(client, options, shards, eligible, cancel)
            .map_err(invalid)?;
        (sharded.gate, Some(sharded.balance), sharded.tasks)
    };
    let mut changes = gate.subscribe_shards();
    let (metrics, watched) = (metrics.clone(), gate.clone());
    let publish = move || {
        for shard in 0..watched.shards() {
            metrics.set_leader(&watched.shard_lease(shard), watched.leads_shard(shard));
        }
    };
    publish();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            changes.borrow_and_update();
            publish();
        }
    });
    Ok(Election {
        gate,
        balance,
        tasks,
    })
}

/// The clients the host talks to the API server with.
#[derive(Clone)]
pub struct Clients {
    /// For the informers and discovery.
    pub read: kube::Client,
    /// For the writes of 0.2 plugins: built with kube's default retries off, so a 429 or 503
    /// answers the guest at once (it backs off through its workqueue) instead of being retried
    /// inside one call.
    pub write: kube::Client,
}

impl Clients {
    /// Both clients from one configuration, their connections kept as `connection` says
    /// (see [`crate::api_client`]).
    pub fn new(config: kube::Config, connection: &ConnectionOptions) -> anyhow::Result<Clients> {
        let mut write = config.clone();
        write.default_retry = false;
        Ok(Clients {
            read: api_client::build(config, connection).context("cannot create a kube client")?,
            write: api_client::build(write, connection).context("cannot create a kube client")?,
        })
    }
}

impl From<kube::Client> for Clients {
    /// One client for both (its retries stay on for writes).
    fn from(client: kube::Client) -> Clients {
        Clients {
            read: client.clone(),
            write: client,
        }
    }
}

/// Runs the host until `cancel` fires (SIGINT / SIGTERM), then shuts down in order: stop
/// watching files, let plugins finish the event in hand, stop the informers.
pub async fn run(
    clients: impl Into<Clients>,
    args: &HostArgs,
    config: Config,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    run_host(clients, args, config, cancel, WebhookDefault::NotServed).await
}

/// What serves the admission webhooks when neither `--webhook-addr` nor `--webhook-cert` and
/// `--webhook-key` are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookDefault {
    /// Nothing (`kubewasm run`: a cluster needs a certificate it trusts).
    NotServed,
    /// An endpoint on loopback with a certificate made at start, its webhook configurations
    /// kept in the API server the host talks to (`kubewasm dev`: that server is in this
    /// process).
    Loopback,
}

/// [`run`], with `webhooks` saying what serves the webhooks when no flag does.
pub async fn run_host(
    clients: impl Into<Clients>,
    args: &HostArgs,
    config: Config,
    cancel: CancellationToken,
    webhooks: WebhookDefault,
) -> anyhow::Result<()> {
    let webhook_default = webhooks;
    let Clients {
        read: client,
        write: write_client,
    } = clients.into();
    let config = Arc::new(config);
    let election = election_options(
        &args.leader,
        &config.leader_election,
        client.default_namespace(),
    )?;
    let shards = shard_count(&args.leader, &config.leader_election);
    let list_watch = config.informers.list_watch();
    let wire = list_watch.wire.clone();
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions {
            reflector: config.informers.reflector(),
            list_watch,
            ..FactoryOptions::default()
        },
    );
    factory.start();

    let informers = factory.clone();
    let metrics = Metrics::new(Arc::new(move || informer_samples(&informers)));
    let metrics = Arc::new(metrics.with_wire(wire));

    // Whether the informers reach the API server: readiness says so, and (unless
    // `follow-health = false`) a replica that cannot gives up leading.
    let health_cancel = CancellationToken::new();
    let health_options = election.as_ref().map_or_else(HealthOptions::default, |o| {
        HealthOptions::for_election(o.lease_duration, o.renew_deadline)
    });
    let health = ApiHealth::spawn(factory.clone(), health_options, health_cancel.clone());
    let eligible = config
        .leader_election
        .follow_health
        .then(|| health.subscribe());

    // Every replica keeps its informers synced and its plugins loaded (a warm standby); the
    // gate says which one leads, for whatever must only run on the leader.
    let election_cancel = CancellationToken::new();
    let Election {
        gate,
        balance,
        tasks: electors,
    } = start_election(
        &client,
        election,
        shards,
        eligible,
        &metrics,
        election_cancel.clone(),
    )?;

    let admission = kubewasm_runtime::admission::registry::AdmissionRegistry::default();
    let plugins = PluginHost::new(
        factory.clone(),
        client.clone(),
        HostOptions {
            cache_dir: Some(args.cache_dir.clone().unwrap_or_else(default_cache_dir)),
            policy: Arc::new(policy_lookup(config.clone())),
            observer: metrics.clone(),
            informer_grace: config.reload.informer_grace(),
            restart: config.limits.restart(),
            declarations: config.limits.declarations(),
            logs: config.limits.logs(),
            write_client: Some(write_client),
            leader: gate.clone(),
            admission: admission.clone(),
            ..HostOptions::default()
        },
    )?;

    let mut reloader = Reloader::new(
        args.plugins.clone(),
        HostLoader(plugins.clone()),
        config.reload.debounce(),
    );
    let sources = oci_sources(args, &config, &metrics)?
        .map(|sources| sources.with_engine(plugins.engine().clone()));
    let source_status = sources.as_ref().map(Sources::shared_status);
    metrics.set_plugin_source(plugin_source(plugins.clone()));
    let files = reloader.shared_status();
    // The plugin files found by the first scan: readiness waits for each of them.
    let initial: Arc<OnceLock<BTreeSet<PathBuf>>> = Arc::default();
    let ready: Arc<dyn Fn() -> Result<(), String> + Send + Sync> = {
        let (factory, plugins) = (factory.clone(), plugins.clone());
        let (files, initial) = (files.clone(), initial.clone());
        let (health, admission) = (health.clone(), admission.clone());
        Arc::new(move || {
            if !initial
                .get()
                .is_some_and(|initial| initial_files_settled(initial, &files))
            {
                return Err("the plugin files found at start are not all loaded yet".into());
            }
            if let Some((key, _)) = factory.informers().iter().find(|(_, i)| !i.has_synced()) {
                return Err(format!(
                    "informer {} {} has not synced yet",
                    key.resource.api_version, key.resource.plural
                ));
            }
            if !plugins.ready() {
                return Err("a plugin has not handled its initial replay yet".into());
            }
            admission.readiness()?;
            health.verdict()
        })
    };
    let status = Arc::new(StatusPage::new(
        status_source(StatusParts {
            factory: factory.clone(),
            plugins: plugins.clone(),
            metrics: metrics.clone(),
            files: files.clone(),
            gate: gate.clone(),
            ready: ready.clone(),
        }),
        RecentLogs::global().clone(),
    ));
    let probes = Probes {
        metrics: metrics.clone(),
        ready,
        status: status.clone(),
        plugins: {
            let (plugins, files, gate) = (plugins.clone(), files.clone(), gate.clone());
            let balance = balance.clone();
            Arc::new(move || {
                let files = files.lock().clone().unwrap_or_default();
                let sources: Vec<SourceStatus> = source_status
                    .as_ref()
                    .map(|s| s.lock().values().cloned().collect())
                    .unwrap_or_default();
                serde_json::json!({
                    "sources": sources,
                    "leader": leader_json(&gate, balance.as_deref()),
                    "plugins": plugins.plugins().iter().map(status_json).collect::<Vec<_>>(),
                    "files": files.iter().map(|f| serde_json::json!({
                        "path": f.path,
                        "plugin": f.plugin,
                        "error": f.error,
                        "pending": f.pending,
                    })).collect::<Vec<_>>(),
                })
            })
        },
    };
    let server_cancel = CancellationToken::new();
    let (addr, server) = server::serve(args.metrics_addr, probes, server_cancel.clone()).await?;
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz, /plugins and the status page (/)");
    let sampler = {
        let metrics = metrics.clone();
        status.spawn_sampler(
            move |bytes| metrics.set_status_page_bytes(bytes),
            server_cancel.clone(),
        )
    };
    let webhooks = match (&args.webhook.addr, &args.webhook.cert, &args.webhook.key) {
        (Some(addr), Some(cert), Some(key)) => {
            let cert = Arc::new(crate::admission::tls::ReloadingCert::new(cert, key)?);
            let (addr, task) = crate::admission::server::serve(
                *addr,
                cert,
                admission.clone(),
                metrics.admission().clone(),
                server_cancel.clone(),
            )
            .await?;
            tracing::info!(%addr, "serving admission webhooks over HTTPS");
            Some(task)
        }
        (None, None, None) if webhook_default == WebhookDefault::Loopback => {
            let loopback = crate::admission::loopback::LoopbackWebhooks::start(
                admission.clone(),
                metrics.admission().clone(),
                client.clone(),
                server_cancel.clone(),
            )
            .await?;
            tracing::info!(
                url = %loopback.url(),
                "serving admission webhooks on loopback with a certificate made for this run; \
                 the webhook configurations of the admission policies loaded are kept in the \
                 development API server (no --webhook-cert needed)"
            );
            Some(tokio::spawn(
                loopback.follow(admission.clone(), server_cancel.clone()),
            ))
        }
        _ => None,
    };

    if let Some(sources) = &sources {
        // Pulled (or found in the store) before the first scan, which then loads them; the
        // endpoint already answers (not ready) while a slow registry is waited for.
        sources.prepare().await?;
        reloader = reloader.also_watch(sources.dir());
    }

    let (initial_events, _) = reloader
        .scan()
        .await
        .with_context(|| format!("cannot scan plugins directory {}", args.plugins.display()))?;
    let report = {
        let metrics = metrics.clone();
        move |event: &crate::reload::ReloadEvent, _: &[FileStatus]| {
            let ok = event.result.is_ok();
            if event.action != Action::Unload {
                metrics.reloaded(&event.plugin, ok, event.elapsed);
            }
            // The plugin host logs every load, replacement and unload; a refusal is logged
            // here, once the reloader knows the file is not merely half written.
            match (&event.result, event.action) {
                (Ok(()), _) => tracing::debug!(
                    plugin = %event.plugin,
                    file = %event.path.display(),
                    elapsed_ms = event.elapsed.as_millis() as u64,
                    "plugin file applied"
                ),
                (Err(reason), Action::Load) => tracing::error!(
                    plugin = %event.plugin,
                    file = %event.path.display(),
                    %reason,
                    "plugin file rejected"
                ),
                (Err(reason), _) => tracing::warn!(
                    plugin = %event.plugin,
                    file = %event.path.display(),
                    %reason,
                    "replacement refused, the old version keeps running"
                ),
            }
        }
    };
    let status = reloader.status();
    for event in &initial_events {
        report(event, &status);
    }
    let _ = initial.set(status.into_iter().map(|f| f.path).collect());
    let watch_cancel = CancellationToken::new();
    let watcher = tokio::spawn(reloader.run(watch_cancel.clone(), report));
    let poller = sources.map(|sources| tokio::spawn(sources.run(watch_cancel.clone())));

    cancel.cancelled().await;
    tracing::info!("shutting down");
    // Leadership goes first, so a standby takes over while this replica drains.
    election_cancel.cancel();
    for elector in electors {
        if let Err(err) = elector.await {
            tracing::error!(error = %err, "leader elector panicked");
        }
    }
    watch_cancel.cancel();
    if let Some(poller) = poller
        && let Err(err) = poller.await
    {
        tracing::error!(error = %err, "OCI source poller panicked");
    }
    match watcher.await {
        Ok(Err(err)) => tracing::error!(error = %format!("{err:#}"), "plugin watcher failed"),
        Err(err) => tracing::error!(error = %err, "plugin watcher panicked"),
        Ok(Ok(())) => {}
    }
    plugins
        .shutdown(Duration::from_secs(args.shutdown_grace))
        .await;
    factory.shutdown().await;
    health_cancel.cancel();
    server_cancel.cancel();
    let _ = server.await;
    let _ = sampler.await;
    if let Some(webhooks) = webhooks {
        let _ = webhooks.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// The plugins configured by `source = "oci://..."`, if any, with the registry and store they
/// use. A source named like a file of the plugins directory is refused: both would load.
fn oci_sources(
    args: &HostArgs,
    config: &Config,
    metrics: &Arc<Metrics>,
) -> Result<Option<Sources>, UsageError> {
    let specs = config.sources();
    if specs.is_empty() {
        return Ok(None);
    }
    if let Some(spec) = specs
        .iter()
        .find(|s| args.plugins.join(format!("{}.wasm", s.name)).exists())
    {
        return Err(UsageError(anyhow::anyhow!(
            "plugin `{}` has a source ({}) and a file in the plugins directory: remove one",
            spec.name,
            spec.source
        )));
    }
    let credentials = Credentials::from_file_or_default(
        args.registry_config
            .as_deref()
            .or(config.registries.config.as_deref()),
    );
    let registry = Registry::new(RegistryOptions {
        credentials,
        plain_http: config.registries.plain_http.clone(),
    });
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let observer: Arc<dyn PullObserver> = metrics.clone();
    Ok(Some(Sources::new(
        specs,
        registry,
        BlobStore::new(&cache_dir),
        Some(observer),
    )))
}

/// The live plugin figures the metrics read on each scrape.
pub fn plugin_source(plugins: PluginHost) -> PluginSource {
    Arc::new(move || {
        plugins
            .plugins()
            .into_iter()
            .map(|p| PluginSample {
                plugin: p.key.to_string(),
                queue_depth: p.queue_depth as u64,
                resyncs_skipped: p.resyncs_skipped,
                failed: p.failed,
                workqueue: p.workqueue,
                memory_bytes: p.memory_bytes as u64,
            })
            .collect()
    })
}

/// Every informer's figures, for the metrics and the status page.
fn informer_samples(factory: &SharedInformerFactory) -> Vec<InformerSample> {
    factory
        .informers()
        .into_iter()
        .map(|(key, informer)| {
            let stats = informer.stats();
            let selector = [key.label_selector.as_deref(), key.field_selector.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(";");
            InformerSample {
                resource: format!("{}/{}", key.resource.api_version, key.resource.plural),
                namespace: key.namespace.clone().unwrap_or_default(),
                selector,
                objects: stats.objects as u64,
                relists: stats.relists,
                watch_restarts: stats.watch_restarts,
                bookmarks: stats.bookmarks,
                dead_connections: stats.dead_connections,
                synced: informer.has_synced(),
            }
        })
        .collect()
}

/// What the status page reads the host from.
struct StatusParts {
    factory: SharedInformerFactory,
    plugins: PluginHost,
    metrics: Arc<Metrics>,
    files: SharedStatus,
    gate: LeaderGate,
    ready: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
}

/// The status page's view of the host, read on each page and sample.
fn status_source(parts: StatusParts) -> SnapshotSource {
    Arc::new(move || {
        let p = &parts;
        let informers = informer_samples(&p.factory)
            .into_iter()
            .map(|s| InformerView {
                resource: s.resource,
                namespace: s.namespace,
                selector: s.selector,
                synced: s.synced,
                objects: s.objects,
                relists: s.relists,
                watch_restarts: s.watch_restarts,
                dead_connections: s.dead_connections,
            })
            .collect();
        let plugins = p
            .plugins
            .plugins()
            .iter()
            .map(|status| PluginView::new(status, p.metrics.plugin_counts(status.key.as_str())))
            .collect();
        let files = p
            .files
            .lock()
            .iter()
            .flatten()
            .filter_map(|f| {
                Some(FileView {
                    key: f
                        .path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    path: f.path.display().to_string(),
                    error: f.error.clone()?,
                })
            })
            .collect();
        Snapshot {
            leader: LeaderView {
                election: p.gate.elects(),
                leader: p.gate.is_leader(),
                identity: p.gate.identity().to_owned(),
                lease: p.gate.lease().to_owned(),
                shards: p.gate.shards(),
                led_shards: p.gate.led_shards(),
            },
            ready: (p.ready)(),
            informers,
            plugins,
            files,
        }
    })
}

/// Whether every file the first scan found has been dealt with: loaded, or refused for a reason
/// that is shown (a file deleted since does not count).
fn initial_files_settled(initial: &BTreeSet<PathBuf>, files: &SharedStatus) -> bool {
    let files = files.lock();
    let Some(files) = files.as_ref() else {
        return false;
    };
    files
        .iter()
        .filter(|f| initial.contains(&f.path))
        .all(|f| !f.pending && (f.plugin.is_some() || f.error.is_some()))
}

fn leader_json(gate: &LeaderGate, balance: Option<&Balance>) -> serde_json::Value {
    serde_json::json!({
        "election": gate.elects(),
        "lease": gate.lease(),
        "identity": gate.identity(),
        "leader": gate.is_leader(),
        "shards": gate.shards(),
        "led_shards": gate.led_shards(),
        "members": balance.map(Balance::members),
        "target": balance.map(|b| b.target(gate.identity())),
    })
}

fn status_json(p: &PluginStatus) -> serde_json::Value {
    serde_json::json!({
        "id": p.id.0,
        "plugin": p.key.as_str(),
        "name": p.name,
        "source": p.source,
        "content_hash": p.content_hash,
        "origin": p.origin.as_str(),
        "state": format!("{:?}", p.state).to_lowercase(),
        "failed": p.failed,
        "subscriptions": p.subscriptions,
        "events_delivered": p.events_delivered,
        "errors": p.errors,
        "reconciles": p.reconciles,
        "reconcile_errors": p.reconcile_errors,
        "traps": p.traps,
        "timeouts": p.timeouts,
        "memory_faults": p.memory_faults,
        "restarts": p.restarts,
        "events_dropped": p.events_dropped.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "queue_depth": p.queue_depth,
        "resyncs_skipped": p.resyncs_skipped,
        "memory_bytes": p.memory_bytes,
        "workqueue": p.workqueue.as_ref().map(|q| serde_json::json!({
            "depth": q.depth,
            "parked": q.parked,
            "waiting": q.waiting,
            "processing": q.processing,
            "oldest_ready_seconds": q.oldest_ready.map(|d| d.as_secs_f64()),
        })),
        "replay_done": p.replay_done,
        "last_error": p.last_error,
        "admission": p.admission,
        "grants": {"reads": p.reads, "writes": p.writes},
        "admission_unconfigured": p.admission_unconfigured,
    })
}

/// The plugin host as the directory watcher drives it (public for the end-to-end tests).
pub struct HostLoader(pub PluginHost);

impl HostLoader {
    /// The plugin's key, as reload events and their metrics name it.
    fn name_of(&self, id: &PluginId) -> String {
        self.0
            .plugins()
            .into_iter()
            .find(|p| &p.id == id)
            .map(|p| p.key.to_string())
            .unwrap_or_default()
    }
}

impl Loader for HostLoader {
    type Id = PluginId;

    async fn load(&self, path: &Path, bytes: Vec<u8>) -> anyhow::Result<(PluginId, String)> {
        let id = self.0.load(path, bytes).await?;
        let name = self.name_of(&id);
        Ok((id, name))
    }

    async fn replace(&self, id: &PluginId, bytes: Vec<u8>) -> anyhow::Result<String> {
        self.0.replace(*id, bytes).await?;
        Ok(self.name_of(id))
    }

    async fn unload(&self, id: &PluginId) {
        self.0.unload(*id).await;
    }
}

/// Fires `cancel` on SIGINT or SIGTERM.
pub fn cancel_on_signals(cancel: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
        cancel.cancel();
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leader election is off unless a flag or the config turns it on; flags override the
    /// config's keys, the namespace falls back to the client's, and bad timings are a usage error.
    #[test]
    fn election_options_take_the_flags_over_the_config() {
        let config = |text: &str| {
            Config::parse(text, Path::new("k.toml"))
                .expect("config")
                .leader_election
        };
        let off = LeaderElectArgs::default();
        assert!(election_options(&off, &config(""), "ns").unwrap().is_none());

        let on = config("[leader-election]\nenabled = true\nlease-name = \"ctl\"\n");
        let options = election_options(&off, &on, "ns").unwrap().expect("on");
        assert_eq!(
            (options.lease_name.as_str(), options.namespace.as_str()),
            ("ctl", "ns")
        );
        assert_eq!(options.lease_duration, Duration::from_secs(15));
        assert!(!options.identity.is_empty());

        let flags = LeaderElectArgs {
            leader_elect: true,
            leader_elect_namespace: Some("ops".into()),
            leader_elect_retry_period: Some(Duration::from_millis(500)),
            ..LeaderElectArgs::default()
        };
        let options = election_options(&flags, &config(""), "ns")
            .unwrap()
            .expect("on");
        assert_eq!(
            (options.lease_name.as_str(), options.namespace.as_str()),
            ("kubewasm", "ops")
        );
        assert_eq!(options.retry_period, Duration::from_millis(500));

        let late = LeaderElectArgs {
            leader_elect_renew_deadline: Some(Duration::from_secs(20)),
            ..flags
        };
        let err = election_options(&late, &config(""), "ns").unwrap_err();
        assert!(err.to_string().contains("renew deadline"), "{err}");

        // More than one shard turns leader election on; the flag is over the config.
        let sharded = config("[leader-election]\nshards = 4\n");
        assert_eq!(shard_count(&off, &sharded), 4);
        assert!(election_options(&off, &sharded, "ns").unwrap().is_some());
        let two = LeaderElectArgs {
            shards: Some(2),
            ..LeaderElectArgs::default()
        };
        assert_eq!(shard_count(&two, &sharded), 2);
        assert!(election_options(&two, &config(""), "ns").unwrap().is_some());
        assert_eq!(shard_count(&off, &config("")), 1);
    }

    /// A kubeconfig named on the command line is used as it is, and its context can be chosen.
    #[tokio::test]
    async fn cluster_config_reads_the_kubeconfig_given() {
        let (server, _) = kubewasm_tests::devserver().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("dev.kubeconfig");
        std::fs::write(&path, server.kubeconfig_yaml()).expect("writing the kubeconfig");

        let config = cluster_config(Some(&path), None).await.expect("config");
        assert_eq!(
            config.cluster_url.to_string().trim_end_matches('/'),
            server.url().trim_end_matches('/')
        );
        let client = kube::Client::try_from(config).expect("client");
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        namespaces
            .list(&Default::default())
            .await
            .expect("the dev server answers through the kubeconfig given");

        assert!(
            cluster_config(Some(&path), Some("kubewasm-dev"))
                .await
                .is_ok()
        );
        let err = cluster_config(Some(&path), Some("nope")).await.unwrap_err();
        assert!(format!("{err:#}").contains("context `nope`"), "{err:#}");
        let err = cluster_config(Some(&dir.path().join("missing")), None)
            .await
            .unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");

        server.shutdown().await;
    }
}
