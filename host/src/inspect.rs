//! Looking inside plugin files without a cluster: `kubewasm check` and `kubewasm rbac`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

use crate::app::{default_cache_dir, policy_lookup};
use crate::config::Config;
use crate::rbac::{Access, Need};
use kubewasm_runtime::{
    CheckOptions, Checked, Delivery, EngineOptions, Grants, IndexSource, Namespace, PluginEngine,
    PluginPolicy, WriteGrants,
};

/// Checks plugin files against a config: compiles (through the on-disk compile cache) and
/// calls `init`, with no cluster and no plugin host.
struct Checker {
    engine: PluginEngine,
    config: Arc<Config>,
}

impl Checker {
    fn new(config: &Config) -> anyhow::Result<Self> {
        Ok(Checker {
            engine: PluginEngine::new(EngineOptions {
                cache_dir: Some(default_cache_dir()),
            })?,
            config: Arc::new(config.clone()),
        })
    }

    fn policy(&self, path: &Path) -> PluginPolicy {
        policy_lookup(self.config.clone())(path)
    }

    fn options(&self) -> CheckOptions {
        CheckOptions {
            limits: Default::default(),
            declarations: self.config.limits.declarations(),
            logs: self.config.limits.logs(),
            log_tap: None,
        }
    }

    async fn check(&self, path: &Path, bytes: Vec<u8>) -> anyhow::Result<(Checked, PluginPolicy)> {
        let policy = self.policy(path);
        let checked =
            kubewasm_runtime::check(&self.engine, path, bytes, &policy, &self.options()).await?;
        Ok((checked, policy))
    }

    /// The webhooks a contract 0.3 policy declares, checked against its grants as a load
    /// checks them (`None` for a plugin that serves none).
    async fn webhooks(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        policy: &PluginPolicy,
    ) -> anyhow::Result<Option<kubewasm_runtime::admission::declaration::Declaration>> {
        let compiled = self.engine.compile(path, bytes).await?;
        let declared =
            kubewasm_runtime::declared_webhooks(&compiled, policy, &self.options()).await?;
        Ok(declared.map(|(_, declaration)| declaration))
    }
}

/// Compiles a plugin file, calls its `init` and describes what it asked for, checked against
/// the config's grants: its contract and world, its subscriptions and indexes, and the writes
/// it is granted with the RBAC verbs they need.
pub async fn inspect_file(path: &Path, config: &Config) -> anyhow::Result<String> {
    let key = kubewasm_runtime::PluginKey::of(path)?;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let checker = Checker::new(config)?;
    let (checked, policy) = checker.check(path, bytes.clone()).await?;
    let webhooks = match checked.contract {
        kubewasm_runtime::Contract::V0_2(_) => checker.webhooks(path, bytes, &policy).await?,
        kubewasm_runtime::Contract::V0_1 => None,
    };
    let mut report = describe(path, &key, &checked, &policy.grants, &policy.writes);
    // The report ends with a blank line: the webhooks go before it.
    report.pop();
    if let Some(declaration) = webhooks {
        for kind in [
            kubewasm_runtime::admission::declaration::WebhookKind::Validating,
            kubewasm_runtime::admission::declaration::WebhookKind::Mutating,
        ] {
            let Some(hook) = declaration.webhook(kind) else {
                continue;
            };
            for rule in &hook.rules {
                let groups: Vec<&str> = rule
                    .api_groups
                    .iter()
                    .map(|g| if g.is_empty() { "core" } else { g.as_str() })
                    .collect();
                let _ = writeln!(
                    report,
                    "  webhook: {} {} {} ({:?}), within the grants",
                    kind.as_str(),
                    groups.join(","),
                    rule.resources.join(","),
                    hook.failure_policy
                );
            }
        }
    }
    report.push('\n');
    Ok(report)
}

/// Grants as one line: `none` when empty.
fn describe_list(items: &[String]) -> String {
    if items.is_empty() {
        "none granted".to_owned()
    } else {
        items.join(", ")
    }
}

/// The write grants, one line per RBAC rule they need.
fn describe_writes(out: &mut String, writes: &WriteGrants) {
    if writes.is_empty() {
        let _ = writeln!(out, "  writes:  none granted");
        return;
    }
    for rule in writes.rbac_rules() {
        let groups = rule.api_groups.unwrap_or_default();
        let group = match groups.first().map(String::as_str) {
            None | Some("") => "core".to_owned(),
            Some(g) => g.to_owned(),
        };
        let _ = writeln!(
            out,
            "  writes:  {group} {}: RBAC verbs {}",
            rule.resources.unwrap_or_default().join(", "),
            rule.verbs.join(", ")
        );
    }
}

/// The plugin's name from `init` and its contract version: what `kubewasm push` records.
pub async fn identify(path: &Path, bytes: &[u8]) -> anyhow::Result<(String, &'static str)> {
    // Every kind readable, Secrets included: this only asks the plugin who it is.
    let mut config = Config::default();
    config.defaults.grants = ["*", "Secret"]
        .iter()
        .filter_map(|g| g.parse().ok())
        .collect();
    let (checked, _) = Checker::new(&config)?
        .check(path, bytes.to_vec())
        .await
        .with_context(|| format!("{} is not a plugin kubewasm can load", path.display()))?;
    Ok((checked.info.name, checked.contract.package()))
}

fn describe(
    path: &Path,
    key: &kubewasm_runtime::PluginKey,
    checked: &Checked,
    reads: &Grants,
    writes: &WriteGrants,
) -> String {
    let info = &checked.info;
    let mut out = String::new();
    let _ = writeln!(out, "{}: ok", path.display());
    let _ = writeln!(out, "  contract: {}", checked.contract);
    let _ = writeln!(out, "  plugin:  {key} (its config is [plugins.{key}])");
    let _ = writeln!(out, "  name:    {} (declared by init, a label)", info.name);
    let _ = writeln!(out, "  reads:   {}", describe_list(&reads.describe()));
    let _ = writeln!(out, "  grants:  every subscription granted");
    describe_writes(&mut out, writes);
    for s in &info.subscriptions {
        let g = &s.gvk;
        let mut line = format!(
            "  subscribes: {}{}{}/{}",
            g.group,
            if g.group.is_empty() { "" } else { "/" },
            g.version,
            g.kind
        );
        if let Some(ns) = &s.namespace {
            let _ = write!(line, " namespace={ns}");
        }
        if let Some(sel) = &s.label_selector {
            let _ = write!(line, " labels={sel}");
        }
        if let Some(sel) = &s.field_selector {
            let _ = write!(line, " fields={sel}");
        }
        if let Some(secs) = s.resync_seconds {
            let _ = write!(line, " resync={secs}s");
        }
        if matches!(s.delivery, Delivery::CacheOnly) {
            line.push_str(" (cache only)");
        }
        let _ = writeln!(out, "{line}");
    }
    for i in &info.indexes {
        let source = match &i.source {
            IndexSource::Label(k) => format!("label {k}"),
            IndexSource::Annotation(k) => format!("annotation {k}"),
            IndexSource::Field(p) => format!("field {p}"),
            IndexSource::OwnerUid => "owner uid".to_string(),
        };
        let _ = writeln!(out, "  index:   {} on {} by {source}", i.name, i.gvk.kind);
    }
    out.push('\n');
    out
}

/// What the plugins of a directory need, for RBAC.
#[derive(Debug, Default)]
pub struct DirNeeds {
    /// Every resource some loadable plugin subscribes to.
    pub needs: Vec<Need>,
    /// The cluster-wide rules the write grants of the loadable plugins need (0.2 plugins)
    /// that write as the host.
    pub writes: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    /// The plugins that write as their own service accounts (`[impersonation]`), with the
    /// rules of their write grants.
    pub accounts: Vec<crate::rbac::PluginRbac>,
    /// The files that would not load, with the reason: left out of `needs`, as `run` leaves
    /// them out of the running set.
    pub rejected: Vec<(PathBuf, anyhow::Error)>,
}

/// What every plugin in `dir` needs, each one's `init` called with its configured config string
/// (a plugin may take the kinds it watches from it) and checked against its grants as `run`
/// checks it; `more` are plugins from elsewhere (the config's OCI sources, as `NAME.wasm`), or
/// why they could not be fetched. A file that does not load is set apart in
/// [`DirNeeds::rejected`].
pub async fn needs_of_dir(
    dir: &Path,
    config: &Config,
    more: Vec<(PathBuf, anyhow::Result<Vec<u8>>)>,
) -> anyhow::Result<DirNeeds> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read plugins directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    let checker = Checker::new(config)?;
    let mut out = DirNeeds::default();
    let read = files.into_iter().map(|path| {
        let bytes = std::fs::read(&path)
            .map_err(|err| anyhow::Error::new(err).context("cannot read the file"));
        (path, bytes)
    });
    for (path, bytes) in read.chain(more) {
        let checked = match bytes {
            Ok(bytes) => checker.check(&path, bytes).await,
            Err(err) => Err(err),
        };
        let needs = checked.and_then(|(Checked { info, .. }, policy)| {
            let needs = info
                .subscriptions
                .iter()
                .map(|s| {
                    Ok(Need {
                        group: s.gvk.group.clone(),
                        version: s.gvk.version.clone(),
                        kind: s.gvk.kind.clone(),
                        namespace: s.namespace.as_deref().map(Namespace::new).transpose()?,
                        access: Access::Read,
                    })
                })
                .collect::<anyhow::Result<Vec<Need>>>()?;
            // A writer whose account is invalid was refused by the check.
            let account = policy.impersonate.and_then(Result::ok);
            Ok((needs, policy.writes.rbac_rules(), account))
        });
        match needs {
            Ok((needs, writes, account)) => {
                out.needs.extend(needs);
                match account {
                    Some(account) if !writes.is_empty() => {
                        out.accounts.push(crate::rbac::PluginRbac {
                            account,
                            rules: writes,
                        });
                    }
                    _ => out.writes.extend(writes),
                }
            }
            Err(err) => out.rejected.push((path, err)),
        }
    }
    Ok(out)
}
