//! `kubewasm webhooks`: the webhook configurations (and Service) that send the API server's
//! admission reviews to the plugins of a directory, ready for `kubectl apply -f -`.

use std::sync::Arc;

use anyhow::Context as _;

use crate::admission::configuration::{self, Endpoint, Trust};
use crate::app;
use crate::cli::WebhooksArgs;
use kubewasm_runtime::{CheckOptions, EngineOptions, PluginEngine};

/// Prints the manifests as one YAML `List`; plugins that would not load are named on stderr and
/// skipped, plugins that serve no webhook are left out.
pub async fn run(args: WebhooksArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.config.as_deref())?;
    app::check_plugins_dir(&args.plugins)?;
    let endpoint = match (&args.service, &args.url) {
        (Some(service), None) => {
            let (namespace, name) = service
                .split_once('/')
                .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
                .context("--service takes NAMESPACE/NAME")?;
            Endpoint::Service {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                target_port: args.target_port,
            }
        }
        (None, Some(url)) => {
            anyhow::ensure!(url.starts_with("https://"), "--url must be an https:// URL");
            Endpoint::Url(url.clone())
        }
        _ => anyhow::bail!("give one of --service NAMESPACE/NAME and --url URL"),
    };
    let ca = args
        .ca_bundle
        .as_deref()
        .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
        .transpose()?;
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(app::default_cache_dir()),
    })?;
    let policy_of = app::policy_lookup(Arc::new(config.clone()));
    let options = CheckOptions {
        limits: Default::default(),
        declarations: config.limits.declarations(),
        logs: config.limits.logs(),
        log_tap: None,
    };
    let mut files: Vec<_> = std::fs::read_dir(&args.plugins)
        .with_context(|| format!("cannot read plugins directory {}", args.plugins.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    let mut plugins = Vec::new();
    for path in files {
        let declared = async {
            let bytes = std::fs::read(&path).context("cannot read the file")?;
            let compiled = engine.compile(&path, bytes).await?;
            Ok::<_, anyhow::Error>(
                kubewasm_runtime::declared_webhooks(&compiled, &policy_of(&path), &options).await?,
            )
        };
        match declared.await {
            Ok(Some(found)) => plugins.push(found),
            Ok(None) => {}
            Err(err) => eprintln!(
                "kubewasm: {}: skipped, it would not load: {err:#}",
                path.display()
            ),
        }
    }
    let trust = match (&ca, &args.inject_ca_from) {
        (Some(ca), _) => Trust::Bundle(ca),
        (None, Some(certificate)) => Trust::InjectFrom(certificate),
        (None, None) => Trust::None,
    };
    let list = serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": configuration::manifests(&args.name, &plugins, &endpoint, trust),
    });
    print!("{}", crate::manifest_yaml::to_string(&list));
    Ok(())
}
