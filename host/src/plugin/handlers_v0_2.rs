//! The event handlers of a 0.2 plugin (`on-add` / `on-update` / `on-delete`), for the
//! subscriptions whose `init` asked for events: informer callbacks go, in order, into one
//! channel per plugin version, and one task calls the guest's handlers with the subscription
//! handle, one event at a time, on an instance of its own (reconcile runs beside it). A failed
//! handler call is logged and the next event goes on; a faulted instance is replaced.

use std::time::Duration;

use kubewasm_informer::{ObjectRef as InformerObject, ResourceEventHandler};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::instance::{Event, Outcome};
use super::reconciler::{Recipe, ReconcilerInstance, start_instance};

/// An informer handler that forwards every callback of one subscription to the handler task.
pub(crate) struct EventForwarder {
    pub(crate) subscription: u32,
    pub(crate) tx: mpsc::UnboundedSender<(u32, Event)>,
}

impl EventForwarder {
    fn send(&self, event: Event) {
        // A closed channel: the version is being stopped; its successor replays the cache.
        let _ = self.tx.send((self.subscription, event));
    }
}

impl ResourceEventHandler for EventForwarder {
    fn on_add(&self, obj: &InformerObject, in_initial_list: bool) {
        self.send(Event::Add {
            object: obj.clone(),
            in_initial_list,
        });
    }

    fn on_update(&self, old: &InformerObject, new: &InformerObject) {
        self.send(Event::Update {
            old: old.clone(),
            new: new.clone(),
        });
    }

    fn on_delete(&self, obj: &InformerObject, final_state_unknown: bool) {
        self.send(Event::Delete {
            object: obj.clone(),
            final_state_unknown,
        });
    }
}

/// How long the task waits before trying a new instance after one failed to start.
const RESTART_DELAY: Duration = Duration::from_secs(1);

/// Starts the task calling the guest's handlers with the events of `rx`. Abort it to stop.
pub(crate) fn spawn_handlers(
    recipe: Recipe,
    mut rx: mpsc::UnboundedReceiver<(u32, Event)>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut current: Option<ReconcilerInstance> = None;
        while let Some((subscription, event)) = rx.recv().await {
            let instance = loop {
                match &mut current {
                    Some(i) => break i,
                    None => match start_instance(&recipe).await {
                        Ok((i, _)) => current = Some(i),
                        Err(reason) => {
                            tracing::warn!(plugin = %recipe.name, "starting a handler instance: {reason}");
                            tokio::time::sleep(RESTART_DELAY).await;
                        }
                    },
                }
            };
            let outcome = instance.deliver(subscription, &event).await;
            recipe.plugin.calls.count(&outcome);
            match outcome {
                Outcome::Ok(()) => {}
                Outcome::GuestError(reason) => {
                    tracing::debug!(plugin = %recipe.name, "handler returned an error: {reason}");
                }
                Outcome::Failed(kind, reason) => {
                    tracing::warn!(plugin = %recipe.name, "handler {}, a fresh instance takes over: {reason}", kind.as_str());
                    current = None;
                }
            }
        }
    })
}
