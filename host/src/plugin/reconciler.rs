//! The reconcile workers of a 0.2 plugin: each owns one guest instance and takes keys from the
//! plugin's host-owned workqueue, one at a time, with client-go's semantics (the queue never
//! hands one key to two workers; a failed reconcile is retried with backoff; a requeue asked
//! for by the guest is honoured). A worker whose instance faults completes its key as a
//! failure and starts a fresh instance; a stopped worker's key goes back to the queue.

use crate::leader::LeaderGate;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use tokio::task::JoinHandle;

use super::Gvk;
use super::bindings::v0_2::exports::kubewasm::controller::reconcile::Action;
use super::bindings::v0_2::kubewasm::controller::types as wit;
use super::calls::Outcome;
use super::context::Context;
use super::instance::{Instance, cut};
use super::keys::ObjectKey;
use super::workqueue::Completion;

/// What a 0.2 plugin version's reconcile workers are made from.
#[derive(Clone)]
pub(crate) struct Recipe {
    /// What each worker's instance is made from.
    pub(crate) instance: super::instance::Recipe,
    pub(crate) name: Arc<str>,
    pub(crate) plugin: Arc<Context>,
    /// Keys are taken from the queue only while this replica leads; a standby keeps its
    /// instance warm and its queue filled from the cache.
    pub(crate) leader: LeaderGate,
}

/// A fresh instance of `recipe`, initialised and connected, with the resource type of each
/// of its subscription handles.
async fn start_instance(recipe: &Recipe) -> Result<(Instance, Vec<Gvk>), String> {
    let instance = Instance::start(&recipe.instance).await?;
    let subscriptions = instance.resources().to_vec();
    Ok((instance, subscriptions))
}

/// The key as this instance names it: the handle of its subscription of the key's type.
fn wit_key(subscriptions: &[Gvk], key: &ObjectKey) -> Option<wit::Key> {
    let handle = subscriptions
        .iter()
        .position(|g| g.group == key.group && g.kind == key.kind)?;
    Some(wit::Key {
        subscription: u32::try_from(handle).ok()?,
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    })
}

/// How long a worker waits before starting a new instance after the last one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts `count` workers reconciling the keys of `recipe.plugin`'s queue. Abort them to stop:
/// the key each holds goes back to the queue.
pub(crate) fn spawn_workers(recipe: Recipe, count: usize) -> Vec<JoinHandle<()>> {
    (0..count.max(1))
        .map(|_| tokio::spawn(work(recipe.clone())))
        .collect()
}

/// Holds a key of a shard this replica does not lead (or no longer leads) until it does, then
/// queues it again: a standby's keys wait for the shard rather than being lost or polled.
fn park(recipe: &Recipe, key: ObjectKey) {
    let queue = recipe.plugin.queue.clone();
    let parked = format!("{:p}/{key:?}", Arc::as_ptr(&recipe.plugin));
    let (namespace, name) = (key.namespace.clone(), key.name.clone());
    recipe.leader.park(
        parked,
        namespace.as_deref(),
        &name,
        Box::new(move || queue.add(key)),
    );
}

/// `namespace/name` (or `name`) of a key, for messages.
fn key_name(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{ns}/{}", key.name),
        None => key.name.clone(),
    }
}

async fn work(recipe: Recipe) {
    let queue = recipe.plugin.queue.clone();
    let mut current: Option<(Instance, Vec<Gvk>)> = None;
    // Whether the next instance replaces one that faulted (a restart).
    let mut replacing = false;
    loop {
        let (instance, subscriptions) = match &mut current {
            Some(c) => (&mut c.0, &c.1),
            None => match start_instance(&recipe).await {
                Ok(c) => {
                    if std::mem::take(&mut replacing) {
                        recipe.plugin.restarts.fetch_add(1, Ordering::Relaxed);
                    }
                    let c = current.insert(c);
                    (&mut c.0, &c.1)
                }
                Err(reason) => {
                    tracing::warn!(plugin = %recipe.name, "starting a reconcile instance: {reason}");
                    tokio::time::sleep(RESTART_DELAY).await;
                    continue;
                }
            },
        };
        recipe.leader.wait_leader().await;
        // The plugin's reconcile rate: the token is taken before the key, so no key is held
        // while its worker waits.
        let wait = recipe.plugin.reconciles.lock().reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let Some(item) = queue.get().await else {
            return;
        };
        if !recipe
            .leader
            .leads(item.key().namespace.as_deref(), &item.key().name)
        {
            park(&recipe, item.key().clone());
            item.complete(Completion::Done);
            continue;
        }
        let Some(key) = wit_key(subscriptions, item.key()) else {
            tracing::warn!(plugin = %recipe.name, key = ?item.key(), "a queued key of a resource this version does not subscribe to: dropped");
            item.complete(Completion::Done);
            continue;
        };
        let outcome = instance.reconcile(&key).await;
        recipe.plugin.calls.count_reconcile(&outcome);
        match outcome {
            Outcome::Ok(Action::Done) => item.complete(Completion::Done),
            Outcome::Ok(Action::RequeueAfter(ms)) => {
                let delay = Duration::from_millis(ms.into()).max(recipe.plugin.min_requeue);
                item.complete(Completion::RequeueAfter(delay))
            }
            Outcome::GuestError(reason) => {
                let (key, reason) = (key_name(item.key()), cut(&reason));
                queue.reconcile_failed();
                if let Some(unlogged) = recipe.plugin.error_notices.admit(Instant::now()) {
                    tracing::warn!(plugin = %recipe.name, %key, unlogged, "reconcile of {key} failed, retried with backoff: {reason}");
                }
                recipe
                    .plugin
                    .record_error(format!("reconcile {key}: {reason}"));
                item.complete(Completion::Retry);
            }
            Outcome::Failed(kind, reason) => {
                let (key, reason) = (key_name(item.key()), cut(&reason));
                tracing::warn!(plugin = %recipe.name, %key, "reconcile {}, a fresh instance takes over: {reason}", kind.as_str());
                recipe
                    .plugin
                    .record_error(format!("reconcile {key} {}: {reason}", kind.as_str()));
                item.complete(Completion::Retry);
                current = None;
                replacing = true;
            }
        }
    }
}
