//! `kubewasm rbac`: the RBAC objects the plugins in a directory need, ready for `kubectl apply`.

use crate::cli::RbacArgs;
use crate::{app, inspect};

/// Prints the manifests; plugins that would not load are named on stderr and skipped.
pub async fn run(args: RbacArgs) -> anyhow::Result<()> {
    let config = app::load_config(args.config.as_deref())?;
    app::check_plugins_dir(&args.plugins)?;
    let sources = super::oci::fetch_sources(&config, args.registry_config.as_deref()).await;
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
        let namespace = kubewasm_runtime::Namespace::new(namespace)
            .map_err(|e| anyhow::anyhow!("the leader election Lease's {e}"))?;
        found
            .needs
            .push(crate::rbac::leader_election_need(namespace, shards));
    }
    for (path, err) in &found.rejected {
        eprintln!(
            "kubewasm: {}: skipped, it would not load: {err:#}",
            path.display()
        );
    }
    let identity = crate::rbac::Identity {
        name: args.name,
        namespace: args.namespace,
        service_account: args.service_account,
    };
    print!(
        "{}",
        crate::rbac::manifests_with_accounts(
            &identity,
            &found.needs,
            &found.writes,
            &found.accounts
        )?
    );
    Ok(())
}
