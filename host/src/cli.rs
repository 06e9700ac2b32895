//! The command line: what each subcommand takes, with environment-variable fallbacks.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::logging::LogFormat;

/// Run Kubernetes informers once and plug in controllers written as WebAssembly components.
///
/// Every `*.wasm` component in the plugins directory is loaded and registered as a listener on
/// shared, indexed informers; dropping, replacing or deleting a file loads, hot-reloads or unloads
/// its plugin without restarting the informers.
#[derive(Debug, Parser)]
#[command(name = "kubewasm", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,

    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "KUBEWASM_LOG_FORMAT"
    )]
    pub log_format: LogFormat,

    /// Log filter, in `RUST_LOG` syntax (e.g. `info,kubewasm=debug`).
    #[arg(long, global = true, default_value = "info", env = "RUST_LOG")]
    pub log: String,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the plugins against a cluster (the current kubeconfig context, or in-cluster config).
    Run(RunArgs),
    /// Start the embedded development API server, seed it, and run the plugins against it.
    ///
    /// No cluster needed. The server is for development and tests only: it keeps everything in
    /// memory and has no authentication. Without `--webhook-cert` and `--webhook-key`, admission
    /// policies are served on loopback with a certificate made at start, and their webhook
    /// configurations kept in the server.
    Dev(DevArgs),
    /// Validate plugin files without a cluster: world, subscriptions, indexes and grants.
    Check(CheckArgs),
    /// Compile plugin files into the compile cache ahead of a start (an image build, an init
    /// container), so `run` loads them from the cache instead of compiling them.
    ///
    /// A file already in the cache is left as it is. The cache entries are only used by the
    /// same kubewasm build (they are keyed by the engine's settings and version). With
    /// `--out DIR`, writes precompiled artifacts (`NAME.cwasm`, versioned by engine and target)
    /// to ship with the component (`kubewasm push --precompiled`) instead.
    Compile(CompileArgs),
    /// Print what `kubectl apply -f -` needs so the plugins can run: the namespace, the service
    /// account, and the (Cluster)Roles their subscriptions need with their bindings.
    ///
    /// Each plugin's `init` is called with its config string from `--config`, so kinds a plugin
    /// takes from it are included. A file that would not load is reported and skipped.
    Rbac(RbacArgs),
    /// Print the webhook configurations (and the Service, with `--service`) that send the API
    /// server's admission reviews to the plugins of contract 0.3 in a directory, ready for
    /// `kubectl apply -f -`.
    ///
    /// Each plugin's `init` and `declare` are called with its config string from `--config`.
    /// A file that would not load is reported and skipped.
    Webhooks(WebhooksArgs),
    /// Publish a plugin file as a Wasm OCI artifact (annotated with the plugin's name from
    /// `init` and its contract version) and print its digest.
    Push(PushArgs),
    /// Fetch a plugin published as a Wasm OCI artifact, checked against its digests.
    Pull(PullArgs),
    /// Write the WIT files of a plugin contract (what a guest's bindings are generated from),
    /// exactly as this binary implements it.
    Wit(WitArgs),
    /// Build the plugin project in a directory (Rust, Python, JavaScript, Go or C, recognised by its
    /// files) into `build/NAME.wasm`, check it as `check` does, and print its path.
    Build(BuildArgs),
    /// Run plugins through scenario files on the embedded API server: starting objects, steps
    /// (apply, patch, delete, wait, injected faults; `expect: {denied: TEXT}` for a write that
    /// must be refused) and asserts after each: `exist` (objects with given fields, a value
    /// there or an operator: $any, $absent, $changed, $matches, $count), `absent`, `count` (how
    /// many objects match), `events`, `writes` per plugin, `logged` lines, `converged`.
    /// Admission policies among the plugins are served on loopback and configured in that
    /// server. Prints the results only (the log goes to a file; `-v` shows it); exit code 1
    /// when a step fails, with a diff naming the object.
    Test(TestArgs),
    /// Write a new plugin project (source, build file, the contract's WIT, config, a scenario
    /// that passes and a README) into `NAME/`.
    New(NewArgs),
}

/// Options shared by `run` and `dev`.
#[derive(Debug, Args)]
pub struct HostArgs {
    /// Directory of `*.wasm` plugins, watched for changes.
    #[arg(long, env = "KUBEWASM_PLUGINS")]
    pub plugins: PathBuf,

    /// Config file: per-plugin grants, limits and config strings (TOML) [default: `dev` reads
    /// ./kubewasm.toml when there is one; `run` none].
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,

    /// Where compiled plugins are cached, keyed by content hash.
    #[arg(long, env = "KUBEWASM_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Address of the HTTP endpoint serving /metrics, /healthz, /readyz, /plugins and the
    /// status page (/).
    #[arg(long, default_value = "127.0.0.1:9090", env = "KUBEWASM_METRICS_ADDR")]
    pub metrics_addr: SocketAddr,

    #[command(flatten)]
    pub webhook: WebhookArgs,

    /// How long plugins get to finish the event in hand on shutdown, in seconds.
    #[arg(long, default_value_t = 5, env = "KUBEWASM_SHUTDOWN_GRACE")]
    pub shutdown_grace: u64,

    /// Docker config file with registry credentials, for plugins configured by `source =
    /// "oci://..."` (a mounted `kubernetes.io/dockerconfigjson` Secret's file or directory works)
    /// [default: the config file's `[registries] config`, else $DOCKER_CONFIG/config.json, else
    /// ~/.docker/config.json].
    #[arg(long, env = "KUBEWASM_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,

    /// Leader election: `run`'s flags ([`RunArgs::leader`]); `dev` takes none (one replica
    /// against the API server inside it), so it runs with these defaults: only the config
    /// file's `[leader-election]` can turn election on there.
    #[arg(skip)]
    pub leader: LeaderElectArgs,
}

/// Leader election among replicas: each overrides the config file's `[leader-election]` key.
#[derive(Debug, Clone, Default, Args)]
pub struct LeaderElectArgs {
    /// Contend for a coordination.k8s.io/v1 Lease so that one replica at a time leads (only the
    /// leader reconciles and writes); without it, this replica always leads.
    #[arg(long, env = "KUBEWASM_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the Lease [default: kubewasm].
    #[arg(long, env = "KUBEWASM_LEADER_ELECT_LEASE_NAME")]
    pub leader_elect_lease_name: Option<String>,

    /// Namespace of the Lease [default: the pod's namespace, else the kubeconfig's].
    #[arg(long, env = "KUBEWASM_LEADER_ELECT_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,

    /// How long a standby waits for an unrenewed Lease before taking it (`15s`, `1500ms`, `15`)
    /// [default: 15s].
    #[arg(long, value_parser = parse_duration, env = "KUBEWASM_LEADER_ELECT_LEASE_DURATION")]
    pub leader_elect_lease_duration: Option<Duration>,

    /// How long the leader tries to renew before it stops leading [default: 10s].
    #[arg(long, value_parser = parse_duration, env = "KUBEWASM_LEADER_ELECT_RENEW_DEADLINE")]
    pub leader_elect_renew_deadline: Option<Duration>,

    /// How often the leader renews and standbys try to acquire [default: 2s].
    #[arg(long, value_parser = parse_duration, env = "KUBEWASM_LEADER_ELECT_RETRY_PERIOD")]
    pub leader_elect_retry_period: Option<Duration>,

    /// Split the work into this many shards by a stable hash of namespace (of name for
    /// cluster-scoped objects), each led by one replica through its own Lease; above 1 turns
    /// leader election on [default: 1, not sharded].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), env = "KUBEWASM_SHARDS")]
    pub shards: Option<u16>,
}

/// A duration as `15s`, `500ms` or plain seconds (`15`, `0.5`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("`{text}` is not a positive duration such as 15s or 500ms"))
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub host: HostArgs,

    /// Kubeconfig file to use (default: `KUBECONFIG`, then `~/.kube/config`, then the
    /// in-cluster config).
    #[arg(long, env = "KUBEWASM_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use (default: the current context).
    #[arg(long, env = "KUBEWASM_CONTEXT")]
    pub context: Option<String>,

    #[command(flatten)]
    pub leader: LeaderElectArgs,
}

#[derive(Debug, Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub host: HostArgs,

    /// Port for the development API server (0: any free port).
    #[arg(long, default_value_t = 0, env = "KUBEWASM_DEV_PORT")]
    pub port: u16,

    /// Directory of YAML manifests (multi-document) to create at start.
    #[arg(long, env = "KUBEWASM_MANIFESTS")]
    pub manifests: Option<PathBuf>,

    /// Where to write a kubeconfig for kubectl and other clients.
    #[arg(
        long,
        default_value = "kubewasm-dev.kubeconfig",
        env = "KUBEWASM_KUBECONFIG_OUT"
    )]
    pub kubeconfig_out: PathBuf,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Plugin files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,

    /// Config file whose grants the plugins are checked against [default: ./kubewasm.toml when
    /// there is one].
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,
}

/// The admission webhook endpoint of `run` and `dev`.
#[derive(Debug, Clone, Default, Args)]
pub struct WebhookArgs {
    /// Address of the HTTPS endpoint serving the admission webhooks of plugins of contract
    /// 0.3 (`/validate/PLUGIN`, `/mutate/PLUGIN`, PLUGIN the file's name without `.wasm`);
    /// needs `--webhook-cert` and `--webhook-key`. Not set: `run` serves no webhook, `dev`
    /// serves them on loopback with a certificate made for the run and configures its embedded
    /// API server to call them.
    #[arg(long = "webhook-addr", env = "KUBEWASM_WEBHOOK_ADDR", requires_all = ["cert", "key"])]
    pub addr: Option<SocketAddr>,

    /// PEM certificate (chain) of the webhook endpoint; re-read when it changes.
    #[arg(long = "webhook-cert", env = "KUBEWASM_WEBHOOK_CERT")]
    pub cert: Option<PathBuf>,

    /// PEM private key of the webhook endpoint; re-read when it changes.
    #[arg(long = "webhook-key", env = "KUBEWASM_WEBHOOK_KEY")]
    pub key: Option<PathBuf>,
}

/// Options of `webhooks`.
#[derive(Debug, Args)]
pub struct WebhooksArgs {
    /// Directory of `*.wasm` plugins.
    #[arg(long, env = "KUBEWASM_PLUGINS")]
    pub plugins: PathBuf,

    /// Config file, as given to `run`: config strings and grants.
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,

    /// The Service in front of kubewasm's webhook endpoint, as NAMESPACE/NAME: it is printed
    /// too (port 443 to `--target-port`, selecting `app.kubernetes.io/name: kubewasm`).
    #[arg(long, conflicts_with = "url")]
    pub service: Option<String>,

    /// The webhook endpoint's base URL instead of a Service, e.g. `https://127.0.0.1:8443`.
    #[arg(long)]
    pub url: Option<String>,

    /// The port of `--webhook-addr` the Service sends to.
    #[arg(long, default_value_t = 8443)]
    pub target_port: u16,

    /// PEM file of the CA the API server verifies the endpoint's certificate with (the
    /// `caBundle`).
    #[arg(long, conflicts_with = "inject_ca_from")]
    pub ca_bundle: Option<PathBuf>,

    /// Have cert-manager's CA injector fill the `caBundle` in from this Certificate
    /// (NAMESPACE/NAME): annotates the configurations with `cert-manager.io/inject-ca-from`.
    #[arg(long)]
    pub inject_ca_from: Option<String>,

    /// Name of the two webhook configurations.
    #[arg(long, default_value = "kubewasm")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// Plugin files, or directories of `*.wasm` plugins.
    #[arg(required = true)]
    pub plugins: Vec<PathBuf>,

    /// The compile cache to fill, as given to `run` (default: `$XDG_CACHE_HOME/kubewasm`, else
    /// `~/.cache/kubewasm`).
    #[arg(long, env = "KUBEWASM_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Exit 0 even when a file does not compile (it is still reported): for an init container,
    /// which must not keep the pod from starting over a file the host would refuse anyway.
    #[arg(long)]
    pub keep_going: bool,

    /// Write each plugin's precompiled artifact to this directory as `NAME.cwasm` instead of
    /// filling the compile cache: for `kubewasm push --precompiled`. It loads only into a host
    /// with this binary's engine (wasmtime version, settings, target): run the `compile` of the
    /// binary (or image) that will load it.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Precompiled artifacts (`NAME.cwasm`, from `compile --out` of this same binary or image)
    /// to install into the cache instead of compiling: `NAME.wasm` loads from `DIR/NAME.cwasm`
    /// once its header names this engine and that file's exact bytes. A file without an
    /// artifact, or whose artifact is refused (the reason is printed), is compiled. What is in
    /// DIR runs as native code in the host: give it only a directory the operator controls.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub precompiled: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RbacArgs {
    /// Directory of `*.wasm` plugins.
    #[arg(long, env = "KUBEWASM_PLUGINS")]
    pub plugins: PathBuf,

    /// Config file, as given to `run`: config strings and grants.
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,

    /// Namespace of the service account kubewasm runs as (created unless it is `default` or a
    /// `kube-*` namespace).
    #[arg(long, default_value = "kubewasm", env = "KUBEWASM_NAMESPACE")]
    pub namespace: String,

    /// Service account kubewasm runs as.
    #[arg(long, default_value = "kubewasm", env = "KUBEWASM_SERVICE_ACCOUNT")]
    pub service_account: String,

    /// Name of the ClusterRole, the Roles and their bindings.
    #[arg(long, default_value = "kubewasm", env = "KUBEWASM_RBAC_NAME")]
    pub name: String,

    /// Include what `run --leader-elect` needs: get, create and update on Leases (also when the
    /// config file's `[leader-election]` is enabled).
    #[arg(long, env = "KUBEWASM_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Namespace of the Lease [default: the config file's, else `--namespace`].
    #[arg(long, env = "KUBEWASM_LEADER_ELECT_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,

    /// Docker config file with the credentials of the registries the config's `source =
    /// "oci://..."` plugins are fetched from, to include them [default: as for `run`].
    #[arg(long, env = "KUBEWASM_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,

    /// Include what `run --shards N` needs (N above 1: also patch, list and delete on Leases,
    /// for the membership heartbeat) [default: the config file's `[leader-election] shards`].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024), env = "KUBEWASM_SHARDS")]
    pub shards: Option<u16>,
}

/// How `push` and `pull` reach a registry.
#[derive(Debug, Args)]
pub struct RegistryArgs {
    /// Docker config file with registry credentials [default: $DOCKER_CONFIG/config.json, else
    /// ~/.docker/config.json].
    #[arg(long, env = "KUBEWASM_REGISTRY_CONFIG")]
    pub registry_config: Option<PathBuf>,

    /// Speak plain HTTP to the registry instead of HTTPS (a registry on loopback).
    #[arg(long)]
    pub plain_http: bool,
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The plugin file (a component).
    pub file: PathBuf,

    /// Where to publish it: `[oci://]host/repo:tag`.
    pub reference: String,

    /// URL of the plugin's source, recorded as `org.opencontainers.image.source`.
    #[arg(long)]
    pub source: Option<String>,

    /// A precompiled artifact of the file (`kubewasm compile --out`) to ship beside it as a
    /// layer of its own; refused unless it was compiled from this very file.
    #[arg(long, value_name = "CWASM")]
    pub precompiled: Option<PathBuf>,

    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// What to fetch: `[oci://]host/repo:tag` or `...@sha256:<hex>`.
    pub reference: String,

    /// Where to write the component [default: `NAME.wasm` in the current directory, NAME the
    /// plugin's name recorded in the artifact, else the repository's last segment].
    #[arg(short, long)]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The plugin's name (also its directory and file name).
    pub name: String,

    /// The language to write it in.
    #[arg(long, value_enum)]
    pub lang: crate::scaffold::Lang,

    /// What it does.
    #[arg(long, value_enum, default_value = "controller")]
    pub kind: crate::scaffold::Kind,

    /// Directory to write into [default: NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Plugin files to run.
    #[arg(required = true)]
    pub plugins: Vec<PathBuf>,

    /// Scenario file (YAML); repeat for several, each on a fresh API server.
    #[arg(long, required = true)]
    pub scenario: Vec<PathBuf>,

    /// Config file, as given to `run`: grants, limits and config strings [default:
    /// ./kubewasm.toml when there is one].
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,

    /// Also write the results as JUnit XML to this file.
    #[arg(long)]
    pub junit: Option<PathBuf>,

    /// How long a step's asserts may take to hold when the step names no `timeout` (`30s`,
    /// `500ms`, `2m`): a broken plugin fails that much sooner.
    #[arg(long, default_value = "30s", value_parser = crate::scenario::parse_duration)]
    pub timeout: std::time::Duration,
    /// Also log to stderr, as other commands do (at `--log`'s level). Without it only the
    /// results are printed and the log goes to `--log-file`.
    #[arg(short, long)]
    pub verbose: bool,

    /// Where the log goes without `--verbose`, replaced on each run [default:
    /// $XDG_STATE_HOME/kubewasm/test.log, else ~/.local/state/kubewasm/test.log].
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

impl TestArgs {
    /// The file the log goes to, or `None` for stderr (`--verbose`).
    pub fn log_file(&self) -> Option<PathBuf> {
        if self.verbose {
            return None;
        }
        Some(self.log_file.clone().unwrap_or_else(default_test_log))
    }
}

/// `kubewasm test`'s log file when `--log-file` names none: the XDG state directory, where
/// logs belong.
fn default_test_log() -> PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir)
        .join("kubewasm")
        .join("test.log")
}

impl Command {
    /// Where the command's log goes: a file (`kubewasm test` without `--verbose`, whose output
    /// is its results), else `None`, stderr.
    pub fn log_file(&self) -> Option<PathBuf> {
        match self {
            Command::Test(args) => args.log_file(),
            _ => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The project directory [default: the current directory].
    pub dir: Option<PathBuf>,

    /// Config file whose grants the built plugin is checked against [default: the project's
    /// kubewasm.toml when there is one].
    #[arg(long, env = "KUBEWASM_CONFIG")]
    pub config: Option<PathBuf>,

    /// Build the component to ship: Rust with cargo's `release` profile (the template's:
    /// size-optimised, LTO). Without it Rust builds with the `dev` profile, for the edit loop
    /// (an edit recompiles the plugin's crate only). Other languages build the same either way.
    #[arg(long)]
    pub release: bool,
}

#[derive(Debug, Args)]
pub struct WitArgs {
    /// Contract version: 0.1, 0.2, 0.2.1, 0.2.2 or 0.3 (`--list` shows them) [default: 0.2].
    #[arg(long)]
    pub contract: Option<String>,

    /// Directory to write into (a package's dependencies go to its `deps/`) [default: wit].
    #[arg(short, long)]
    pub output: Option<PathBuf>,

    /// List the contract versions this binary carries instead.
    #[arg(long, conflicts_with_all = ["contract", "output"])]
    pub list: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_a_kubeconfig_beside_the_context() {
        let cli = Cli::try_parse_from([
            "kubewasm",
            "run",
            "--plugins",
            "p",
            "--kubeconfig",
            "/tmp/k.yaml",
            "--context",
            "staging",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.kubeconfig, Some(PathBuf::from("/tmp/k.yaml")));
        assert_eq!(run.context.as_deref(), Some("staging"));
    }

    #[test]
    fn run_takes_the_leader_election_flags() {
        let cli = Cli::try_parse_from([
            "kubewasm",
            "run",
            "--plugins",
            "p",
            "--leader-elect",
            "--leader-elect-namespace",
            "ops",
            "--leader-elect-lease-duration",
            "20s",
            "--leader-elect-retry-period",
            "500ms",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        let leader = run.leader;
        assert!(leader.leader_elect);
        assert_eq!(leader.leader_elect_namespace.as_deref(), Some("ops"));
        assert_eq!(
            leader.leader_elect_lease_duration,
            Some(Duration::from_secs(20))
        );
        assert_eq!(leader.leader_elect_renew_deadline, None);
        assert_eq!(
            leader.leader_elect_retry_period,
            Some(Duration::from_millis(500))
        );
        for bad in ["0", "-1s", "soon", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn dev_parses_plugins_and_manifests() {
        let cli = Cli::try_parse_from([
            "kubewasm",
            "dev",
            "--plugins",
            "p",
            "--manifests",
            "m",
            "--port",
            "8080",
        ])
        .unwrap();
        let Command::Dev(dev) = cli.command else {
            panic!("not dev")
        };
        assert_eq!(dev.port, 8080);
        assert_eq!(dev.host.plugins, PathBuf::from("p"));
    }

    #[test]
    fn dev_refuses_the_leader_election_flags_it_would_not_honour() {
        for flag in [
            "--leader-elect",
            "--shards=2",
            "--leader-elect-namespace=ops",
        ] {
            let parsed = Cli::try_parse_from(["kubewasm", "dev", "--plugins", "p", flag]);
            assert!(parsed.is_err(), "dev took {flag}");
        }
    }
}
