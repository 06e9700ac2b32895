//! The host's config file: per-plugin grants, limits and config strings.
//!
//! ```toml
//! # kubewasm.toml
//! [defaults]
//! call-deadline-ms = 1000      # per guest call
//! memory-mib = 64              # per plugin instance
//! grants = ["*"]               # what a plugin without its own entry may read; "*" = all but Secrets
//!
//! [reload]
//! debounce-ms = 50
//! informer-grace-seconds = 60  # an informer no plugin uses any more is stopped after this
//!
//! [informers]
//! list = "any-version"         # or "streaming", "paginated": how informers list
//! bookmark-idle-seconds = 90   # a watch whose server sends bookmarks and then sends nothing,
//!                              # bookmark or event, for this long is restarted
//! protobuf = true              # protobuf for the built-in kinds that have it (ConfigMap, Secret,
//!                              # Namespace, ServiceAccount), as client-go asks; false: JSON only
//!
//! [connection]                 # how the host's connections to the API server are checked
//! http2 = true                 # HTTP/2 where the server offers it (TLS, ALPN h2), else HTTP/1.1
//! http2-read-idle-seconds = 30 # an HTTP/2 connection silent this long is sent a PING...
//! http2-ping-timeout-seconds = 15  # ...and closed if the PING is unanswered this long
//! tcp-keepalive-seconds = 15   # TCP keepalive probes on an idle connection after this
//! tcp-user-timeout-seconds = 30    # unacknowledged data this long closes a connection
//! connect-timeout-seconds = 10     # a connect (TCP and TLS handshake) taking longer fails
//! [limits]                     # host-wide; the defaults shown
//! max-name-bytes = 253         # what `init` may declare
//! max-subscriptions = 64
//! max-indexes = 128
//! max-field-indexes = 16       # of those, field paths (each reads the object's JSON per event)
//! max-index-name-bytes = 63
//! max-field-path-bytes = 256   # label and annotation keys: qualified names (<= 253 + 1 + 63)
//! max-field-path-depth = 16    # segments of a field path
//! max-index-values = 64        # values one object is filed under in one index; more left out
//! max-index-value-bytes = 1024 # an object is not filed under a longer value
//! log-lines-per-second = 1000  # per plugin, once its burst is used; the rest dropped, counted
//! log-burst-lines = 10000
//! log-line-bytes = 8192        # longer guest log lines are cut
//! restarts-before-failed = 5   # restarts in a row that never complete the replay
//! failed-retry-seconds = 300   # how often a failed plugin is tried again
//!
//! [leader-election]           # see `kubewasm run --help`; the flags override these
//! enabled = false              # contend for a Lease; only the leader reconciles and writes
//! lease-name = "kubewasm"
//! namespace = "kubewasm"       # default: the pod's namespace, else the kubeconfig's
//! lease-duration-seconds = 15  # a standby takes the Lease after it is unrenewed this long
//! renew-deadline-seconds = 10  # a leader that cannot renew for this long stops leading
//! retry-period-seconds = 2     # how often the leader renews and standbys try
//! shards = 1                   # above 1: split the work by namespace, one Lease per shard
//! follow-health = true         # release the Leases while the informers cannot reach the API
//!                              # server (a watch found dead, lists failing past the renew
//!                              # deadline); contend again after a lease duration healthy
//!
//! [plugins.pod-diff]           # keyed by the file name without `.wasm`
//! config = "verbose"
//! grants = ["Pod", "ConfigMap", "apps/*"]
//! call-deadline-ms = 500
//!
//! [impersonation]             # each plugin's writes as its own service account (off without
//! namespace = "kubewasm"       # this section): system:serviceaccount:NAMESPACE:plugin-NAME,
//!                              # NAME the file name without `.wasm`; `kubewasm rbac` prints them
//!
//! [registries]                # plugins from OCI registries (see `source` below)
//! config = "/etc/kubewasm/registry/.dockerconfigjson"  # default: $DOCKER_CONFIG/config.json,
//!                              # else ~/.docker/config.json; --registry-config overrides it
//! plain-http = ["127.0.0.1:5000"]  # registries spoken to without TLS (loopback, tests)
//!
//! [plugins.pod-diff-oci]       # a plugin pulled from a registry, linked as `pod-diff-oci.wasm`
//! source = "oci://registry.example/team/pod-diff:1.2"   # or ...@sha256:<hex>
//! poll-seconds = 60            # look for a moved tag this often (default: once per start)
//! trust-precompiled = true     # load the artifact's precompiled code instead of compiling it
//!                              # (it runs as native code: see docs/security.md)
//!
//! [plugins.sample-controller]
//! writes = ["apps/Deployment", "Event:create,patch"]   # none by default
//! max-concurrent-reconciles = 2   # 0.2 plugins: instances reconciling at once (default 1)
//! write-qps = 5.0                 # client-side write rate limit (client-go's defaults): a write
//! write-burst = 10                # with no token left answers too-many-requests at once
//! api-call-timeout-ms = 10000     # wall-clock limit of one API call
//! retry-base-delay-ms = 5         # per-key backoff of a failed reconcile, doubling...
//! retry-max-delay-seconds = 1000  # ...up to this
//! retry-qps = 10.0                # overall retry token bucket of the plugin's workqueue
//! retry-burst = 100
//! retry-jitter = 0.1              # up to this fraction of a retry's backoff added at random
//! reconciles-per-second = 200.0   # reconciles the plugin's instances start, together...
//! reconcile-burst = 1000          # ...once this many at once are spent
//! min-requeue-delay-ms = 100      # a shorter requeue-after (even 0) waits this long
//! max-queue-keys = 100000         # keys the workqueue holds before the guest's new ones are refused
//! max-key-bytes = 512             # longest key (namespace + name) the guest may queue
//! max-add-after-seconds = 86400   # longest add-after delay; a longer requeue-after is cut to it
//!
//! [plugins.replica-stats]
//! every-replica = true            # reconcile on every replica, not only the leader; only
//!                                 # for plugins without `writes` (default false)
//! ```
//!
//! A grant names resources by API group and kind: `ConfigMap` (core group), `apps/Deployment`,
//! `apps/*`, or `*` for everything. Secrets are only ever readable through a grant that names them
//! (`Secret`): no wildcard covers them.
//!
//! A write grant (0.2 plugins) names resources the same way, optionally followed by `:` and the
//! verbs it allows (`create`, `update`, `patch`, `delete`, `status`; all when omitted). No
//! plugin may write anything unless its own entry says so, and Secrets only when named.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubewasm_informer::{ListStrategy, ListWatchOptions, ReflectorOptions};
use serde::Deserialize;

use crate::api_client::ConnectionOptions;

use crate::oci::SourceSpec;
use kubewasm_runtime::{
    ClientOptions, DeclarationLimits, Grants, Limits, LogLimits, Namespace, PluginAccount,
    PluginPolicy, QueueOptions, ResourcePattern, RestartPolicy, WriteGrant, WriteGrants,
};

/// Why the config could not be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or has an unknown key or a value of the wrong type.
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A value parsed but makes no sense (a zero deadline, a malformed grant, ...).
    #[error("invalid config file {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// The whole config file. Every section is optional; an absent file means all defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default)]
    pub reload: ReloadConfig,
    #[serde(default)]
    pub informers: InformersConfig,
    #[serde(default)]
    pub connection: ConnectionConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub leader_election: LeaderElectionConfig,
    #[serde(default)]
    pub registries: RegistriesConfig,
    /// Each plugin's requests as its own service account; absent: as the host.
    pub impersonation: Option<ImpersonationConfig>,
    /// Per-plugin settings, keyed by the plugin file's name without `.wasm`.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginConfig>,
}

/// Settings every plugin gets unless its own entry says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Defaults {
    /// Longest a single guest call may run before the instance is interrupted.
    pub call_deadline_ms: u64,
    /// Most linear memory a plugin instance may grow to.
    pub memory_mib: u64,
    /// Most JSON one `list-objects` / `by-index` answer may carry (default: a quarter of the
    /// memory cap).
    pub max_answer_mib: Option<u64>,
    /// What a plugin with no entry of its own may subscribe to and query.
    pub grants: Vec<Grant>,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            call_deadline_ms: 1000,
            memory_mib: 64,
            max_answer_mib: None,
            grants: vec![Grant(ResourcePattern::new("*", "*"))],
        }
    }
}

/// How the plugins directory is watched.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReloadConfig {
    /// How long a file must go unmodified before it is loaded (it may still be being written).
    pub debounce_ms: u64,
    /// How long an informer no plugin uses any more keeps its cache before it is stopped.
    pub informer_grace_seconds: u64,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        ReloadConfig {
            debounce_ms: 50,
            informer_grace_seconds: 60,
        }
    }
}

impl ReloadConfig {
    pub fn debounce(&self) -> Duration {
        Duration::from_millis(self.debounce_ms)
    }

    pub fn informer_grace(&self) -> Duration {
        Duration::from_secs(self.informer_grace_seconds)
    }
}

/// How the shared informers list and watch.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct InformersConfig {
    /// `any-version` (the default: one LIST at resourceVersion=0, answered from the API
    /// server's watch cache), `streaming` (a watch with sendInitialEvents) or `paginated`
    /// (consistent LISTs of 500); see [`ListStrategy`].
    #[serde(deserialize_with = "list_strategy")]
    pub list: ListStrategy,
    /// A watch whose server has sent bookmarks, and that then sends nothing (no event, no
    /// bookmark) for this long, is presumed dead and restarted. kube-apiserver sends a
    /// bookmark about once a minute.
    pub bookmark_idle_seconds: u64,
    /// Ask for protobuf, as client-go does, when listing and watching the built-in kinds the
    /// informer decodes it for (the cache holds the same JSON either way; every other kind is
    /// read as JSON). `false` reads everything as JSON.
    pub protobuf: bool,
    /// Ask for gzip on LISTs, as client-go does (the API server compresses answers over
    /// 128 KiB: about a twentieth of the bytes on the wire, for some API server and client CPU;
    /// watches are never compressed). `false` asks for them uncompressed.
    pub gzip: bool,
}

impl Default for InformersConfig {
    fn default() -> Self {
        InformersConfig {
            list: ListStrategy::default(),
            bookmark_idle_seconds: ReflectorOptions::default().bookmark_idle_limit.as_secs(),
            protobuf: ListWatchOptions::default().protobuf,
            gzip: ListWatchOptions::default().gzip,
        }
    }
}

impl InformersConfig {
    /// The reflector options these settings give.
    pub fn reflector(&self) -> ReflectorOptions {
        ReflectorOptions {
            list: self.list,
            bookmark_idle_limit: Duration::from_secs(self.bookmark_idle_seconds),
            ..ReflectorOptions::default()
        }
    }

    /// The list and watch options these settings give.
    pub fn list_watch(&self) -> ListWatchOptions {
        ListWatchOptions {
            protobuf: self.protobuf,
            gzip: self.gzip,
            ..ListWatchOptions::default()
        }
    }
}

/// How the host's connections to the API server are checked (see [`crate::api_client`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConnectionConfig {
    /// HTTP/2 where the server offers it.
    pub http2: bool,
    pub http2_read_idle_seconds: u64,
    pub http2_ping_timeout_seconds: u64,
    pub tcp_keepalive_seconds: u64,
    pub tcp_user_timeout_seconds: u64,
    pub connect_timeout_seconds: u64,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        let defaults = ConnectionOptions::default();
        ConnectionConfig {
            http2: defaults.http2,
            http2_read_idle_seconds: defaults.http2_read_idle.as_secs(),
            http2_ping_timeout_seconds: defaults.http2_ping_timeout.as_secs(),
            tcp_keepalive_seconds: defaults.tcp_keepalive.as_secs(),
            tcp_user_timeout_seconds: defaults.tcp_user_timeout.as_secs(),
            connect_timeout_seconds: defaults.connect_timeout.as_secs(),
        }
    }
}

impl ConnectionConfig {
    /// The client's connection options.
    pub fn options(&self) -> ConnectionOptions {
        ConnectionOptions {
            http2: self.http2,
            http2_read_idle: Duration::from_secs(self.http2_read_idle_seconds),
            http2_ping_timeout: Duration::from_secs(self.http2_ping_timeout_seconds),
            tcp_keepalive: Duration::from_secs(self.tcp_keepalive_seconds),
            tcp_user_timeout: Duration::from_secs(self.tcp_user_timeout_seconds),
            connect_timeout: Duration::from_secs(self.connect_timeout_seconds),
        }
    }
}

fn list_strategy<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<ListStrategy, D::Error> {
    let s = String::deserialize(deserializer)?;
    s.parse().map_err(serde::de::Error::custom)
}

/// Host-wide limits on what plugins may declare, log, and how often they are restarted.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitsConfig {
    /// Longest plugin name `init` may return, in bytes.
    pub max_name_bytes: usize,
    /// Most subscriptions one plugin may declare.
    pub max_subscriptions: usize,
    /// Most indexes one plugin may declare.
    pub max_indexes: usize,
    /// Most field-path indexes one plugin may declare.
    pub max_field_indexes: usize,
    /// Longest index name, in bytes.
    pub max_index_name_bytes: usize,
    /// Longest field path of an index, in bytes.
    pub max_field_path_bytes: usize,
    /// Most segments of a field path of an index.
    pub max_field_path_depth: usize,
    /// Most values one object is filed under in one index.
    pub max_index_values: usize,
    /// Longest value kept as an index key, in bytes.
    pub max_index_value_bytes: usize,
    /// Guest log lines (log import, stdout, stderr) one plugin may emit per second once its
    /// burst is used up; more are dropped and counted.
    pub log_lines_per_second: u32,
    /// Guest log lines one plugin may emit at once.
    pub log_burst_lines: u32,
    /// Longest guest log line kept, in bytes; longer ones are cut and counted.
    pub log_line_bytes: usize,
    /// Restarts in a row that do not complete the replay before a plugin is failed.
    pub restarts_before_failed: u32,
    /// How often a failed plugin is tried again.
    pub failed_retry_seconds: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let declarations = DeclarationLimits::default();
        let logs = LogLimits::default();
        let restart = RestartPolicy::default();
        LimitsConfig {
            max_name_bytes: declarations.max_name_bytes,
            max_subscriptions: declarations.max_subscriptions,
            max_indexes: declarations.max_indexes,
            max_field_indexes: declarations.max_field_indexes,
            max_index_name_bytes: declarations.max_index_name_bytes,
            max_field_path_bytes: declarations.max_field_path_bytes,
            max_field_path_depth: declarations.max_field_path_depth,
            max_index_values: declarations.max_index_values,
            max_index_value_bytes: declarations.max_index_value_bytes,
            log_lines_per_second: logs.lines_per_second,
            log_burst_lines: logs.burst_lines,
            log_line_bytes: logs.line_bytes,
            restarts_before_failed: restart.max_restarts_without_progress,
            failed_retry_seconds: restart.failed_retry.as_secs(),
        }
    }
}

impl LimitsConfig {
    pub fn declarations(&self) -> DeclarationLimits {
        DeclarationLimits {
            max_name_bytes: self.max_name_bytes,
            max_subscriptions: self.max_subscriptions,
            max_indexes: self.max_indexes,
            max_field_indexes: self.max_field_indexes,
            max_index_name_bytes: self.max_index_name_bytes,
            max_field_path_bytes: self.max_field_path_bytes,
            max_field_path_depth: self.max_field_path_depth,
            max_index_values: self.max_index_values,
            max_index_value_bytes: self.max_index_value_bytes,
        }
    }

    pub fn logs(&self) -> LogLimits {
        LogLimits {
            lines_per_second: self.log_lines_per_second,
            burst_lines: self.log_burst_lines,
            line_bytes: self.log_line_bytes,
        }
    }

    pub fn restart(&self) -> RestartPolicy {
        RestartPolicy {
            max_restarts_without_progress: self.restarts_before_failed,
            failed_retry: Duration::from_secs(self.failed_retry_seconds),
        }
    }
}

/// Leader election among replicas (see [`crate::leader`]); `kubewasm run`'s `--leader-elect*`
/// flags override each key.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct LeaderElectionConfig {
    /// Contend for the Lease; off, this replica always leads.
    pub enabled: bool,
    pub lease_name: String,
    /// Namespace of the Lease (default: the pod's namespace, else the kubeconfig's).
    pub namespace: Option<String>,
    pub lease_duration_seconds: f64,
    pub renew_deadline_seconds: f64,
    pub retry_period_seconds: f64,
    /// Split the work into this many shards by namespace, each with its own Lease (1: one
    /// leader for everything; above 1 turns leader election on).
    pub shards: usize,
    /// Step down (release the Leases) while the informers do not reach the API server, and
    /// contend again once they have for a lease duration (see [`crate::health`]).
    pub follow_health: bool,
}

impl Default for LeaderElectionConfig {
    fn default() -> Self {
        let defaults = crate::leader::ElectionOptions::new("kubewasm", "", "");
        LeaderElectionConfig {
            enabled: false,
            lease_name: defaults.lease_name,
            namespace: None,
            lease_duration_seconds: defaults.lease_duration.as_secs_f64(),
            renew_deadline_seconds: defaults.renew_deadline.as_secs_f64(),
            retry_period_seconds: defaults.retry_period.as_secs_f64(),
            shards: 1,
            follow_health: true,
        }
    }
}

impl LeaderElectionConfig {
    /// The three timings, checked to be positive and finite (their order is checked once the
    /// flags are applied, by [`crate::leader::ElectionOptions::validate`]).
    pub fn timings(&self) -> Result<[Duration; 3], String> {
        let keys = [
            ("lease-duration-seconds", self.lease_duration_seconds),
            ("renew-deadline-seconds", self.renew_deadline_seconds),
            ("retry-period-seconds", self.retry_period_seconds),
        ];
        let mut out = [Duration::ZERO; 3];
        for (slot, (key, seconds)) in out.iter_mut().zip(keys) {
            *slot = Duration::try_from_secs_f64(seconds)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    format!("[leader-election] {key} must be above zero, not {seconds}")
                })?;
        }
        Ok(out)
    }
}

/// How registries are reached, for plugins configured by `source = "oci://..."`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RegistriesConfig {
    /// A Docker config file (or a mounted `kubernetes.io/dockerconfigjson` Secret's
    /// `.dockerconfigjson`) with the registries' credentials; `--registry-config` overrides it.
    pub config: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP instead of HTTPS.
    pub plain_http: Vec<String>,
}

/// Per-plugin impersonation (see [`kubewasm_runtime::PluginAccount`]): every request made for a
/// plugin carries `Impersonate-User: system:serviceaccount:NAMESPACE:plugin-NAME`, `NAME` its
/// file name without `.wasm`, so the API server enforces each plugin's own grants. The host's
/// own requests (informers, discovery, leader election) are not impersonated.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ImpersonationConfig {
    /// Where the plugins' service accounts are.
    pub namespace: String,
}

/// One plugin's own settings; unset fields fall back to [`Defaults`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginConfig {
    /// Passed to the guest's `init`.
    pub config: Option<String>,
    /// Where the plugin is pulled from (`oci://host/repo:tag` or `...@sha256:<hex>`) instead of
    /// a file in the plugins directory.
    pub source: Option<String>,
    /// How often a `source` tag is resolved again; a moved tag is pulled and hot-reloaded.
    pub poll_seconds: Option<u64>,
    /// Load the precompiled code a `source`'s artifact ships (when it matches this host's
    /// engine and target) instead of compiling its component: native code from the publisher
    /// runs in the host's process, so it is off unless the operator trusts them with that.
    #[serde(default)]
    pub trust_precompiled: bool,
    pub grants: Option<Vec<Grant>>,
    /// What the plugin may write; nothing when absent.
    pub writes: Option<Vec<WriteGrantEntry>>,
    pub call_deadline_ms: Option<u64>,
    pub memory_mib: Option<u64>,
    pub max_answer_mib: Option<u64>,
    /// Instances of a 0.2 plugin reconciling at once (never the same key twice).
    pub max_concurrent_reconciles: Option<usize>,
    /// The plugin's client-side write rate limit, writes per second.
    pub write_qps: Option<f64>,
    pub write_burst: Option<u32>,
    /// The wall-clock limit of one API call made for the plugin.
    pub api_call_timeout_ms: Option<u64>,
    /// The first retry delay of a failed reconcile; it doubles with each failure.
    pub retry_base_delay_ms: Option<u64>,
    /// The most a key's retry delay grows to.
    pub retry_max_delay_seconds: Option<u64>,
    /// The overall retry rate of the plugin's workqueue.
    pub retry_qps: Option<f64>,
    pub retry_burst: Option<u32>,
    /// Up to this fraction of a retry's backoff is added at random (0 to 1; default 0.1).
    pub retry_jitter: Option<f64>,
    /// Reconcile on every replica, leader or not; only for a plugin that writes nothing.
    pub every_replica: Option<bool>,
    /// Reconciles per second the plugin may start, once its burst is spent.
    pub reconciles_per_second: Option<f64>,
    pub reconcile_burst: Option<u32>,
    /// The shortest `requeue-after` honoured (0 honours `requeue-after(0)` as it is).
    pub min_requeue_delay_ms: Option<u64>,
    /// The most keys the plugin's workqueue holds before the guest's adds of new keys are
    /// refused.
    pub max_queue_keys: Option<usize>,
    /// The longest key (namespace and name, in bytes) the guest may queue.
    pub max_key_bytes: Option<usize>,
    /// The longest delay the guest's `add-after` may ask for.
    pub max_add_after_seconds: Option<u64>,
}

pub use kubewasm_runtime::ReconcileSettings;

impl PluginConfig {
    /// This entry's reconcile settings, client-go's defaults where it says nothing.
    pub fn reconcile_settings(&self) -> ReconcileSettings {
        let defaults = ReconcileSettings::default();
        let queue = QueueOptions::default();
        let client = ClientOptions::default();
        ReconcileSettings {
            max_concurrent_reconciles: self.max_concurrent_reconciles.unwrap_or(1),
            every_replica: self.every_replica.unwrap_or(false),
            reconciles_per_second: self
                .reconciles_per_second
                .unwrap_or(defaults.reconciles_per_second),
            reconcile_burst: self.reconcile_burst.unwrap_or(defaults.reconcile_burst),
            min_requeue_delay: self
                .min_requeue_delay_ms
                .map_or(defaults.min_requeue_delay, Duration::from_millis),
            queue: QueueOptions {
                base_delay: self
                    .retry_base_delay_ms
                    .map_or(queue.base_delay, Duration::from_millis),
                max_delay: self
                    .retry_max_delay_seconds
                    .map_or(queue.max_delay, Duration::from_secs),
                retry_qps: self.retry_qps.unwrap_or(queue.retry_qps),
                retry_burst: self.retry_burst.unwrap_or(queue.retry_burst),
                retry_jitter: self.retry_jitter.unwrap_or(queue.retry_jitter),
                max_keys: self.max_queue_keys.unwrap_or(queue.max_keys),
                max_key_bytes: self.max_key_bytes.unwrap_or(queue.max_key_bytes),
                max_add_after: self
                    .max_add_after_seconds
                    .map_or(queue.max_add_after, Duration::from_secs),
            },
            client: ClientOptions {
                qps: self.write_qps.unwrap_or(client.qps),
                burst: self.write_burst.unwrap_or(client.burst),
                call_timeout: self
                    .api_call_timeout_ms
                    .map_or(client.call_timeout, Duration::from_millis),
            },
        }
    }
}

/// One grant from the config file, as `Kind` (core group), `group/Kind`, `group/*` or `*`.
/// `core/Kind` also names the core group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant(pub ResourcePattern);

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid = |p: &str| {
            p == "*"
                || (!p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'))
        };
        let (group, kind) = match s.split_once('/') {
            None => ("", s),
            Some(("core", kind)) => ("", kind),
            Some((group, kind)) => (group, kind),
        };
        let group = if s == "*" { "*" } else { group };
        if (group.is_empty() || valid(group)) && valid(kind) && !kind.contains('/') {
            Ok(Grant(ResourcePattern::new(group, kind)))
        } else {
            Err(format!(
                "bad grant `{s}`: expected `Kind`, `group/Kind`, `group/*` or `*`"
            ))
        }
    }
}

impl<'de> Deserialize<'de> for Grant {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One write grant from the config file: a [`Grant`]'s resources, then optionally `:` and a
/// comma-separated list of verbs (`apps/Deployment:create,update`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteGrantEntry(pub WriteGrant);

impl std::str::FromStr for WriteGrantEntry {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (resources, verbs) = match s.split_once(':') {
            None => (s, None),
            Some((resources, verbs)) => (
                resources,
                Some(verbs.split(',').map(|v| v.trim().to_owned()).collect()),
            ),
        };
        let Grant(pattern) = resources.parse()?;
        WriteGrant::new(pattern, verbs)
            .map(WriteGrantEntry)
            .map_err(|e| format!("bad write grant `{s}`: {e}"))
    }
}

impl<'de> Deserialize<'de> for WriteGrantEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text, path)
    }

    /// Parses and validates config text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        config.validate(path)?;
        Ok(config)
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        self.leader_election.timings().map_err(invalid)?;
        if let Some(impersonation) = &self.impersonation {
            Namespace::new(&impersonation.namespace)
                .map_err(|e| invalid(format!("[impersonation] {e}")))?;
        }
        self.connection.options().validate().map_err(invalid)?;
        if self.informers.bookmark_idle_seconds == 0 {
            return Err(invalid(
                "[informers] bookmark-idle-seconds must be > 0".into(),
            ));
        }
        if self.leader_election.lease_name.is_empty() {
            return Err(invalid(
                "[leader-election] lease-name must not be empty".into(),
            ));
        }
        if !(1..=1024).contains(&self.leader_election.shards) {
            return Err(invalid(format!(
                "[leader-election] shards must be from 1 to 1024, not {}",
                self.leader_election.shards
            )));
        }
        let limits = std::iter::once((
            "defaults",
            Some(self.defaults.call_deadline_ms),
            Some(self.defaults.memory_mib),
        ))
        .chain(
            self.plugins
                .iter()
                .map(|(name, p)| (name.as_str(), p.call_deadline_ms, p.memory_mib)),
        );
        let answers = std::iter::once(("defaults", self.defaults.max_answer_mib)).chain(
            self.plugins
                .iter()
                .map(|(name, p)| (name.as_str(), p.max_answer_mib)),
        );
        let l = &self.limits;
        let zero = [
            ("max-name-bytes", l.max_name_bytes == 0),
            ("max-index-name-bytes", l.max_index_name_bytes == 0),
            ("max-field-path-bytes", l.max_field_path_bytes == 0),
            ("max-field-path-depth", l.max_field_path_depth == 0),
            ("max-index-values", l.max_index_values == 0),
            ("max-index-value-bytes", l.max_index_value_bytes == 0),
            ("log-lines-per-second", l.log_lines_per_second == 0),
            ("log-line-bytes", l.log_line_bytes == 0),
            ("restarts-before-failed", l.restarts_before_failed == 0),
            ("failed-retry-seconds", l.failed_retry_seconds == 0),
        ];
        if let Some((key, _)) = zero.iter().find(|(_, z)| *z) {
            return Err(invalid(format!("[limits] {key} must be > 0")));
        }
        for (section, mib) in answers {
            if mib == Some(0) {
                return Err(invalid(format!("[{section}] max-answer-mib must be > 0")));
            }
        }
        for (name, plugin) in &self.plugins {
            let checked = match (&plugin.source, plugin.poll_seconds) {
                (_, Some(0)) => Err("poll-seconds must be > 0".to_owned()),
                (None, Some(_)) => Err("poll-seconds needs a source".to_owned()),
                (None, None) if plugin.trust_precompiled => Err(
                    "trust-precompiled needs a source (only OCI artifacts ship precompiled code)"
                        .to_owned(),
                ),
                (Some(source), poll) => {
                    SourceSpec::new(name, source, poll.map(Duration::from_secs)).map(drop)
                }
                (None, None) => Ok(()),
            };
            if let Err(message) = checked {
                return Err(invalid(format!("[plugins.{name}] {message}")));
            }
            let settings = plugin.reconcile_settings();
            if let Err(message) = settings.validate() {
                return Err(invalid(format!("[plugins.{name}] {message}")));
            }
            if settings.every_replica && plugin.writes.as_ref().is_some_and(|w| !w.is_empty()) {
                return Err(invalid(format!(
                    "[plugins.{name}] every-replica is only for plugins that write nothing: \
                     writes from every replica would race; remove `writes` or `every-replica`"
                )));
            }
        }
        for (section, deadline, memory) in limits {
            if deadline == Some(0) {
                return Err(invalid(format!("[{section}] call-deadline-ms must be > 0")));
            }
            if let Some(mib) = memory
                && !(1..=4096).contains(&mib)
            {
                return Err(invalid(format!(
                    "[{section}] memory-mib must be between 1 and 4096, got {mib}"
                )));
            }
        }
        Ok(())
    }

    /// The plugins configured by registry reference.
    pub fn sources(&self) -> Vec<SourceSpec> {
        self.plugins
            .iter()
            .filter_map(|(name, p)| {
                let poll = p.poll_seconds.map(Duration::from_secs);
                SourceSpec::new(name, p.source.as_deref()?, poll)
                    .ok()
                    .map(|s| s.trusting_precompiled(p.trust_precompiled))
            })
            .collect()
    }

    /// The reconcile settings of the plugin loaded from a file named `stem.wasm`.
    pub fn reconcile_for(&self, stem: &str) -> ReconcileSettings {
        self.plugins
            .get(stem)
            .cloned()
            .unwrap_or_default()
            .reconcile_settings()
    }

    /// The policy for the plugin loaded from a file named `stem.wasm`.
    pub fn policy_for(&self, stem: &str) -> PluginPolicy {
        let d = &self.defaults;
        let own = self.plugins.get(stem).cloned().unwrap_or_default();
        let reconcile = own.reconcile_settings();
        let grants = own.grants.unwrap_or_else(|| d.grants.clone());
        PluginPolicy {
            grants: Grants::only(grants.into_iter().map(|g| g.0).collect()),
            writes: WriteGrants::only(
                own.writes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|w| w.0)
                    .collect(),
            ),
            config: own.config.unwrap_or_default(),
            reconcile,
            impersonate: self.impersonation.as_ref().map(|i| {
                let namespace = Namespace::new(&i.namespace)?;
                PluginAccount::for_plugin(&namespace, stem)
            }),
            limits: Some(Limits {
                call_deadline: Duration::from_millis(
                    own.call_deadline_ms.unwrap_or(d.call_deadline_ms),
                ),
                memory: usize::try_from(own.memory_mib.unwrap_or(d.memory_mib) << 20)
                    .unwrap_or(usize::MAX),
                max_answer: own
                    .max_answer_mib
                    .or(d.max_answer_mib)
                    .map(|mib| usize::try_from(mib << 20).unwrap_or(usize::MAX)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::Gvk;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("kubewasm.toml"))
    }

    fn gvk(group: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn empty_file_gives_defaults_that_grant_all_but_secrets() {
        let policy = parse("").unwrap().policy_for("anything");
        assert!(policy.grants.allows(&gvk("", "ConfigMap")));
        assert!(policy.grants.allows(&gvk("apps", "Deployment")));
        assert!(!policy.grants.allows(&gvk("", "Secret")));
        let limits = policy.limits.unwrap();
        assert_eq!(limits.call_deadline, Duration::from_secs(1));
        assert_eq!(limits.memory, 64 << 20);
    }

    #[test]
    fn plugin_entry_overrides_defaults() {
        let config = parse(
            r#"
            [defaults]
            call-deadline-ms = 2000
            [plugins.reader]
            config = "verbose"
            grants = ["Secret", "apps/*"]
            memory-mib = 16
            "#,
        )
        .unwrap();
        let p = config.policy_for("reader");
        assert_eq!(p.config, "verbose");
        assert!(p.grants.allows(&gvk("", "Secret")));
        assert!(p.grants.allows(&gvk("apps", "ReplicaSet")));
        assert!(!p.grants.allows(&gvk("", "ConfigMap")));
        let limits = p.limits.unwrap();
        assert_eq!(limits.call_deadline, Duration::from_secs(2));
        assert_eq!(limits.memory, 16 << 20);
        assert_eq!(config.policy_for("other").config, "");
    }

    #[test]
    fn informers_list_strategy_defaults_to_any_version_and_names_the_choices() {
        assert_eq!(parse("").unwrap().informers.list, ListStrategy::AnyVersion);
        let config = parse("[informers]\nlist = \"streaming\"\n").unwrap();
        assert_eq!(config.informers.list, ListStrategy::Streaming);
        let err = parse("[informers]\nlist = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("kubewasm.toml") && err.contains("paginated"),
            "{err}"
        );
    }

    #[test]
    fn informers_ask_for_protobuf_unless_turned_off() {
        assert!(parse("").unwrap().informers.list_watch().protobuf);
        let off = parse("[informers]\nprotobuf = false\n").unwrap();
        assert!(!off.informers.list_watch().protobuf);
    }

    #[test]
    fn informers_ask_for_gzip_lists_unless_turned_off() {
        let on = parse("").unwrap().informers.list_watch();
        assert!(on.gzip && on.protobuf);
        let off = parse("[informers]\ngzip = false\n")
            .unwrap()
            .informers
            .list_watch();
        assert!(!off.gzip && off.protobuf);
    }

    #[test]
    fn leader_election_is_off_by_default_and_its_timings_must_be_positive() {
        let config = parse("").unwrap().leader_election;
        assert!(!config.enabled);
        assert_eq!(
            config.timings().unwrap(),
            [15, 10, 2].map(Duration::from_secs)
        );
        let config = parse(
            "[leader-election]\nenabled = true\nnamespace = \"ops\"\nretry-period-seconds = 0.5\n",
        )
        .unwrap()
        .leader_election;
        assert!(config.enabled);
        assert_eq!(config.namespace.as_deref(), Some("ops"));
        assert_eq!(config.timings().unwrap()[2], Duration::from_millis(500));
        for bad in [
            "renew-deadline-seconds = 0",
            "lease-duration-seconds = -1",
            "lease-name = \"\"",
            "shards = 0",
        ] {
            let err = parse(&format!("[leader-election]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("kubewasm.toml") && err.contains("[leader-election]"),
                "{err}"
            );
        }
    }

    #[test]
    fn grant_syntax() {
        let g = |s: &str| s.parse::<Grant>().map(|g| (g.0.group, g.0.kind));
        assert_eq!(g("ConfigMap"), Ok(("".into(), "ConfigMap".into())));
        assert_eq!(g("core/Pod"), Ok(("".into(), "Pod".into())));
        assert_eq!(g("apps/*"), Ok(("apps".into(), "*".into())));
        assert_eq!(g("*"), Ok(("*".into(), "*".into())));
        assert!(g("a/b/c").is_err());
        assert!(g("").is_err());
    }

    #[test]
    fn writes_are_granted_per_plugin_only_and_by_verb() {
        use kubewasm_runtime::WriteVerb;
        let config = parse(
            r#"
            [defaults]
            grants = ["*"]
            [plugins.ctl]
            writes = ["apps/Deployment", "Event:create,patch"]
            "#,
        )
        .unwrap();
        let ctl = config.policy_for("ctl").writes;
        assert!(ctl.allows(&gvk("apps", "Deployment"), WriteVerb::Delete));
        assert!(ctl.allows(&gvk("", "Event"), WriteVerb::Patch));
        assert!(!ctl.allows(&gvk("", "Event"), WriteVerb::Delete));
        assert!(!ctl.allows(&gvk("", "ConfigMap"), WriteVerb::Create));
        assert!(
            config.policy_for("other").writes.is_empty(),
            "none by default"
        );
        assert!(parse("[plugins.x]\nwrites = [\"Pod:get\"]\n").is_err());
        assert!(parse("[plugins.x]\nwrites = [\"a/b/c\"]\n").is_err());
    }

    #[test]
    fn reconcile_settings_default_to_client_gos_and_are_validated() {
        let config = parse(
            r#"
            [plugins.ctl]
            max-concurrent-reconciles = 3
            write-qps = 0.5
            retry-base-delay-ms = 100
            api-call-timeout-ms = 2500
            "#,
        )
        .unwrap();
        let ctl = config.reconcile_for("ctl");
        assert_eq!(ctl.max_concurrent_reconciles, 3);
        assert_eq!(ctl.client.qps, 0.5);
        assert_eq!(ctl.client.burst, 10);
        assert_eq!(ctl.client.call_timeout, Duration::from_millis(2500));
        assert_eq!(ctl.queue.base_delay, Duration::from_millis(100));
        assert_eq!(ctl.queue.max_delay, Duration::from_secs(1000));
        assert_eq!(ctl.reconciles_per_second, 200.0);
        assert_eq!(ctl.min_requeue_delay, Duration::from_millis(100));
        assert_eq!(ctl.queue.max_keys, 100_000);
        let bounded = parse(
            "[plugins.b]\nreconciles-per-second = 5.0\nreconcile-burst = 2\n\
             min-requeue-delay-ms = 0\nmax-queue-keys = 10\nmax-key-bytes = 64\n\
             max-add-after-seconds = 60\n",
        )
        .unwrap()
        .reconcile_for("b");
        assert_eq!(
            (bounded.reconciles_per_second, bounded.reconcile_burst),
            (5.0, 2)
        );
        assert_eq!(bounded.min_requeue_delay, Duration::ZERO);
        assert_eq!(
            (bounded.queue.max_keys, bounded.queue.max_key_bytes),
            (10, 64)
        );
        assert_eq!(bounded.queue.max_add_after, Duration::from_secs(60));
        let other = config.reconcile_for("other");
        assert_eq!(other.max_concurrent_reconciles, 1);
        assert_eq!(other.queue, QueueOptions::default());
        assert_eq!(other.client, ClientOptions::default());
        for bad in [
            "max-concurrent-reconciles = 0",
            "write-qps = 0.0",
            "write-burst = 0",
            "api-call-timeout-ms = 0",
            "retry-base-delay-ms = 0",
            "retry-qps = -1.0",
            "reconciles-per-second = 0.0",
            "reconcile-burst = 0",
            "max-queue-keys = 0",
            "max-key-bytes = 0",
            "max-add-after-seconds = 0",
            "every-replica = true\nwrites = [\"ConfigMap\"]",
        ] {
            let err = parse(&format!("[plugins.x]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("[plugins.x]"), "{bad}: {err}");
        }
    }

    #[test]
    fn impersonation_names_each_plugins_account_by_its_file_name() {
        assert_eq!(parse("").unwrap().policy_for("mirror").impersonate, None);
        let config = parse("[impersonation]\nnamespace = \"plugins\"\n").unwrap();
        let account = config
            .policy_for("mirror")
            .impersonate
            .expect("on")
            .expect("a valid name");
        assert_eq!(
            account.username(),
            "system:serviceaccount:plugins:plugin-mirror"
        );
        assert!(
            config
                .policy_for("Bad_Name")
                .impersonate
                .expect("on")
                .is_err()
        );
        for bad in [
            "namespace = \"Ops\"",
            "",
            "namespace = \"ops\"\nprefix = \"x\"",
        ] {
            let err = parse(&format!("[impersonation]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("kubewasm.toml"), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_key_is_an_error_naming_the_file_and_key() {
        let err = parse("[defaults]\ncall-deadline = 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("kubewasm.toml"), "{err}");
        assert!(err.contains("call-deadline"), "{err}");
    }

    #[test]
    fn limits_section_overrides_the_defaults() {
        let config =
            parse("[limits]\nmax-indexes = 3\nlog-line-bytes = 100\nfailed-retry-seconds = 9\n")
                .unwrap();
        assert_eq!(config.limits.declarations().max_indexes, 3);
        assert_eq!(config.limits.declarations().max_subscriptions, 64);
        assert_eq!(config.limits.declarations().max_field_path_bytes, 256);
        let indexing = parse("[limits]\nmax-field-path-depth = 4\nmax-index-value-bytes = 9\n")
            .expect("index limits");
        assert_eq!(indexing.limits.declarations().max_field_path_depth, 4);
        assert_eq!(indexing.limits.declarations().max_index_value_bytes, 9);
        assert!(parse("[limits]\nmax-index-values = 0\n").is_err());
        assert_eq!(config.limits.logs().line_bytes, 100);
        assert_eq!(config.limits.restart().failed_retry, Duration::from_secs(9));
        assert!(parse("[limits]\nlog-lines-per-second = 0\n").is_err());
        assert!(parse("[limits]\nmax-plugins = 3\n").is_err());
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(parse("[defaults]\ncall-deadline-ms = 0\n").is_err());
        assert!(parse("[plugins.x]\nmemory-mib = 0\n").is_err());
        assert!(parse("[defaults]\ngrants = [\"a/b/c\"]\n").is_err());
        assert!(parse("[defaults]\nmemory-mib = \"lots\"\n").is_err());
    }

    #[test]
    fn the_connect_timeout_defaults_to_10_s_and_must_be_positive() {
        assert_eq!(
            parse("").unwrap().connection.options().connect_timeout,
            Duration::from_secs(10)
        );
        let config = parse("[connection]\nconnect-timeout-seconds = 3\n").unwrap();
        assert_eq!(
            config.connection.options().connect_timeout,
            Duration::from_secs(3)
        );
        let err = parse("[connection]\nconnect-timeout-seconds = 0\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("connect-timeout-seconds"), "{err}");
    }

    /// The config the deployment's registry example ships is one this host takes, with its
    /// sources trusting their precompiled code.
    #[test]
    fn the_deployments_registry_config_parses_and_trusts_precompiled_code() {
        let manifest = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/kubernetes/plugins-from-registry.yaml"
        ))
        .expect("the manifest");
        let toml: String = manifest
            .split_once("kubewasm.toml: |\n")
            .expect("a kubewasm.toml key")
            .1
            .lines()
            .take_while(|l| l.is_empty() || l.starts_with("    "))
            .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
            .collect();
        let config = parse(&toml).expect("the deployment's config parses");
        let sources = config.sources();
        assert_eq!(sources.len(), 2, "{toml}");
        assert!(sources.iter().all(|s| s.trust_precompiled), "{toml}");
    }

    #[test]
    fn oci_sources_are_checked_and_listed() {
        let config = parse(
            "[registries]\nplain-http = [\"127.0.0.1:5000\"]\n\
             [plugins.a]\nsource = \"oci://127.0.0.1:5000/team/a:1\"\npoll-seconds = 5\n\
             [plugins.b]\nconfig = \"x\"\n\
             [plugins.c]\nsource = \"oci://127.0.0.1:5000/team/c:1\"\ntrust-precompiled = true\n",
        )
        .unwrap();
        let sources = config.sources();
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[0].name, "a");
        assert_eq!(sources[0].poll, Some(Duration::from_secs(5)));
        assert!(
            !sources[0].trust_precompiled,
            "off unless the operator says so"
        );
        assert!(sources[1].trust_precompiled);
        assert_eq!(config.registries.plain_http, ["127.0.0.1:5000"]);
        for bad in [
            "[plugins.a]\nsource = \"https://r.example/a:1\"\n",
            "[plugins.a]\nsource = \"oci://a:1\"\n",
            "[plugins.a]\nsource = \"oci://r.example/a:1\"\npoll-seconds = 0\n",
            "[plugins.a]\npoll-seconds = 5\n",
            "[plugins.a]\ntrust-precompiled = true\n",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("[plugins.a]"), "{err}");
        }
    }
}
