//! The `kubewasm` binary: parses the command line and runs a subcommand.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use kubewasm::app::{self, UsageError};
use kubewasm::cli::{CheckArgs, Cli, Command, DevArgs, RbacArgs, RunArgs};
use kubewasm::inspect;
use tokio_util::sync::CancellationToken;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    if let Err(err) = kubewasm::logging::init(cli.log_format, &cli.log) {
        eprintln!("kubewasm: {err:#}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("kubewasm: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(err) => {
            let usage = err.downcast_ref::<UsageError>().is_some();
            tracing::error!("{err:#}");
            eprintln!("kubewasm: {err:#}");
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run_cluster(args).await.map(|()| ExitCode::SUCCESS),
        Command::Dev(args) => run_dev(args).await.map(|()| ExitCode::SUCCESS),
        Command::Check(args) => check(args).await,
        Command::Rbac(args) => rbac(args).await.map(|()| ExitCode::SUCCESS),
        Command::Push(args) => kubewasm::oci::commands::push(args)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Pull(args) => kubewasm::oci::commands::pull(args)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}

async fn run_cluster(args: RunArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.host.config.as_deref())?;
    app::check_plugins_dir(&args.host.plugins)?;
    let kube_config =
        app::cluster_config(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let clients = app::Clients::new(kube_config, &config.connection.options())?;
    let cancel = CancellationToken::new();
    app::cancel_on_signals(cancel.clone())?;
    app::run(clients, &args.host, config, cancel).await
}

async fn run_dev(args: DevArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.host.config.as_deref())?;
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
    let result = app::run(clients, &args.host, config, cancel).await;
    server.shutdown().await;
    result
}

async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let config = app::load_config(args.config.as_deref())?;
    let mut failed = false;
    for file in &args.files {
        match inspect::inspect_file(file, &config).await {
            Ok(report) => print!("{report}"),
            Err(err) => {
                failed = true;
                println!("{}: FAILED: {err:#}\n", file.display());
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn rbac(args: RbacArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.config.as_deref())?;
    app::check_plugins_dir(&args.plugins)?;
    let sources =
        kubewasm::oci::commands::fetch_sources(&config, args.registry_config.as_deref()).await;
    let mut found = inspect::needs_of_dir(&args.plugins, &config, sources).await?;
    let shards = args
        .shards
        .map_or(config.leader_election.shards, usize::from);
    if args.leader_elect || config.leader_election.enabled || shards > 1 {
        let namespace = args
            .leader_elect_namespace
            .as_deref()
            .or(config.leader_election.namespace.as_deref())
            .unwrap_or(&args.namespace);
        let namespace = kubewasm::plugin::Namespace::new(namespace)
            .map_err(|e| anyhow::anyhow!("the leader election Lease's {e}"))?;
        found
            .needs
            .push(kubewasm::rbac::leader_election_need(namespace, shards));
    }
    for (path, err) in &found.rejected {
        eprintln!(
            "kubewasm: {}: skipped, it would not load: {err:#}",
            path.display()
        );
    }
    let identity = kubewasm::rbac::Identity {
        name: args.name,
        namespace: args.namespace,
        service_account: args.service_account,
    };
    print!(
        "{}",
        kubewasm::rbac::manifests_with_writes(&identity, &found.needs, &found.writes)?
    );
    Ok(())
}
