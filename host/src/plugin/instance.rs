//! One guest instance: its store, the `init` and handler calls under a deadline, and the
//! classification of faults (trap, timeout, memory).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};

use super::bindings::Controller;
use super::cache_api::{Access, SharedDocument};
use super::component::CompiledPlugin;
use super::engine::CallInFlight;
use super::error::PluginError;
use super::grants::Limits;
use super::log_gate::LogGate;
use super::observer::{DropReason, EventKind, FailureKind};
use super::state::{CallClock, HostState};
use super::{Gvk, PluginInfo};

/// One event as the guest receives it.
#[derive(Clone)]
pub(crate) enum Event {
    Add {
        object: SharedDocument,
        in_initial_list: bool,
    },
    Update {
        old: SharedDocument,
        new: SharedDocument,
    },
    Delete {
        object: SharedDocument,
        final_state_unknown: bool,
    },
}

impl Event {
    pub(crate) fn kind(&self) -> EventKind {
        match self {
            Event::Add { .. } => EventKind::Add,
            Event::Update { .. } => EventKind::Update,
            Event::Delete { .. } => EventKind::Delete,
        }
    }

    /// The bytes of JSON the event carries into the guest (in a batch, a resync's old and
    /// new object once).
    pub(crate) fn json_len(&self) -> usize {
        match self {
            Event::Add { object, .. } | Event::Delete { object, .. } => object.json().len(),
            Event::Update { old, new } if same_document(old, new) => new.json().len(),
            Event::Update { old, new } => old.json().len() + new.json().len(),
        }
    }

    /// The object the event is about (the new version for updates).
    pub(crate) fn object(&self) -> &SharedDocument {
        match self {
            Event::Add { object, .. } | Event::Delete { object, .. } => object,
            Event::Update { new, .. } => new,
        }
    }
}

/// Whether `a` and `b` are one cached object (a resync's old and new).
pub(crate) fn same_document(a: &SharedDocument, b: &SharedDocument) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// How a guest call ended.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    /// The guest returned `ok`.
    Ok(T),
    /// The guest returned `err(reason)`; the instance is fine.
    GuestError(String),
    /// The instance faulted and must be thrown away.
    Failed(FailureKind, String),
}

/// Counts of a plugin's guest calls (handler calls, reconciles) by how they ended, for its
/// status.
#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    /// Events handled by handler calls that returned (ok or err).
    pub(crate) returned: AtomicU64,
    /// Events whose handler call returned `err`.
    pub(crate) errors: AtomicU64,
    /// Reconciles that returned (ok or err).
    pub(crate) reconciles: AtomicU64,
    /// Reconciles that returned `err`.
    pub(crate) reconcile_errors: AtomicU64,
    pub(crate) traps: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) memory_faults: AtomicU64,
    /// Events the plugin did not receive, by [`DropReason`].
    dropped: [AtomicU64; DropReason::ALL.len()],
}

impl CallCounters {
    /// Counts how a call ended.
    pub(crate) fn count<T>(&self, outcome: &Outcome<T>) {
        let counter = match outcome {
            Outcome::Ok(_) => &self.returned,
            Outcome::GuestError(_) => {
                self.returned.fetch_add(1, Ordering::Relaxed);
                &self.errors
            }
            Outcome::Failed(FailureKind::Trap, _) => &self.traps,
            Outcome::Failed(FailureKind::Timeout, _) => &self.timeouts,
            Outcome::Failed(FailureKind::Memory, _) => &self.memory_faults,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts how a reconcile ended: apart from the events handled, but faults alike.
    pub(crate) fn count_reconcile<T>(&self, outcome: &Outcome<T>) {
        match outcome {
            Outcome::Ok(_) => {
                self.reconciles.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::GuestError(_) => {
                self.reconciles.fetch_add(1, Ordering::Relaxed);
                self.reconcile_errors.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Failed(..) => self.count(outcome),
        }
    }

    /// Counts `n` events the plugin did not receive, for `reason`.
    pub(crate) fn drop_events(&self, reason: DropReason, n: u64) {
        self.dropped[reason as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Events dropped for `reason` so far.
    pub(crate) fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize].load(Ordering::Relaxed)
    }

    /// Counts `n` events handled by calls that returned, `errors` of them failed.
    pub(crate) fn returned_events(&self, n: usize, errors: usize) {
        self.returned.fetch_add(n as u64, Ordering::Relaxed);
        self.errors.fetch_add(errors as u64, Ordering::Relaxed);
    }
}

/// Raised from the epoch callback when a call runs past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("call exceeded its deadline")]
struct DeadlineExceeded;

/// How many times its deadline a call may take in wall time, waiting in host calls included.
pub(crate) const WALL_LIMIT_FACTOR: u32 = 10;

fn wall_limit(deadline: Duration) -> Duration {
    deadline.saturating_mul(WALL_LIMIT_FACTOR)
}

/// `call`, with the time spent in each of its polls added to `clock`.
async fn timed<F: std::future::Future>(clock: &CallClock, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        clock.resume();
        let poll = call.as_mut().poll(cx);
        clock.pause();
        poll
    })
    .await
}

/// A live guest instance. Calls take `&mut self`: one at a time.
pub(crate) struct Instance {
    store: Store<HostState>,
    bindings: Controller,
    limits: Limits,
}

impl Instance {
    /// Instantiates the component in a fresh store with `limits` applied.
    pub(crate) async fn new(
        compiled: &CompiledPlugin,
        label: Arc<str>,
        limits: Limits,
        access: Arc<Access>,
        log_gate: Arc<LogGate>,
    ) -> Result<Self, PluginError> {
        let super::component::Linked::V0_1(pre) = &*compiled.pre else {
            return Err(PluginError::Instantiate {
                file: compiled.file.clone(),
                reason: "a 0.2 component runs as a reconciler, not as a 0.1 instance".into(),
            });
        };
        let mut store = new_store(pre.engine(), label, &limits, access, log_gate);
        let clock = store.data().clock.clone();
        clock.start(limits.call_deadline);
        let _in_flight = CallInFlight::start();
        let instantiated = tokio::time::timeout(
            wall_limit(limits.call_deadline),
            timed(&clock, pre.instantiate_async(&mut store)),
        )
        .await;
        clock.stop();
        let bindings = match instantiated {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                return Err(PluginError::Instantiate {
                    file: compiled.file.clone(),
                    reason: format!("{e:#}"),
                });
            }
            Err(_) => {
                return Err(PluginError::Instantiate {
                    file: compiled.file.clone(),
                    reason: format!("took longer than {:?}", limits.call_deadline),
                });
            }
        };
        Ok(Instance {
            store,
            bindings,
            limits,
        })
    }

    /// Gives the guest its view of the cache.
    pub(crate) fn set_access(&mut self, access: Arc<Access>) {
        self.store.data_mut().access = access;
    }

    /// The cap on what the guest logs (shared with the plugin's later instances).
    pub(crate) fn log_gate(&self) -> Arc<LogGate> {
        self.store.data().log_gate.clone()
    }

    /// Renames the instance in its log lines.
    pub(crate) fn set_label(&mut self, label: Arc<str>) {
        self.store.data_mut().plugin = label;
    }

    /// Calls the guest's `init`.
    pub(crate) async fn init(&mut self, config: &str) -> Outcome<PluginInfo> {
        let bindings = self.bindings.kubewasm_controller_handler().clone();
        self.guarded(async |store| bindings.call_init(store, config).await)
            .await
    }

    /// Delivers one event for `resource`.
    pub(crate) async fn deliver(&mut self, resource: &Gvk, event: &Event) -> Outcome<()> {
        let h = self.bindings.kubewasm_controller_handler().clone();
        match event {
            Event::Add {
                object,
                in_initial_list,
            } => {
                self.guarded(async |store| {
                    h.call_on_add(store, resource, object.json(), *in_initial_list)
                        .await
                })
                .await
            }
            Event::Update { old, new } => {
                self.guarded(async |store| {
                    h.call_on_update(store, resource, old.json(), new.json())
                        .await
                })
                .await
            }
            Event::Delete {
                object,
                final_state_unknown,
            } => {
                self.guarded(async |store| {
                    h.call_on_delete(store, resource, object.json(), *final_state_unknown)
                        .await
                })
                .await
            }
        }
    }

    async fn guarded<T, F>(&mut self, call: F) -> Outcome<T>
    where
        F: AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<Result<T, String>>,
    {
        guarded(
            &mut self.store,
            self.limits.call_deadline,
            || Duration::ZERO,
            call,
        )
        .await
    }
}

/// A fresh store for one instance, with `limits` applied and the deadline checked on every
/// epoch tick.
pub(crate) fn new_store(
    engine: &wasmtime::Engine,
    label: Arc<str>,
    limits: &Limits,
    access: Arc<Access>,
    log_gate: Arc<LogGate>,
) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(label, limits, access, log_gate));
    store.limiter(|s| &mut s.limiter);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().past_deadline() {
            Err(wasmtime::Error::new(DeadlineExceeded))
        } else {
            // Let other tasks run on this worker while a long call goes on.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store.set_epoch_deadline(1);
    store
}

/// Runs one guest call under the deadline: the epoch callback interrupts guest code once
/// the call has run for the deadline (see [`CallClock`]); a wall-clock limit of
/// [`WALL_LIMIT_FACTOR`] times the deadline, not counting what `excused` says the call has
/// spent waiting for the API server so far (the wait in progress included), ends a call
/// blocked in a host call for longer (a guest sleeping through WASI).
pub(crate) async fn guarded<T, F>(
    store: &mut Store<HostState>,
    deadline: Duration,
    excused: impl Fn() -> Duration,
    call: F,
) -> Outcome<T>
where
    F: AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<Result<T, String>>,
{
    let started = Instant::now();
    // A refused growth in an earlier call that the guest survived says nothing about
    // how this one ends.
    store.data_mut().limiter.exceeded = false;
    let clock = store.data().clock.clone();
    clock.start(deadline);
    let _in_flight = CallInFlight::start();
    store.set_epoch_deadline(1);
    let result = {
        let mut call = std::pin::pin!(timed(&clock, call(store)));
        // Most calls finish in their first poll: only arm a timer for those that wait.
        match futures::poll!(call.as_mut()) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => loop {
                // Wall time not excused: waits for the API server are, also while they last,
                // so an API call ends at its own timeout rather than at this limit.
                let unexcused = started.elapsed().saturating_sub(excused());
                let remaining = wall_limit(deadline).saturating_sub(unexcused);
                if remaining.is_zero() {
                    break None;
                }
                // While an API call is in progress the remaining time does not shrink: look
                // again no more often than every tick.
                let wait = remaining.max(super::engine::EPOCH_TICK);
                if let Ok(r) = tokio::time::timeout(wait, call.as_mut()).await {
                    break Some(r);
                }
            },
        }
    };
    clock.stop();
    match result {
        Some(Ok(Ok(v))) => Outcome::Ok(v),
        Some(Ok(Err(reason))) => Outcome::GuestError(reason),
        Some(Err(e)) => {
            let kind = if store.data().limiter.exceeded {
                FailureKind::Memory
            } else if e.downcast_ref::<DeadlineExceeded>().is_some() {
                FailureKind::Timeout
            } else {
                FailureKind::Trap
            };
            Outcome::Failed(kind, format!("{e:#}"))
        }
        None => Outcome::Failed(
            FailureKind::Timeout,
            format!(
                "call took {:?} of wall time besides waiting for the API server (the limit is \
                 {WALL_LIMIT_FACTOR} times the deadline of {deadline:?})",
                wall_limit(deadline)
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::grants::Grants;
    use super::super::testing::{config_map, config_map_gvk, engine};
    use super::*;

    async fn probe_instance() -> Instance {
        let compiled = engine()
            .compile(
                Path::new("probe.wasm"),
                kubewasm_tests::guest_bytes("probe"),
            )
            .await
            .unwrap();
        Instance::new(
            &compiled,
            "probe".into(),
            Limits::default(),
            Arc::new(Access::empty(Grants::default())),
            Arc::new(LogGate::new(Default::default())),
        )
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn init_returns_the_declared_plugin_info() {
        let mut i = probe_instance().await;
        let config = r#"{"name":"x","subscriptions":[{"group":"apps","version":"v1","kind":"Deployment","namespace":"ns","cacheOnly":true}]}"#;
        match i.init(config).await {
            Outcome::Ok(info) => {
                assert_eq!(info.name, "x");
                assert_eq!(info.subscriptions.len(), 1);
                assert_eq!(info.subscriptions[0].gvk.kind, "Deployment");
                assert_eq!(info.subscriptions[0].namespace.as_deref(), Some("ns"));
                assert_eq!(
                    info.subscriptions[0].delivery,
                    super::super::Delivery::CacheOnly
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn init_error_is_a_guest_error() {
        let mut i = probe_instance().await;
        match i.init(r#"{"initError":"no config"}"#).await {
            Outcome::GuestError(reason) => assert_eq!(reason, "no config"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_trap_after_a_survived_memory_refusal_is_a_trap() {
        kubewasm_tests::guest_logs();
        let compiled = engine()
            .compile(
                Path::new("probe.wasm"),
                kubewasm_tests::guest_bytes("probe"),
            )
            .await
            .unwrap();
        let limits = Limits {
            memory: 16 << 20,
            ..Limits::default()
        };
        let mut i = Instance::new(
            &compiled,
            "survivor".into(),
            limits,
            Arc::new(Access::empty(Grants::default())),
            Arc::new(LogGate::new(Default::default())),
        )
        .await
        .unwrap();
        let config = r#"{"name":"survivor","mode":"try-alloc","trapOn":"boom"}"#;
        assert!(matches!(i.init(config).await, Outcome::Ok(_)));
        let add = |name: &str| Event::Add {
            object: config_map("a", name, 1, &[]),
            in_initial_list: false,
        };
        let gvk = config_map_gvk();
        // The guest asks for 1 GiB, is refused, and carries on.
        match i.deliver(&gvk, &add("greedy")).await {
            Outcome::Ok(()) => {}
            other => panic!("{other:?}"),
        }
        assert!(
            kubewasm_tests::guest_logs()
                .lines("survivor")
                .contains(&"TRYALLOC refused".to_owned())
        );
        match i.deliver(&gvk, &add("boom")).await {
            Outcome::Failed(FailureKind::Trap, _) => {}
            other => panic!("a panic after a refused allocation: {other:?}"),
        }
    }

    #[tokio::test]
    async fn init_panic_is_a_trap() {
        let mut i = probe_instance().await;
        match i.init(r#"{"initTrap":true}"#).await {
            Outcome::Failed(FailureKind::Trap, _) => {}
            other => panic!("{other:?}"),
        }
    }
}
