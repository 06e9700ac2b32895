//! A sharded election: one elector per shard and the membership heartbeat that balances them,
//! started together and stopped by one token.

use std::sync::Arc;

use kube::Client;
use kubewasm_runtime::LeaderGate;
use tokio_util::sync::CancellationToken;

use super::balance::{Balance, Membership};
use super::elector::LeaderElector;
use super::options::{ElectionOptions, LeaderError};

/// One replica's sharded election, as [`spawn_sharded`] started it.
pub struct Sharded {
    /// What this replica leads.
    pub gate: LeaderGate,
    /// Its view of the group.
    pub balance: Arc<Balance>,
    /// The membership heartbeat and one elector per shard; each ends after `cancel`, once it
    /// has released what it held.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts `options.identity`'s membership heartbeat and an elector for each of `shards`
/// shards, all stopping when `cancel` fires; with `eligible`, each elector leads only while it
/// says so ([`LeaderElector::with_eligibility`]).
pub fn spawn_sharded(
    client: &Client,
    options: ElectionOptions,
    shards: usize,
    eligible: Option<tokio::sync::watch::Receiver<Result<(), String>>>,
    cancel: CancellationToken,
) -> Result<Sharded, LeaderError> {
    let gate = LeaderGate::sharded(&options.lease_name, &options.identity, shards);
    let balance = Arc::new(Balance::new(&options.identity, shards));
    let membership = Membership::new(client.clone(), options.clone(), balance.clone());
    let electors = (0..shards)
        .map(|shard| {
            LeaderElector::for_shard(
                client.clone(),
                options.clone(),
                gate.clone(),
                shard,
                balance.clone(),
            )
            .map(|elector| match &eligible {
                Some(eligible) => elector.with_eligibility(eligible.clone()),
                None => elector,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut tasks = vec![tokio::spawn(membership.run(cancel.clone()))];
    tasks.extend(
        electors
            .into_iter()
            .map(|elector| tokio::spawn(elector.run(cancel.clone()))),
    );
    Ok(Sharded {
        gate,
        balance,
        tasks,
    })
}
