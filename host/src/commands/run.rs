//! `kubewasm run`: the host against a cluster, from a kubeconfig or the pod's ServiceAccount.

use tokio_util::sync::CancellationToken;

use crate::app;
use crate::cli::RunArgs;

/// Runs until SIGINT or SIGTERM.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.host.config.as_deref())?;
    app::check_plugins_dir(&args.host.plugins)?;
    let kube_config =
        app::cluster_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let clients = app::Clients::new(kube_config, &config.connection.options())?;
    let cancel = CancellationToken::new();
    app::cancel_on_signals(cancel.clone())?;
    let mut host = args.host;
    host.leader = args.leader;
    app::run(clients, &host, config, cancel).await
}
