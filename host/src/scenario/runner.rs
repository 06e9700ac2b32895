//! Runs a scenario: the embedded dev API server, the plugin host in this process over shared
//! informers on it, the scenario's objects, then each step's action and asserts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{ApiCapabilities, Scope};
use kube::{Api, Client};
use kubewasm_devserver::{DevServer, RequestRecord, ResourceName, Verb};
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::format::{Assert, Expect, PatchAction, PatchType, Scenario, Step, parse_verb};
use super::matcher::{describe, matches, matches_since, uses_changed};
use crate::admission::AdmissionMetrics;
use crate::admission::loopback::LoopbackWebhooks;
use crate::app;
use crate::config::Config;
use kubewasm_runtime::admission::registry::AdmissionRegistry;
use kubewasm_runtime::{HostOptions, LogTap, LoggedLine, PluginHost, PluginId};

/// How long a plugin may take to load before `kubewasm test` says it is still loading
/// (compiling a large component takes tens of seconds the first time; the compile cache makes
/// it quick after).
pub const SLOW_LOAD: Duration = Duration::from_secs(2);
/// How often asserts are polled.
const POLL: Duration = Duration::from_millis(100);
/// How long the plugins get to load and handle their replay of the starting objects.
const LOAD_PATIENCE: Duration = Duration::from_secs(120);
/// Polls in a row with nothing moving (no queued work, no new write, no new call) that count
/// as quiet.
const QUIET_POLLS: u32 = 8;

/// What a run uses besides the scenario.
pub struct RunOptions {
    /// The plugin files, loaded in order.
    pub plugins: Vec<PathBuf>,
    /// Grants, limits and config strings, as `kubewasm run` takes them.
    pub config: Config,
    /// Where compiled plugins are cached.
    pub cache_dir: Option<PathBuf>,
    /// How long a step's asserts may take when the step names no timeout.
    pub default_timeout: Duration,
    /// How long a plugin may load before [`Progress::SlowLoad`] says so ([`SLOW_LOAD`]).
    pub slow_load: Duration,
}

/// How a scenario went.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub name: String,
    pub steps: Vec<StepResult>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| s.failure.is_none())
    }
}

/// What a run reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A plugin has been loading for a while (it is compiling, most likely): said once per
    /// plugin, so a long silence is explained.
    SlowLoad { plugin: &'a Path },
    /// A step ended.
    Step(&'a StepResult),
}

/// How one step went: a failure is the readable diff; steps after a failure are skipped.
#[derive(Debug, Clone)]
pub struct StepResult {
    pub name: String,
    pub elapsed: Duration,
    pub failure: Option<String>,
    pub skipped: bool,
}

/// Runs `scenario` (called `name` in reports); a slow plugin load and each finished step are
/// handed to `report` as they happen. An error is a run that could not happen (server, plugin
/// load); a failed assert is an outcome.
pub async fn run(
    scenario: &Scenario,
    name: &str,
    options: &RunOptions,
    mut report: impl FnMut(Progress<'_>),
) -> anyhow::Result<Outcome> {
    let server = DevServer::start(kubewasm_devserver::Options::default())
        .await
        .context("cannot start the development API server")?;
    let result = run_on(&server, scenario, name, options, &mut report).await;
    server.shutdown().await;
    result
}

async fn run_on(
    server: &DevServer,
    scenario: &Scenario,
    name: &str,
    options: &RunOptions,
    report: &mut impl FnMut(Progress<'_>),
) -> anyhow::Result<Outcome> {
    server.seed(
        scenario
            .objects
            .iter()
            .enumerate()
            .map(|(i, object)| (format!("objects[{i}]"), object.clone())),
    )?;
    let clients = app::Clients::new(
        kube::Config::new(server.url().parse()?),
        &options.config.connection.options(),
    )?;
    let factory = SharedInformerFactory::new(
        clients.read.clone(),
        FactoryOptions {
            reflector: options.config.informers.reflector(),
            ..FactoryOptions::default()
        },
    );
    let config = Arc::new(options.config.clone());
    let tap = LogTap::default();
    let admission = AdmissionRegistry::default();
    let host = PluginHost::new(
        factory.clone(),
        clients.read.clone(),
        HostOptions {
            cache_dir: options.cache_dir.clone(),
            policy: Arc::new(app::policy_lookup(config.clone())),
            // As `run` does: informers outlive a reload, so `converged`'s reload sees a warm
            // cache, as a hot reload in a cluster would.
            informer_grace: config.reload.informer_grace(),
            restart: config.limits.restart(),
            declarations: config.limits.declarations(),
            logs: config.limits.logs(),
            write_client: Some(clients.write.clone()),
            log_tap: Some(tap.clone()),
            admission: admission.clone(),
            ..HostOptions::default()
        },
    )?;
    let mut rig = Rig {
        log_mark: server.requests().len(),
        server,
        client: server.client(),
        host: host.clone(),
        plugins: Vec::new(),
        resources: HashMap::new(),
        default_timeout: options.default_timeout,
        line_mark: tap.next(),
        tap,
    };
    let webhooks_cancel = CancellationToken::new();
    let result = async {
        for path in &options.plugins {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            let load = host.load(path, bytes.clone());
            tokio::pin!(load);
            let loaded = tokio::select! {
                loaded = &mut load => loaded,
                () = tokio::time::sleep(options.slow_load) => {
                    report(Progress::SlowLoad { plugin: path });
                    load.await
                }
            };
            let id = loaded.with_context(|| format!("{} did not load", path.display()))?;
            rig.plugins.push(Loaded {
                path: path.clone(),
                bytes,
                id,
            });
        }
        rig.wait_ready(LOAD_PATIENCE).await?;
        // Policies answer from synced caches now: the API server may call them.
        let declarations = admission.declarations();
        if !declarations.is_empty() {
            let webhooks = LoopbackWebhooks::start(
                admission.clone(),
                AdmissionMetrics::default(),
                server.client(),
                webhooks_cancel.clone(),
            )
            .await
            .context("cannot serve the admission webhooks")?;
            // One policy's configurations refused leaves the others configured: the steps
            // that need it fail, saying what they saw.
            let synced = webhooks.sync_each(&declarations).await;
            for (plugin, error) in &synced.failed {
                tracing::warn!(
                    plugin = %plugin,
                    error = %error,
                    "cannot store this admission policy's webhook configurations: it is not called"
                );
            }
        }
        rig.run_steps(scenario, name, report).await
    }
    .await;
    // In order, before the caller stops the API server: the plugins, then the webhooks the API
    // server calls, then the informers (kept through a reload by the informer grace), so
    // nothing is left watching a server that is gone and logging that it cannot connect.
    host.shutdown(Duration::from_secs(2)).await;
    webhooks_cancel.cancel();
    factory.shutdown().await;
    result
}

struct Loaded {
    path: PathBuf,
    bytes: Vec<u8>,
    id: PluginId,
}

struct Rig<'a> {
    server: &'a DevServer,
    client: Client,
    host: PluginHost,
    plugins: Vec<Loaded>,
    resources: HashMap<(String, String), (ApiResource, ApiCapabilities)>,
    /// Where in the request log the current step's writes start: the end of the previous
    /// step (for the first, the plugins' load and their first reconciles count).
    log_mark: usize,
    /// A step's timeout when it names none.
    default_timeout: Duration,
    /// Every line the plugins logged.
    tap: LogTap,
    /// The number of the first line the current step's `logged` asserts look at, as
    /// `log_mark` for writes.
    line_mark: u64,
}

impl Rig<'_> {
    async fn run_steps(
        &mut self,
        scenario: &Scenario,
        name: &str,
        report: &mut impl FnMut(Progress<'_>),
    ) -> anyhow::Result<Outcome> {
        let mut steps = Vec::new();
        let mut failed = false;
        for (index, step) in scenario.steps.iter().enumerate() {
            let label = step.label(index);
            if failed {
                let result = StepResult {
                    name: label,
                    elapsed: Duration::ZERO,
                    failure: None,
                    skipped: true,
                };
                report(Progress::Step(&result));
                steps.push(result);
                continue;
            }
            let started = Instant::now();
            let failure = self.run_step(step).await;
            failed = failure.is_some();
            let result = StepResult {
                name: label,
                elapsed: started.elapsed(),
                failure,
                skipped: false,
            };
            report(Progress::Step(&result));
            steps.push(result);
        }
        Ok(Outcome {
            name: name.to_owned(),
            steps,
        })
    }

    /// Runs the step's action, then polls its asserts until they hold or its timeout passes;
    /// the failure's text when they did not.
    async fn run_step(&mut self, step: &Step) -> Option<String> {
        let failure = self
            .run_step_from(step, self.log_mark, self.line_mark)
            .await;
        self.log_mark = self.server.requests().len();
        self.line_mark = self.tap.next();
        failure
    }

    async fn run_step_from(
        &mut self,
        step: &Step,
        log_start: usize,
        line_start: u64,
    ) -> Option<String> {
        let timeout = step.timeout.unwrap_or(self.default_timeout);
        let act_deadline = tokio::time::Instant::now() + timeout;
        let before = match self.baseline(&step.assert).await {
            Ok(before) => before,
            Err(err) => {
                return Some(format!(
                    "reading the objects `$changed` compares with: {err:#}"
                ));
            }
        };
        let asserts = Asserts {
            assert: &step.assert,
            before: &before,
            log_start,
            line_start,
        };
        if let Err(err) = self.act(step, act_deadline).await {
            return Some(match err.downcast_ref::<Unexpected>() {
                Some(unexpected) => unexpected.0.clone(),
                None => format!("the step's action failed: {err:#}"),
            });
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let failures = self.check(&asserts).await;
            if failures.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Some(format!(
                    "not true after {}:\n{}",
                    humanize(timeout),
                    failures.join("\n")
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        if step.assert.converged {
            // Asserts that held at once (no writes, an object absent) must still hold once the
            // plugins have done all they were going to.
            if let Err(e) = self.wait_quiet(deadline).await {
                return Some(format!("converged: the plugins never went quiet: {e:#}"));
            }
            let failures = self.check(&asserts).await;
            if !failures.is_empty() {
                return Some(format!(
                    "not true once the plugins settled:\n{}",
                    failures.join("\n")
                ));
            }
            return self.converged(deadline).await.err();
        }
        None
    }

    async fn act(&mut self, step: &Step, deadline: tokio::time::Instant) -> anyhow::Result<()> {
        let writes = step
            .apply
            .iter()
            .map(Write::Apply)
            .chain(step.patch.iter().map(Write::Patch))
            .chain(step.delete.iter().map(Write::Delete));
        for write in writes {
            self.write(write, step.expect.as_ref(), deadline).await?;
        }
        if let Some(wait) = step.wait {
            tokio::time::sleep(wait).await;
        }
        if let Some(fault) = &step.fault {
            let resource: Option<ResourceName> =
                fault.resource.as_deref().map(str::parse).transpose()?;
            if fault.drop_watches {
                match &resource {
                    Some(resource) => self.server.close_watches_of(resource),
                    None => self.server.close_watches(),
                }
            }
            if let (Some(verb), Some(code)) = (&fault.verb, fault.code) {
                let verb = parse_verb(verb).context("unknown verb")?;
                let count = fault.count.unwrap_or(1);
                match &resource {
                    Some(resource) => self.server.fail_next_on(verb, resource, count, code),
                    None => self.server.fail_next(verb, count, code),
                }
            }
        }
        Ok(())
    }

    /// Sends one write and holds its answer to `expect`: without one, a write refused by an
    /// admission webhook is sent again until `deadline` (a policy reading its cache may not
    /// have seen the previous step yet), any other refusal fails at once.
    async fn write(
        &mut self,
        write: Write<'_>,
        expect: Option<&Expect>,
        deadline: tokio::time::Instant,
    ) -> anyhow::Result<()> {
        let what = describe(write.object());
        loop {
            let answer = self.send(write).await?;
            let status = match (answer, expect) {
                (Ok(_), None) => return Ok(()),
                (Ok(done), Some(expect)) => {
                    return Err(Unexpected(format!(
                        "{what}: expected the {} to be denied with a message containing {:?}, \
                         but the API server allowed it ({done})",
                        write.operation(),
                        expect.denied
                    ))
                    .into());
                }
                (Err(status), Some(expect)) => {
                    return check_refusal(&what, write, &status, expect)
                        .map_err(|e| Unexpected(e).into());
                }
                (Err(status), None) => status,
            };
            if status.message.starts_with(WEBHOOK_DENIAL) && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(POLL).await;
                continue;
            }
            let retried = if status.message.starts_with(WEBHOOK_DENIAL) {
                " (denied on every try until the step's timeout)"
            } else {
                ""
            };
            return Err(Unexpected(format!(
                "{what}: the {} was refused by the API server{retried}: {}",
                write.operation(),
                status_line(&status)
            ))
            .into());
        }
    }

    /// Sends `write`: what was done (`created`, `updated`, ...), or the API server's refusal.
    /// An error is a write that could not be sent (no such kind, not an object, no server).
    async fn send(&mut self, write: Write<'_>) -> anyhow::Result<Result<&'static str, Refusal>> {
        let object = write.object();
        let api = self.api_for(object).await?;
        let name = text(object, "/metadata/name");
        let result = match write {
            Write::Apply(object) => {
                let data: DynamicObject = serde_json::from_value(object.clone())
                    .with_context(|| format!("{} is not an object", describe(object)))?;
                match api.create(&PostParams::default(), &data).await {
                    // Exists already (not a webhook's denial with code 409): merged in.
                    Err(kube::Error::Api(status))
                        if status.code == 409 && status.reason == "AlreadyExists" =>
                    {
                        api.patch(name, &PatchParams::default(), &Patch::Merge(object))
                            .await
                            .map(|_| "updated")
                    }
                    other => other.map(|_| "created"),
                }
            }
            Write::Patch(patch) => match patch.patch_type {
                PatchType::Merge => api
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch.patch))
                    .await
                    .map(|_| "patched"),
                PatchType::Json => {
                    let ops: json_patch::Patch = serde_json::from_value(patch.patch.clone())
                        .context("the patch is not an RFC 6902 JSON patch")?;
                    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(ops))
                        .await
                        .map(|_| "patched")
                }
            },
            Write::Delete(_) => api
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| "deleted"),
        };
        match result {
            Ok(done) => Ok(Ok(done)),
            Err(kube::Error::Api(status)) => Ok(Err(status)),
            Err(err) => {
                Err(err).with_context(|| format!("{} {}", write.operation(), describe(object)))
            }
        }
    }

    /// For each `exist` entry that uses `$changed`, the objects it may match as they are now,
    /// before the step's action: what `$changed` compares with.
    async fn baseline(&mut self, assert: &Assert) -> anyhow::Result<Vec<Vec<Value>>> {
        let mut before = Vec::with_capacity(assert.exist.len());
        for expected in &assert.exist {
            before.push(if !uses_changed(expected) {
                Vec::new()
            } else if named(expected) {
                self.get(expected).await?.into_iter().collect()
            } else {
                self.list(expected).await?
            });
        }
        Ok(before)
    }

    /// Every assert that does not hold now, as readable lines.
    async fn check(&mut self, asserts: &Asserts<'_>) -> Vec<String> {
        let Asserts {
            assert,
            before,
            log_start,
            line_start,
        } = *asserts;
        let mut failures = Vec::new();
        for (i, expected) in assert.exist.iter().enumerate() {
            let before = before.get(i).map(Vec::as_slice).unwrap_or_default();
            if let Err(why) = self.check_exists(expected, before).await {
                failures.push(why);
            }
        }
        for counted in &assert.count {
            let bounds = counted.bounds();
            match self.list(&counted.object).await {
                Ok(found) => {
                    let n = found
                        .iter()
                        .filter(|actual| matches(&counted.object, actual).is_empty())
                        .count() as u64;
                    if !bounds.hold(n) {
                        failures.push(format!(
                            "{}: {n} match, expected {bounds} (of {} of the kind)",
                            describe(&counted.object),
                            found.len()
                        ));
                    }
                }
                Err(err) => failures.push(format!("{}: {err:#}", describe(&counted.object))),
            }
        }
        for object in &assert.absent {
            match self.get(object).await {
                Ok(None) => {}
                Ok(Some(_)) => failures.push(format!("{}: exists, and must not", describe(object))),
                Err(err) => failures.push(format!("{}: {err:#}", describe(object))),
            }
        }
        if !assert.events.is_empty() {
            match self.events().await {
                Ok(events) => {
                    for expected in &assert.events {
                        if !events.iter().any(|e| matches(expected, e).is_empty()) {
                            let seen: Vec<String> = events.iter().map(event_line).collect();
                            failures.push(format!(
                                "no Event matches {expected}; Events: {}",
                                if seen.is_empty() {
                                    "none".to_owned()
                                } else {
                                    seen.join("; ")
                                }
                            ));
                        }
                    }
                }
                Err(err) => failures.push(format!("listing Events: {err:#}")),
            }
        }
        if !assert.logged.is_empty() {
            let lines = self.tap.since(line_start);
            for expected in &assert.logged {
                let labels = self.keys_of(&expected.plugin);
                let mine: Vec<&LoggedLine> = lines
                    .iter()
                    .filter(|l| labels.iter().any(|name| **name == *l.plugin))
                    .collect();
                if !mine.iter().any(|l| l.line.contains(&expected.contains)) {
                    failures.push(format!(
                        "plugin {} logged no line containing {:?} in this step{}",
                        expected.plugin,
                        expected.contains,
                        list_lines(&mine)
                    ));
                }
            }
        }
        let log = self.server.requests();
        for bound in &assert.writes {
            let writes: Vec<&RequestRecord> = self
                .keys_of(&bound.plugin)
                .iter()
                .flat_map(|key| plugin_writes(&log[log_start.min(log.len())..], key))
                .collect();
            let n = writes.len() as u64;
            let want = bound.bounds();
            if !want.hold(n) {
                failures.push(format!(
                    "plugin {} made {n} writes in this step, expected {want}{}",
                    bound.plugin,
                    list_writes(&writes)
                ));
            }
        }
        failures
    }

    /// Whether an object `expected` describes exists; `before` holds the objects it may match
    /// as they were when the step began (for `$changed`; empty when it uses none).
    async fn check_exists(&mut self, expected: &Value, before: &[Value]) -> Result<(), String> {
        let what = describe(expected);
        let diff = |actual: &Value| matches_since(expected, actual, previous(before, actual));
        if named(expected) {
            return match self.get(expected).await {
                Ok(None) => Err(format!("{what}: not found")),
                Ok(Some(actual)) => {
                    let diff = diff(&actual);
                    if diff.is_empty() {
                        Ok(())
                    } else {
                        Err(diff_text(&describe(&actual), &diff))
                    }
                }
                Err(err) => Err(format!("{what}: {err:#}")),
            };
        }
        let found = self
            .list(expected)
            .await
            .map_err(|err| format!("{what}: {err:#}"))?;
        if found.iter().any(|actual| diff(actual).is_empty()) {
            return Ok(());
        }
        // The closest candidate's diff says most about what is wrong.
        let closest = found
            .iter()
            .map(|actual| (diff(actual), actual))
            .min_by_key(|(diff, _)| diff.len());
        Err(match closest {
            None => format!("{what}: no object of this kind exists"),
            Some((diff, actual)) => diff_text(
                &format!(
                    "{what}: none of {} matches; closest, {}",
                    found.len(),
                    describe(actual)
                ),
                &diff,
            ),
        })
    }

    /// Reloads every plugin on a settled cluster (a fresh instance replays the cache:
    /// every key is reconciled once more) and fails when that made a write.
    async fn converged(&mut self, deadline: tokio::time::Instant) -> Result<(), String> {
        let before = self.server.requests().len();
        for plugin in &mut self.plugins {
            self.host.unload(plugin.id).await;
            plugin.id = self
                .host
                .load(&plugin.path, plugin.bytes.clone())
                .await
                .map_err(|e| format!("converged: reloading {}: {e}", plugin.path.display()))?;
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.wait_ready(remaining.max(Duration::from_secs(10)))
            .await
            .map_err(|e| format!("converged: {e:#}"))?;
        let deadline = deadline.max(tokio::time::Instant::now() + Duration::from_secs(10));
        self.wait_quiet(deadline).await.map_err(|e| {
            format!("converged: after the reload the plugins never went quiet: {e:#}")
        })?;
        let log = self.server.requests();
        let names = self.plugin_keys();
        let writes: Vec<&RequestRecord> = names
            .iter()
            .flat_map(|name| plugin_writes(&log[before.min(log.len())..], name))
            .collect();
        if writes.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "not converged: one more reconcile of every key (the plugins reloaded on a settled \
                 cluster) made {} writes{}",
                writes.len(),
                list_writes(&writes)
            ))
        }
    }

    /// The keys (file names without `.wasm`, which its lines and writes carry) of the plugin a
    /// scenario names `plugin`: its key, or, for scenarios written before keys, the name its
    /// `init` declares.
    fn keys_of(&self, plugin: &str) -> Vec<String> {
        let mut keys = vec![plugin.to_owned()];
        for status in self.host.plugins().iter().filter(|s| s.name == plugin) {
            keys.push(status.key.to_string());
        }
        keys.sort();
        keys.dedup();
        keys
    }

    fn plugin_keys(&self) -> Vec<String> {
        self.host
            .plugins()
            .into_iter()
            .map(|s| s.key.to_string())
            .collect()
    }

    async fn wait_ready(&self, patience: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + patience;
        while !self.host.ready() {
            if tokio::time::Instant::now() >= deadline {
                let states: Vec<String> = self
                    .host
                    .plugins()
                    .iter()
                    .map(|s| {
                        format!(
                            "{}: {:?}{}",
                            s.name,
                            s.state,
                            s.last_error
                                .as_deref()
                                .map(|e| format!(" ({e})"))
                                .unwrap_or_default()
                        )
                    })
                    .collect();
                anyhow::bail!(
                    "the plugins did not finish loading in {}: {}",
                    humanize(patience),
                    states.join(", ")
                );
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// Quiet: every plugin ready with nothing queued, held or in its inbox, and no new
    /// request, handler call or reconcile over [`QUIET_POLLS`] polls in a row.
    async fn wait_quiet(&self, deadline: tokio::time::Instant) -> anyhow::Result<()> {
        let mut last = None;
        let mut still = 0;
        loop {
            let statuses = self.host.plugins();
            let idle = self.host.ready()
                && statuses.iter().all(|s| {
                    s.queue_depth == 0
                        && s.workqueue
                            .as_ref()
                            .is_none_or(|q| q.depth == 0 && q.processing == 0)
                });
            let progress: u64 = statuses
                .iter()
                .map(|s| s.events_delivered + s.reconciles + s.errors)
                .sum();
            let now = (self.server.requests().len(), progress);
            if idle && last == Some(now) {
                still += 1;
                if still >= QUIET_POLLS {
                    return Ok(());
                }
            } else {
                still = 0;
            }
            last = Some(now);
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "work was still queued or requests still coming at the step's timeout"
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn resource(&mut self, object: &Value) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
        let api_version = text(object, "/apiVersion").to_owned();
        let kind = text(object, "/kind").to_owned();
        let key = (api_version.clone(), kind.clone());
        if let Some(found) = self.resources.get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        let found = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .with_context(|| format!("the API server serves no {api_version} {kind}"))?;
        self.resources.insert(key, found.clone());
        Ok(found)
    }

    /// The object's API: namespaced ones in its namespace (`default` when it names none).
    async fn api_for(&mut self, object: &Value) -> anyhow::Result<Api<DynamicObject>> {
        let (resource, caps) = self.resource(object).await?;
        Ok(match caps.scope {
            Scope::Namespaced => {
                let namespace = object
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                Api::namespaced_with(self.client.clone(), namespace, &resource)
            }
            Scope::Cluster => Api::all_with(self.client.clone(), &resource),
        })
    }

    async fn get(&mut self, object: &Value) -> anyhow::Result<Option<Value>> {
        let api = self.api_for(object).await?;
        let found = api.get_opt(text(object, "/metadata/name")).await?;
        Ok(found.map(serde_json::to_value).transpose()?)
    }

    /// Every object of the kind, in the object's namespace when it names one.
    async fn list(&mut self, object: &Value) -> anyhow::Result<Vec<Value>> {
        let (resource, caps) = self.resource(object).await?;
        let api = match (
            caps.scope,
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str),
        ) {
            (Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            _ => Api::<DynamicObject>::all_with(self.client.clone(), &resource),
        };
        let list = api.list(&ListParams::default()).await?;
        let kind = text(object, "/kind").to_owned();
        let api_version = text(object, "/apiVersion").to_owned();
        list.items
            .into_iter()
            .map(|item| {
                let mut value = serde_json::to_value(item)?;
                // List items may come without their type; asserts can name it.
                value["kind"] = Value::String(kind.clone());
                value["apiVersion"] = Value::String(api_version.clone());
                Ok(value)
            })
            .collect()
    }

    async fn events(&mut self) -> anyhow::Result<Vec<Value>> {
        let probe = serde_json::json!({"apiVersion": "v1", "kind": "Event"});
        self.list(&probe).await
    }
}

/// A step's asserts and what they are measured from.
#[derive(Clone, Copy)]
struct Asserts<'a> {
    assert: &'a Assert,
    /// Per `exist` entry, the objects it may match when the step began.
    before: &'a [Vec<Value>],
    /// Where the step's writes start in the request log.
    log_start: usize,
    /// The step's first logged line.
    line_start: u64,
}

/// Whether an object reference names one object (a string `metadata.name`); without, or with
/// an operator in its place, it stands for any object of its kind.
fn named(object: &Value) -> bool {
    object
        .pointer("/metadata/name")
        .is_some_and(Value::is_string)
}

/// The object among `before` with the namespace and name of `actual`.
fn previous<'a>(before: &'a [Value], actual: &Value) -> Option<&'a Value> {
    let key = |o: &Value| {
        (
            text(o, "/metadata/namespace").to_owned(),
            text(o, "/metadata/name").to_owned(),
        )
    };
    let wanted = key(actual);
    before.iter().find(|o| key(o) == wanted)
}

/// How kube-apiserver (and the dev server) begins the message of a webhook's denial.
const WEBHOOK_DENIAL: &str = "admission webhook \"";

/// The API server's refusal of a write.
type Refusal = Box<kube::core::Status>;

/// A failure whose message says all (the object, what was expected, what happened): shown
/// as it is.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unexpected(String);

/// One write of a step's action.
#[derive(Clone, Copy)]
enum Write<'a> {
    Apply(&'a Value),
    Patch(&'a PatchAction),
    Delete(&'a Value),
}

impl Write<'_> {
    fn object(&self) -> &Value {
        match self {
            Write::Apply(o) | Write::Delete(o) => o,
            Write::Patch(p) => &p.object,
        }
    }

    fn operation(&self) -> &'static str {
        match self {
            Write::Apply(_) => "apply",
            Write::Patch(_) => "patch",
            Write::Delete(_) => "delete",
        }
    }
}

/// Whether `status`, the refusal of `write` of the object `what`, is the one `expect` names.
fn check_refusal(
    what: &str,
    write: Write<'_>,
    status: &kube::core::Status,
    expect: &Expect,
) -> Result<(), String> {
    if !status.message.contains(&expect.denied) {
        return Err(format!(
            "{what}: the {} was refused, but the message does not contain {:?}: {}",
            write.operation(),
            expect.denied,
            status_line(status)
        ));
    }
    if let Some(code) = expect.code
        && status.code != code
    {
        return Err(format!(
            "{what}: the {} was refused, but with status {}, not {code}: {}",
            write.operation(),
            status.code,
            status_line(status)
        ));
    }
    Ok(())
}

/// The API server's status as a failure shows it: `409 Conflict: MESSAGE`, the message (it
/// may come from a plugin) cut to a readable length, its control characters escaped.
fn status_line(status: &kube::core::Status) -> String {
    const SHOWN: usize = 2000;
    let mut message = String::new();
    for c in status.message.chars().take(SHOWN) {
        if c.is_control() {
            message.extend(c.escape_default());
        } else {
            message.push(c);
        }
    }
    if status.message.chars().nth(SHOWN).is_some() {
        message.push_str("...");
    }
    if status.reason.is_empty() {
        format!("{}: {message}", status.code)
    } else {
        format!("{} {}: {message}", status.code, status.reason)
    }
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The writes (create, update, patch, delete) in `log` sent for the plugin whose key is `key`.
fn plugin_writes<'a>(log: &'a [RequestRecord], key: &str) -> Vec<&'a RequestRecord> {
    let agent = kubewasm_runtime::client::plugin_user_agent(key);
    let agent = agent.to_str().unwrap_or_default();
    log.iter()
        .filter(|r| {
            matches!(
                r.verb,
                Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
            )
        })
        .filter(|r| r.user_agent == agent)
        .collect()
}

fn list_writes(writes: &[&RequestRecord]) -> String {
    let mut out = String::new();
    for r in writes.iter().take(20) {
        let target = match (&r.namespace, &r.name) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            (None, Some(name)) => name.clone(),
            (Some(ns), None) => format!("{ns}/(new)"),
            (None, None) => "(new)".to_owned(),
        };
        let verb = format!("{:?}", r.verb).to_uppercase();
        out.push_str(&format!("\n    {verb} {} {target}", r.resource));
    }
    if writes.len() > 20 {
        out.push_str(&format!("\n    ... and {} more", writes.len() - 20));
    }
    out
}

/// The newest lines of a failed `logged` assert, for its message.
fn list_lines(lines: &[&LoggedLine]) -> String {
    const SHOWN: usize = 20;
    if lines.is_empty() {
        return "; it logged nothing in this step".to_owned();
    }
    let mut out = String::from("; its lines in this step:");
    if lines.len() > SHOWN {
        out.push_str(&format!("\n    ... {} earlier", lines.len() - SHOWN));
    }
    for line in &lines[lines.len().saturating_sub(SHOWN)..] {
        out.push_str(&format!("\n    {}", line.line));
    }
    out
}

fn diff_text(what: &str, diff: &[super::matcher::Mismatch]) -> String {
    let mut out = format!("{what}: differs");
    for mismatch in diff {
        out.push_str(&format!("\n    {mismatch}"));
    }
    out
}

fn event_line(event: &Value) -> String {
    format!(
        "{} {} on {} {}",
        text(event, "/type"),
        text(event, "/reason"),
        text(event, "/involvedObject/kind"),
        text(event, "/involvedObject/name")
    )
}

fn humanize(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn status(code: u16, reason: &str, message: &str) -> kube::core::Status {
        kube::core::Status {
            code,
            reason: reason.into(),
            message: message.into(),
            ..kube::core::Status::default()
        }
    }

    const DENIAL: &str = "admission webhook \"unique-ingress-host.kubewasm.dev\" denied the request: host \"a\" is taken";

    #[test]
    fn a_refusal_matches_when_its_message_contains_the_text_and_its_code_is_the_one_named() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let write = Write::Apply(&object);
        let denied = status(409, "Conflict", DENIAL);
        let expect = |text: &str, code| Expect {
            denied: text.into(),
            code,
        };
        assert_eq!(
            check_refusal("v1 ConfigMap a", write, &denied, &expect("is taken", None)),
            Ok(())
        );
        assert_eq!(
            check_refusal(
                "v1 ConfigMap a",
                write,
                &denied,
                &expect("is taken", Some(409))
            ),
            Ok(())
        );
        let wrong_text =
            check_refusal("v1 ConfigMap a", write, &denied, &expect("is free", None)).unwrap_err();
        assert_eq!(
            wrong_text,
            format!(
                "v1 ConfigMap a: the apply was refused, but the message does not contain \
                 \"is free\": 409 Conflict: {DENIAL}"
            )
        );
        let wrong_code = check_refusal(
            "v1 ConfigMap a",
            write,
            &denied,
            &expect("is taken", Some(403)),
        )
        .unwrap_err();
        assert!(
            wrong_code
                .starts_with("v1 ConfigMap a: the apply was refused, but with status 409, not 403"),
            "{wrong_code}"
        );
    }

    #[test]
    fn a_hostile_message_is_cut_and_its_control_characters_escaped() {
        let line = status_line(&status(403, "", "no\n\x1b[31mred"));
        assert_eq!(line, "403: no\\n\\u{1b}[31mred");
        let long = status_line(&status(500, "InternalError", &"x".repeat(10_000)));
        assert!(
            long.len() < 2100 && long.ends_with("x..."),
            "{}",
            long.len()
        );
    }
}
