//! How a plugin's queue is connected to the event sources: the sink handlers push into, and
//! the subscriber that registers those handlers (on the shared informers, or on a test feed).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;

use super::actor::Shared;
use super::instance::Event;

/// One queued event, stamped with the instance generation it was registered for.
pub(crate) struct Queued {
    pub(crate) generation: u64,
    /// Index of the subscription in the plugin's `init` result.
    pub(crate) subscription: usize,
    pub(crate) event: Event,
}

/// Where the handlers of one subscription push events. Pushing never blocks: the queue is
/// unbounded and its depth is reported.
#[derive(Clone)]
pub(crate) struct EventSink {
    tx: mpsc::UnboundedSender<Queued>,
    shared: Arc<Shared>,
    generation: u64,
    subscription: usize,
}

impl EventSink {
    pub(crate) fn new(
        tx: mpsc::UnboundedSender<Queued>,
        shared: Arc<Shared>,
        generation: u64,
        subscription: usize,
    ) -> Self {
        EventSink {
            tx,
            shared,
            generation,
            subscription,
        }
    }

    /// The same queue for another subscription of the plugin.
    pub(crate) fn for_subscription(&self, subscription: usize) -> Self {
        EventSink {
            subscription,
            ..self.clone()
        }
    }

    pub(crate) fn push(&self, event: Event) {
        let current = self.shared.generation.load(Ordering::Acquire) == self.generation;
        if current
            && matches!(
                event,
                Event::Add {
                    in_initial_list: true,
                    ..
                }
            )
        {
            self.shared.replay_pushed.fetch_add(1, Ordering::AcqRel);
        }
        self.shared.queue.fetch_add(1, Ordering::AcqRel);
        let queued = Queued {
            generation: self.generation,
            subscription: self.subscription,
            event,
        };
        if self.tx.send(queued).is_err() {
            // The actor is gone (unloaded): nothing will read the queue any more.
            self.shared.queue.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Handlers registered for one instance generation; dropping it unregisters them.
pub(crate) trait Subscribed: Send + Sync {
    /// Whether every source has synced and handed over its replay.
    fn synced(&self) -> bool;
}

/// Registers a plugin's handlers on its event sources.
pub(crate) trait Subscriber: Send + Sync {
    /// Registers a handler per `events` subscription that pushes into `sink` (subscription
    /// index set per handler). Each handler first receives every cached object as an
    /// initial-list add, then live events, none lost or doubled.
    fn subscribe(&self, sink: &EventSink) -> Box<dyn Subscribed>;
}
