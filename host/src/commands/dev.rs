//! `kubewasm dev`: the host against the embedded development API server, no cluster needed.

use std::path::Path;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::app::{self, UsageError};
use crate::cli::DevArgs;

/// Starts the development API server, writes its kubeconfig, and runs the host against it
/// until SIGINT or SIGTERM.
pub async fn run(args: DevArgs) -> anyhow::Result<()> {
    let (config, config_file) =
        app::load_project_config(args.host.config.as_deref(), Path::new("."))?;
    if let Some(file) = &config_file {
        tracing::info!(config = %file.display(), "config loaded");
    }
    app::check_plugins_dir(&args.host.plugins)?;
    let server = kubewasm_devserver::DevServer::start(kubewasm_devserver::Options {
        port: args.port,
        ..Default::default()
    })
    .await
    .context("cannot start the development API server")?;
    if let Some(dir) = &args.manifests {
        let created = server
            .load_manifests(dir)
            .with_context(|| format!("cannot load manifests from {}", dir.display()))
            .map_err(UsageError)?;
        tracing::info!(dir = %dir.display(), created, "manifests loaded");
    }
    std::fs::write(&args.kubeconfig_out, server.kubeconfig_yaml()).with_context(|| {
        format!(
            "cannot write kubeconfig to {}",
            args.kubeconfig_out.display()
        )
    })?;
    tracing::info!(
        url = %server.url(),
        kubeconfig = %args.kubeconfig_out.display(),
        "development API server running (in memory, no authentication: not for production); \
         try: kubectl --kubeconfig {} get configmaps -A",
        args.kubeconfig_out.display()
    );
    let cancel = CancellationToken::new();
    app::cancel_on_signals(cancel.clone())?;
    let clients = app::Clients::new(
        kube::Config::new(server.url().parse()?),
        &config.connection.options(),
    )?;
    // Without a certificate of the user's, admission policies are served on loopback and
    // configured in the embedded server: `kubectl apply` meets them with no setup.
    let result = app::run_host(
        clients,
        &args.host,
        config,
        cancel,
        app::WebhookDefault::Loopback,
    )
    .await;
    server.shutdown().await;
    result
}
