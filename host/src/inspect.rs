//! Looking inside plugin files without a cluster: `kubewasm check` and `kubewasm rbac`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use kubewasm_informer::{FactoryOptions, SharedInformerFactory};

use crate::app::{default_cache_dir, policy_lookup};
use crate::config::Config;
use crate::plugin::{Delivery, HostOptions, IndexSource, PluginHost, PluginInfo};
use crate::rbac::{Access, Need};

/// A plugin host that never talks to an API server: `check` only compiles and calls `init`.
fn offline_host(config: Config) -> anyhow::Result<PluginHost> {
    // The client is never used: nothing is registered, so no informer starts.
    let nowhere = kube::Config::new("http://127.0.0.1:9".parse()?);
    let client = kube::Client::try_from(nowhere)?;
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    Ok(PluginHost::new(
        factory,
        client,
        HostOptions {
            cache_dir: Some(default_cache_dir()),
            policy: Arc::new(policy_lookup(Arc::new(config))),
            ..HostOptions::default()
        },
    )?)
}

/// Compiles a plugin file, calls its `init` and describes what it asked for, checked against
/// the config's grants.
pub async fn inspect_file(path: &Path, config: &Config) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let host = offline_host(config.clone())?;
    let info = host.check(path, &bytes).await?;
    Ok(describe(path, &info))
}

/// The plugin's name from `init` and its contract version: what `kubewasm push` records.
pub async fn identify(path: &Path, bytes: &[u8]) -> anyhow::Result<(String, &'static str)> {
    // Every kind readable, Secrets included: this only asks the plugin who it is.
    let mut config = Config::default();
    config.defaults.grants = ["*", "Secret"]
        .iter()
        .filter_map(|g| g.parse().ok())
        .collect();
    let host = offline_host(config)?;
    let (info, contract) = host
        .check_contract(path, bytes)
        .await
        .with_context(|| format!("{} is not a plugin kubewasm can load", path.display()))?;
    Ok((info.name, contract))
}

fn describe(path: &Path, info: &PluginInfo) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}: ok", path.display());
    let _ = writeln!(out, "  world:   kubewasm:controller/controller@0.1.0");
    let _ = writeln!(out, "  name:    {}", info.name);
    let _ = writeln!(out, "  grants:  every subscription granted");
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
    /// The cluster-wide rules the write grants of the loadable plugins need (0.2 plugins).
    pub writes: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
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
    let host = offline_host(config.clone())?;
    let mut out = DirNeeds::default();
    let read = files.into_iter().map(|path| {
        let bytes = std::fs::read(&path)
            .map_err(|err| anyhow::Error::new(err).context("cannot read the file"));
        (path, bytes)
    });
    for (path, bytes) in read.chain(more) {
        let info = match bytes {
            Ok(bytes) => host.check(&path, &bytes).await.map_err(anyhow::Error::from),
            Err(err) => Err(err),
        };
        match info {
            Ok(info) => {
                out.writes.extend(
                    policy_lookup(Arc::new(config.clone()))(&path)
                        .writes
                        .rbac_rules(),
                );
                out.needs.extend(info.subscriptions.iter().map(|s| Need {
                    group: s.gvk.group.clone(),
                    version: s.gvk.version.clone(),
                    kind: s.gvk.kind.clone(),
                    namespace: s.namespace.clone(),
                    access: Access::Read,
                }));
            }
            Err(err) => out.rejected.push((path, err)),
        }
    }
    Ok(out)
}
