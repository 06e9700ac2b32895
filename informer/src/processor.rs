//! sharedProcessor and processorListener: fan-out to handlers, each with its own buffer and thread
//! (or, for a handler registered inline, its own queue behind it).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::object::ObjectRef;

/// A handler of informer events, as client-go's ResourceEventHandler.
///
/// Each handler is called from its own listener thread, one call at a time, in the order the
/// informer saw the changes; the cache already holds the new state when a call is made. A slow
/// handler only delays itself (its buffer grows, see [`Registration::pending`]); it should still
/// return quickly, handing heavy work to its own queue.
///
/// [`Registration::pending`]: crate::Registration::pending
pub trait ResourceEventHandler: Send + Sync + 'static {
    /// An object appeared. `in_initial_list`: it is part of the informer's first list, or of the
    /// replay of the cache a handler added late receives.
    fn on_add(&self, obj: &ObjectRef, in_initial_list: bool);
    /// An object changed (or, with `old` and `new` at the same resourceVersion, a resync).
    fn on_update(&self, old: &ObjectRef, new: &ObjectRef);
    /// An object is gone. `final_state_unknown`: the deletion was seen on a relist (a
    /// tombstone), so `obj` is the last state the cache knew, not the state at deletion.
    fn on_delete(&self, obj: &ObjectRef, final_state_unknown: bool);
    /// The end of a batch of calls. Called only on handlers registered inline
    /// ([`SharedIndexInformer::add_inline_event_handler`]), after each burst of events the
    /// informer handled in one go and after the replay: the place for a handler that queues
    /// events to wake its consumer once per batch rather than once per event.
    ///
    /// [`SharedIndexInformer::add_inline_event_handler`]: crate::SharedIndexInformer::add_inline_event_handler
    fn flush(&self) {}
    /// Whether this handler takes the resync that is due now. Asked of handlers registered
    /// inline, on the distributing thread, when their resync period comes round: one still
    /// working through its previous resync declines, and its next comes a period later, so a
    /// handler slower than its period does not pile up one copy of the cache per period.
    /// Listeners with a thread of their own are not asked.
    fn wants_resync(&self) -> bool {
        true
    }
}

/// What a listener delivers to its handler.
#[derive(Clone)]
pub(crate) enum Notification {
    Add {
        obj: ObjectRef,
        initial: bool,
    },
    Update {
        old: ObjectRef,
        new: ObjectRef,
    },
    Delete {
        obj: ObjectRef,
        final_state_unknown: bool,
    },
}

enum Message {
    Deliver(Notification),
    Stop,
}

/// A listener's counters, shared with its thread and its registration.
#[derive(Default)]
pub(crate) struct ListenerShared {
    pub(crate) id: u64,
    /// Notifications buffered and not yet handled.
    pub(crate) pending: AtomicUsize,
    /// In-initial-list adds buffered and not yet handled.
    pub(crate) pending_initial: AtomicUsize,
    pub(crate) delivered: AtomicU64,
    pub(crate) handler_nanos: AtomicU64,
    pub(crate) panics: AtomicU64,
    pub(crate) removed: AtomicBool,
    /// Woken whenever `pending_initial` reaches zero.
    pub(crate) initial_done: Notify,
}

/// Counters of one handler, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// The registration's id.
    pub id: u64,
    /// Notifications waiting in the handler's buffer (queue depth).
    pub pending: usize,
    /// Notifications handled so far.
    pub delivered: u64,
    /// Total time spent inside the handler, in nanoseconds (latency = this / delivered).
    pub handler_nanos: u64,
    /// Handler calls that panicked (the panic is caught and logged; the listener goes on).
    pub panics: u64,
}

/// A listener's unbounded buffer. Pushing does not wake the listener thread; `flush` does,
/// once per batch, so a burst costs one wake-up per handler rather than one per event.
///
/// Handled notifications go back through `spent` and are dropped by the producer at its next
/// flush, so objects are freed on the thread that allocated them: freeing them on listener
/// threads made every event contend for the allocator's arena lock.
#[derive(Default)]
struct Mailbox {
    state: Mutex<MailboxState>,
    ready: Condvar,
    spent: Mutex<Vec<Notification>>,
}

/// Handled notifications a listener keeps for the producer to drop, at most; past this the
/// listener drops them itself (the producer has gone quiet).
const MAX_SPENT: usize = 16 * 1024;

#[derive(Default)]
struct MailboxState {
    messages: VecDeque<Message>,
    /// The listener thread is blocked on `ready`.
    waiting: bool,
}

impl Mailbox {
    fn push(&self, message: Message) {
        self.state.lock().messages.push_back(message);
    }

    /// Wakes the listener thread if it sleeps while messages wait, and drops (on this, the
    /// producer's thread) the notifications it has handled.
    fn flush(&self) {
        let spent = std::mem::take(&mut *self.spent.lock());
        drop(spent);
        let state = self.state.lock();
        if state.waiting && !state.messages.is_empty() {
            self.ready.notify_one();
        }
    }

    /// Blocks until messages are there, then takes them all.
    fn take_all(&self, into: &mut VecDeque<Message>) {
        let mut state = self.state.lock();
        while state.messages.is_empty() {
            state.waiting = true;
            self.ready.wait(&mut state);
            state.waiting = false;
        }
        std::mem::swap(into, &mut state.messages);
    }
}

/// How a listener hands notifications to its handler.
enum Delivery {
    /// Through its own buffer, to its own thread.
    Thread(Arc<Mailbox>),
    /// By calling the handler at once, on the distributing thread: the handler only queues the
    /// notification in a buffer of its own, which is its processorListener buffer.
    Inline(Arc<dyn ResourceEventHandler>),
}

struct Listener {
    shared: Arc<ListenerShared>,
    delivery: Delivery,
    resync_period: Option<Duration>,
    next_resync: Mutex<Instant>,
    done: Mutex<Option<oneshot::Receiver<()>>>,
}

/// The listener thread waits on the mailbox forever unless told to stop; dropping the listener
/// (its processor is gone) tells it.
impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Listener {
    fn push(&self, notification: Notification) {
        self.shared.pending.fetch_add(1, Ordering::Relaxed);
        if matches!(notification, Notification::Add { initial: true, .. }) {
            self.shared.pending_initial.fetch_add(1, Ordering::AcqRel);
        }
        match &self.delivery {
            Delivery::Thread(mailbox) => mailbox.push(Message::Deliver(notification)),
            Delivery::Inline(handler) => deliver(&self.shared, handler.as_ref(), &notification),
        }
    }

    /// Whether it takes a resync that is due ([`ResourceEventHandler::wants_resync`]).
    fn takes_resync(&self) -> bool {
        match &self.delivery {
            Delivery::Thread(_) => true,
            Delivery::Inline(handler) => {
                catch_unwind(AssertUnwindSafe(|| handler.wants_resync())).unwrap_or(true)
            }
        }
    }

    /// Wakes the listener's thread (or tells an inline handler a batch ended).
    fn flush(&self) {
        match &self.delivery {
            Delivery::Thread(mailbox) => mailbox.flush(),
            Delivery::Inline(handler) => {
                let _ = catch_unwind(AssertUnwindSafe(|| handler.flush()));
            }
        }
    }

    fn stop(&self) {
        if let Delivery::Thread(mailbox) = &self.delivery {
            mailbox.push(Message::Stop);
            mailbox.flush();
        }
    }
}

/// Distributes notifications to listeners: all of them, or on resync only those due.
///
/// Invariant: `syncing` is a subset of `listeners`, recomputed by `should_resync`.
#[derive(Default)]
pub(crate) struct Processor {
    listeners: RwLock<Vec<Arc<Listener>>>,
    syncing: RwLock<Vec<Arc<Listener>>>,
    next_id: AtomicU64,
}

impl Processor {
    /// Adds a listener and starts its thread. `replay` is pushed before any later notification.
    pub(crate) fn add_listener(
        &self,
        handler: Arc<dyn ResourceEventHandler>,
        resync_period: Option<Duration>,
        replay: Vec<ObjectRef>,
    ) -> Arc<ListenerShared> {
        let shared = self.new_shared();
        let mailbox = Arc::new(Mailbox::default());
        let (done_tx, done_rx) = oneshot::channel();
        let (thread_shared, thread_mailbox) = (shared.clone(), mailbox.clone());
        let id = shared.id;
        let spawned = std::thread::Builder::new()
            .name(format!("informer-listener-{id}"))
            .spawn(move || {
                run_listener(&thread_shared, handler.as_ref(), &thread_mailbox);
                let _ = done_tx.send(());
            });
        if let Err(err) = spawned {
            tracing::error!(listener = id, error = %err, "cannot start listener thread");
        }
        self.register(
            shared,
            Delivery::Thread(mailbox),
            resync_period,
            Some(done_rx),
            replay,
        )
    }

    /// Adds a listener that calls `handler` on the distributing thread, with no buffer or
    /// thread of its own (see [`ResourceEventHandler::flush`]). `replay` is handed over first,
    /// on the calling thread.
    pub(crate) fn add_inline_listener(
        &self,
        handler: Arc<dyn ResourceEventHandler>,
        resync_period: Option<Duration>,
        replay: Vec<ObjectRef>,
    ) -> Arc<ListenerShared> {
        let shared = self.new_shared();
        self.register(
            shared,
            Delivery::Inline(handler),
            resync_period,
            None,
            replay,
        )
    }

    fn new_shared(&self) -> Arc<ListenerShared> {
        Arc::new(ListenerShared {
            id: self.next_id.fetch_add(1, Ordering::Relaxed) + 1,
            ..ListenerShared::default()
        })
    }

    fn register(
        &self,
        shared: Arc<ListenerShared>,
        delivery: Delivery,
        resync_period: Option<Duration>,
        done: Option<oneshot::Receiver<()>>,
        replay: Vec<ObjectRef>,
    ) -> Arc<ListenerShared> {
        let period = resync_period.filter(|p| !p.is_zero());
        let listener = Arc::new(Listener {
            shared: shared.clone(),
            delivery,
            resync_period: period,
            next_resync: Mutex::new(Instant::now() + period.unwrap_or_default()),
            done: Mutex::new(done),
        });
        for obj in replay {
            listener.push(Notification::Add { obj, initial: true });
        }
        listener.flush();
        self.listeners.write().push(listener);
        shared
    }

    /// Removes the listener; its thread stops after the call in progress, dropping its backlog.
    pub(crate) fn remove_listener(&self, id: u64) {
        let removed = {
            let mut listeners = self.listeners.write();
            let pos = listeners.iter().position(|l| l.shared.id == id);
            pos.map(|p| listeners.remove(p))
        };
        self.syncing.write().retain(|l| l.shared.id != id);
        if let Some(listener) = removed {
            listener.shared.removed.store(true, Ordering::Release);
            listener.stop();
        }
    }

    /// Wakes every listener that sleeps while notifications wait for it. Called at the end of
    /// each batch of distributions.
    pub(crate) fn flush(&self) {
        for listener in self.listeners.read().iter() {
            listener.flush();
        }
    }

    /// Hands `notification` to every listener, or with `sync` to the listeners due for resync.
    /// Listeners see it after the next [`flush`](Self::flush).
    pub(crate) fn distribute(&self, notification: Notification, sync: bool) {
        let listeners = if sync {
            self.syncing.read()
        } else {
            self.listeners.read()
        };
        for listener in listeners.iter() {
            listener.push(notification.clone());
        }
    }

    /// Picks the listeners whose resync is due at `now` (and schedules their next one); true if
    /// any is due.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let listeners = self.listeners.read();
        let mut syncing = self.syncing.write();
        syncing.clear();
        for listener in listeners.iter() {
            let Some(period) = listener.resync_period else {
                continue;
            };
            let mut next = listener.next_resync.lock();
            if now >= *next {
                *next = now + period;
                if listener.takes_resync() {
                    syncing.push(listener.clone());
                }
            }
        }
        !syncing.is_empty()
    }

    /// The shortest resync period of any listener.
    pub(crate) fn min_resync_period(&self) -> Option<Duration> {
        self.listeners
            .read()
            .iter()
            .filter_map(|l| l.resync_period)
            .min()
    }

    pub(crate) fn stats(&self) -> Vec<ListenerStats> {
        self.listeners
            .read()
            .iter()
            .map(|l| ListenerStats {
                id: l.shared.id,
                pending: l.shared.pending.load(Ordering::Relaxed),
                delivered: l.shared.delivered.load(Ordering::Relaxed),
                handler_nanos: l.shared.handler_nanos.load(Ordering::Relaxed),
                panics: l.shared.panics.load(Ordering::Relaxed),
            })
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.listeners.read().len()
    }

    /// Stops every listener after it has handled what it already buffered, and waits for that.
    pub(crate) async fn stop(&self) {
        let listeners: Vec<_> = std::mem::take(&mut *self.listeners.write());
        self.syncing.write().clear();
        let mut waits = Vec::new();
        for listener in &listeners {
            listener.stop();
            if let Some(done) = listener.done.lock().take() {
                waits.push(done);
            }
        }
        for done in waits {
            let _ = done.await;
        }
    }
}

fn run_listener(shared: &ListenerShared, handler: &dyn ResourceEventHandler, mailbox: &Mailbox) {
    let mut batch = VecDeque::new();
    let mut spent = Vec::new();
    loop {
        mailbox.take_all(&mut batch);
        // Time is taken per batch, not per call: the sum (what latency metrics need) is the
        // same, and reading the clock twice per event would cost more than a no-op handler.
        let started = std::time::Instant::now();
        let mut stop = false;
        for message in batch.drain(..) {
            let Message::Deliver(notification) = message else {
                stop = true;
                break;
            };
            if shared.removed.load(Ordering::Acquire) {
                stop = true;
                break;
            }
            deliver(shared, handler, &notification);
            spent.push(notification);
        }
        let nanos = started.elapsed().as_nanos() as u64;
        shared.handler_nanos.fetch_add(nanos, Ordering::Relaxed);
        {
            let mut returned = mailbox.spent.lock();
            if returned.len() < MAX_SPENT {
                returned.append(&mut spent);
            }
        }
        spent.clear();
        if stop {
            return;
        }
    }
}

fn deliver(
    shared: &ListenerShared,
    handler: &dyn ResourceEventHandler,
    notification: &Notification,
) {
    let initial = matches!(notification, Notification::Add { initial: true, .. });
    let outcome = catch_unwind(AssertUnwindSafe(|| match notification {
        Notification::Add { obj, initial } => handler.on_add(obj, *initial),
        Notification::Update { old, new } => handler.on_update(old, new),
        Notification::Delete {
            obj,
            final_state_unknown,
        } => handler.on_delete(obj, *final_state_unknown),
    }));
    shared.delivered.fetch_add(1, Ordering::Relaxed);
    if outcome.is_err() {
        shared.panics.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            listener = shared.id,
            "event handler panicked; event skipped"
        );
    }
    shared.pending.fetch_sub(1, Ordering::Relaxed);
    if initial && shared.pending_initial.fetch_sub(1, Ordering::AcqRel) == 1 {
        shared.initial_done.notify_waiters();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::object::Object;

    /// Records what it sees as `"add:key:rv:initial"`, `"update:key:oldrv>newrv"`,
    /// `"delete:key:rv:tombstone"`; optionally sleeps per event.
    #[derive(Default)]
    pub(crate) struct Recorder {
        pub(crate) seen: parking_lot::Mutex<Vec<String>>,
        pub(crate) delay: Duration,
    }

    impl Recorder {
        pub(crate) fn events(&self) -> Vec<String> {
            self.seen.lock().clone()
        }
        fn record(&self, s: String) {
            if !self.delay.is_zero() {
                std::thread::sleep(self.delay);
            }
            self.seen.lock().push(s);
        }
    }

    impl ResourceEventHandler for Recorder {
        fn on_add(&self, obj: &ObjectRef, in_initial_list: bool) {
            self.record(format!(
                "add:{}:{}:{}",
                obj.key(),
                obj.resource_version(),
                in_initial_list
            ));
        }
        fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
            self.record(format!(
                "update:{}:{}>{}",
                new.key(),
                old.resource_version(),
                new.resource_version()
            ));
        }
        fn on_delete(&self, obj: &ObjectRef, final_state_unknown: bool) {
            self.record(format!(
                "delete:{}:{}:{}",
                obj.key(),
                obj.resource_version(),
                final_state_unknown
            ));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_inline_handler_that_declines_a_resync_gets_none_and_its_next_a_period_later() {
        let processor = Processor::default();
        let handler = Arc::new(Batched::default());
        handler.declines_resync.store(true, Ordering::Relaxed);
        processor.add_inline_listener(handler.clone(), Some(Duration::from_secs(10)), vec![]);
        let resync = || {
            processor.distribute(
                Notification::Update {
                    old: obj("a", 1),
                    new: obj("a", 1),
                },
                true,
            )
        };
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!processor.should_resync(Instant::now()), "declined");
        resync();
        assert_eq!(handler.resyncs_offered.load(Ordering::Relaxed), 1);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(
            !processor.should_resync(Instant::now()),
            "not due again yet"
        );
        assert_eq!(
            handler.resyncs_offered.load(Ordering::Relaxed),
            1,
            "asked only when due"
        );
        handler.declines_resync.store(false, Ordering::Relaxed);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert!(processor.should_resync(Instant::now()), "taken");
        resync();
        processor.stop().await;
        assert_eq!(handler.recorder.events(), vec!["update:ns/a:1>1"]);
    }

    pub(crate) fn obj(name: &str, rv: u64) -> ObjectRef {
        Arc::new(
            Object::from_json(&format!(
                r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
            ))
            .unwrap(),
        )
    }

    /// Polls `cond` every 10 ms for up to 20 s.
    pub(crate) async fn eventually(what: &str, cond: impl Fn() -> bool) {
        for _ in 0..2000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test]
    async fn a_slow_handler_does_not_delay_another() {
        let processor = Processor::default();
        let slow = Arc::new(Recorder {
            delay: Duration::from_millis(200),
            ..Recorder::default()
        });
        let fast = Arc::new(Recorder::default());
        processor.add_listener(slow.clone(), None, vec![]);
        processor.add_listener(fast.clone(), None, vec![]);
        for i in 0..20 {
            processor.distribute(
                Notification::Add {
                    obj: obj(&format!("o{i}"), i),
                    initial: false,
                },
                false,
            );
        }
        processor.flush();
        eventually("the fast handler to see all 20", || {
            fast.events().len() == 20
        })
        .await;
        // The slow one needs 4 s for 20 events; it cannot have finished yet.
        assert!(slow.events().len() < 20);
        let stats = processor.stats();
        assert!(stats[0].pending > 0);
        assert_eq!(stats[1].pending, 0);
        processor.remove_listener(stats[0].id);
        processor.stop().await;
    }

    #[tokio::test]
    async fn replay_is_delivered_before_later_notifications_and_in_order() {
        let processor = Processor::default();
        let rec = Arc::new(Recorder::default());
        let shared = processor.add_listener(rec.clone(), None, vec![obj("a", 1), obj("b", 2)]);
        processor.distribute(
            Notification::Update {
                old: obj("a", 1),
                new: obj("a", 3),
            },
            false,
        );
        processor.stop().await;
        assert_eq!(
            rec.events(),
            vec!["add:ns/a:1:true", "add:ns/b:2:true", "update:ns/a:1>3"]
        );
        assert_eq!(shared.pending_initial.load(Ordering::Acquire), 0);
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn resync_goes_only_to_listeners_that_are_due() {
        let processor = Processor::default();
        let every_10s = Arc::new(Recorder::default());
        let every_25s = Arc::new(Recorder::default());
        let never = Arc::new(Recorder::default());
        processor.add_listener(every_10s.clone(), Some(Duration::from_secs(10)), vec![]);
        processor.add_listener(every_25s.clone(), Some(Duration::from_secs(25)), vec![]);
        processor.add_listener(never.clone(), None, vec![]);
        assert_eq!(processor.min_resync_period(), Some(Duration::from_secs(10)));
        let start = Instant::now();
        assert!(!processor.should_resync(start));
        let mut due = Vec::new();
        for step in 1..=5 {
            tokio::time::advance(Duration::from_secs(10)).await;
            let any = processor.should_resync(Instant::now());
            let names: Vec<u64> = processor
                .syncing
                .read()
                .iter()
                .map(|l| l.shared.id)
                .collect();
            due.push((step * 10, any, names));
        }
        // 10 s listener (id 1) due every 10 s; 25 s listener (id 2) at 30 s (first check past 25 s).
        assert_eq!(
            due,
            vec![
                (10, true, vec![1]),
                (20, true, vec![1]),
                (30, true, vec![1, 2]),
                (40, true, vec![1]),
                (50, true, vec![1]),
            ]
        );
        processor.distribute(
            Notification::Update {
                old: obj("a", 1),
                new: obj("a", 1),
            },
            true,
        );
        processor.stop().await;
        assert_eq!(every_10s.events(), vec!["update:ns/a:1>1"]);
        assert!(every_25s.events().is_empty());
        assert!(never.events().is_empty());
    }

    /// Counts the batches it was told of and the resyncs it was offered besides recording
    /// events; takes a resync unless `declines_resync`.
    #[derive(Default)]
    struct Batched {
        recorder: Recorder,
        flushes: AtomicUsize,
        declines_resync: AtomicBool,
        resyncs_offered: AtomicUsize,
    }

    impl ResourceEventHandler for Batched {
        fn on_add(&self, obj: &ObjectRef, initial: bool) {
            self.recorder.on_add(obj, initial);
        }
        fn on_update(&self, old: &ObjectRef, new: &ObjectRef) {
            self.recorder.on_update(old, new);
        }
        fn on_delete(&self, obj: &ObjectRef, unknown: bool) {
            self.recorder.on_delete(obj, unknown);
        }
        fn flush(&self) {
            self.flushes.fetch_add(1, Ordering::Relaxed);
        }
        fn wants_resync(&self) -> bool {
            self.resyncs_offered.fetch_add(1, Ordering::Relaxed);
            !self.declines_resync.load(Ordering::Relaxed)
        }
    }

    #[tokio::test]
    async fn an_inline_listener_is_called_at_once_in_order_and_told_of_each_batch() {
        let processor = Processor::default();
        let inline = Arc::new(Batched::default());
        let threaded = Arc::new(Recorder::default());
        let shared =
            processor.add_inline_listener(inline.clone(), None, vec![obj("a", 1), obj("b", 2)]);
        processor.add_listener(threaded.clone(), None, vec![obj("a", 1), obj("b", 2)]);
        // The replay is handed over before the call returns: synced at once.
        assert_eq!(
            inline.recorder.events(),
            ["add:ns/a:1:true", "add:ns/b:2:true"]
        );
        assert_eq!(shared.pending_initial.load(Ordering::Acquire), 0);
        assert_eq!(inline.flushes.load(Ordering::Relaxed), 1);
        processor.distribute(
            Notification::Update {
                old: obj("a", 1),
                new: obj("a", 3),
            },
            false,
        );
        processor.distribute(
            Notification::Delete {
                obj: obj("b", 2),
                final_state_unknown: true,
            },
            false,
        );
        assert_eq!(inline.recorder.events().len(), 4);
        processor.flush();
        assert_eq!(inline.flushes.load(Ordering::Relaxed), 2);
        // Removed: never called again, while the threaded listener still is.
        processor.remove_listener(shared.id);
        processor.distribute(
            Notification::Add {
                obj: obj("c", 4),
                initial: false,
            },
            false,
        );
        processor.stop().await;
        let inline_events = inline.recorder.events();
        assert_eq!(
            inline_events,
            [
                "add:ns/a:1:true",
                "add:ns/b:2:true",
                "update:ns/a:1>3",
                "delete:ns/b:2:true"
            ]
        );
        assert_eq!(threaded.events()[..4], inline_events[..]);
        assert_eq!(threaded.events().len(), 5);
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 4);
        assert_eq!(shared.pending.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_panicking_handler_is_counted_and_keeps_going() {
        struct Panics;
        impl ResourceEventHandler for Panics {
            fn on_add(&self, obj: &ObjectRef, _: bool) {
                if obj.name() == "bad" {
                    panic!("boom");
                }
            }
            fn on_update(&self, _: &ObjectRef, _: &ObjectRef) {}
            fn on_delete(&self, _: &ObjectRef, _: bool) {}
        }
        let processor = Processor::default();
        let shared = processor.add_listener(Arc::new(Panics), None, vec![]);
        for name in ["bad", "good"] {
            processor.distribute(
                Notification::Add {
                    obj: obj(name, 1),
                    initial: false,
                },
                false,
            );
        }
        processor.stop().await;
        assert_eq!(shared.panics.load(Ordering::Relaxed), 1);
        assert_eq!(shared.delivered.load(Ordering::Relaxed), 2);
    }
}
