//! One guest instance of any contract version: its store, the `init`, handler and reconcile
//! calls under a deadline (events lowered as the guest's contract takes them), and the
//! classification of faults (trap, timeout, memory).

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use wasmtime::component::TypedFunc;
use wasmtime::{Store, UpdateDeadline};

use crate::cache::access::Access;
use crate::contracts::Controller;
use crate::contracts::kubewasm::controller::types as v0_1_types;
use crate::contracts::v0_2::exports::kubewasm::controller::reconcile::Action;
use crate::contracts::v0_2::kubewasm::controller::types as wit;
use crate::contracts::v0_2::{HandlerExports, PluginExport, PluginExports};
use crate::contracts::v0_2_1::exports::kubewasm::controller0_2_1::batch_handler as batch;
use crate::error::PluginError;
use crate::events::batch::{EventBatch, lower_batch};
use crate::events::inbox::{Event, Queued};
use crate::guest::calls::Outcome;
use crate::guest::log_gate::LogGate;
use crate::model::declared::{Gvk, PluginInfo};
use crate::model::grants::Limits;
use crate::observer::FailureKind;
use crate::reconcile::context::{Context, InstanceImports};
use crate::wasm::component::{CompiledPlugin, Linked};
use crate::wasm::engine::CallInFlight;
use crate::wasm::state::{CallClock, HostState, MemoryUse, Ticks};

/// Raised from the epoch callback when a call runs past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("call exceeded its deadline")]
struct DeadlineExceeded;

/// How many times its deadline a call may take in wall time, waiting in host calls included.
pub(crate) const WALL_LIMIT_FACTOR: u32 = 10;

fn wall_limit(deadline: Duration) -> Duration {
    deadline.saturating_mul(WALL_LIMIT_FACTOR)
}

/// `call`, with the time spent in each of its polls added to `clock`, the first poll counted
/// from `started`; answers when the last poll returned.
async fn timed<F: std::future::Future>(
    clock: &CallClock,
    started: Ticks,
    call: F,
) -> (F::Output, Ticks) {
    let mut call = std::pin::pin!(call);
    let mut first = Some(started);
    std::future::poll_fn(|cx| {
        clock.resume(first.take().unwrap_or_else(Ticks::now));
        let poll = call.as_mut().poll(cx);
        let now = Ticks::now();
        clock.pause(now);
        poll.map(|output| (output, now))
    })
    .await
}

/// One event to a guest that takes one per call (a 0.1 `handler`, called with the resource
/// type of its subscription; a 0.2.0 `handler`, with the subscription handle).
macro_rules! deliver_one {
    ($store:expr, $clock:expr, $deadline:expr, $excused:expr, $h:expr, $subscription:expr, $event:expr) => {{
        let (store, clock, deadline, excused, h, subscription) =
            ($store, $clock, $deadline, $excused, $h, $subscription);
        match $event {
            Event::Add {
                object,
                in_initial_list,
            } => {
                guarded_with(store, clock, deadline, excused, async |s| {
                    h.call_on_add(s, subscription, object.json(), *in_initial_list)
                        .await
                })
                .await
            }
            Event::Update { old, new } => {
                guarded_with(store, clock, deadline, excused, async |s| {
                    h.call_on_update(s, subscription, old.json(), new.json())
                        .await
                })
                .await
            }
            Event::Delete {
                object,
                final_state_unknown,
            } => {
                guarded_with(store, clock, deadline, excused, async |s| {
                    h.call_on_delete(s, subscription, object.json(), *final_state_unknown)
                        .await
                })
                .await
            }
        }
    }};
}

/// What a component of each contract version exports, as the host calls it.
enum Exports {
    /// 0.1: `init` and the three handlers, each called with the event's resource type.
    V0_1(Controller),
    /// 0.2.0 and 0.2.1: `init`, handlers (one event per call, or batches) and `reconcile`,
    /// each as the component's world has them.
    V0_2(PluginExports),
}

/// What a guest's `init` declared, in the terms of its contract version.
#[derive(Debug)]
pub(crate) enum Declaration {
    V0_1(PluginInfo),
    /// 0.2.0's or 0.2.2's, with the predicates of its queue rules.
    V0_2(crate::reconcile::predicates::Declaration),
}

impl Declaration {
    /// The resource type of each subscription, by handle.
    fn resources(&self) -> Vec<Gvk> {
        match self {
            Declaration::V0_1(info) => info.subscriptions.iter().map(|s| s.gvk.clone()).collect(),
            Declaration::V0_2(declared) => subscribed(&declared.info),
        }
    }
}

/// The resource type of each subscription a 0.2 declaration makes, by handle.
pub(crate) fn subscribed(info: &wit::PluginInfo) -> Vec<Gvk> {
    info.subscriptions
        .iter()
        .map(|s| Gvk {
            group: s.gvk.group.clone(),
            version: s.gvk.version.clone(),
            kind: s.gvk.kind.clone(),
        })
        .collect()
}

/// A live guest instance of any contract version. Calls take `&mut self`: one at a time.
///
/// Events are lowered per contract: a 0.1 or 0.2.0 guest takes one event per call
/// ([`deliver`](Self::deliver)), a 0.2.1 `batch-handler` guest takes them in batches
/// ([`deliver_batch`](Self::deliver_batch), and one event as a batch of one).
pub(crate) struct Instance {
    store: Store<HostState>,
    exports: Exports,
    deadline: Duration,
    /// The resource type of each subscription its `init` declared.
    resources: Vec<Gvk>,
    /// The same as the 0.1 handlers take it (empty for 0.2), converted once.
    v0_1_resources: Vec<v0_1_types::Gvk>,
    /// The event numbers of the batch being delivered, kept between batches.
    words: Vec<u32>,
    /// `on-events` of a `batch-handler` guest, type-checked against [`EventBatch`] (which
    /// borrows the cache's objects, where the generated bindings' batch owns a copy).
    on_events: Option<OnEvents>,
    /// The store's call clock, held here too so a call borrows it instead of counting a
    /// reference to it (two atomic operations a call).
    clock: Arc<CallClock>,
    /// The store's 0.2 imports once connected, held here for the same reason: each call
    /// resets and reads their API waits.
    imports: Option<Arc<InstanceImports>>,
}

/// `on-events` as the host calls it.
type OnEvents = TypedFunc<(EventBatch<'static>,), (Vec<batch::EventError>,)>;

impl Instance {
    /// Instantiates the component in a fresh store with `limits` applied (a 0.2 instance's
    /// imports not yet connected: its `init` may only read and log).
    pub(crate) async fn new(
        compiled: &CompiledPlugin,
        label: Arc<str>,
        limits: Limits,
        access: Arc<Access>,
        log_gate: Arc<LogGate>,
    ) -> Result<Self, PluginError> {
        let deadline = limits.call_deadline;
        // The same for either contract's linking: a fresh store, instantiated under the deadline.
        macro_rules! instantiate {
            ($pre:expr, $exports:path) => {{
                let mut store = new_store($pre.engine(), label, &limits, access, log_gate);
                let outcome = guarded(
                    &mut store,
                    deadline,
                    || Duration::ZERO,
                    async |s| $pre.instantiate_async(s).await.map(Ok),
                )
                .await;
                outcome.map(|b| (store, $exports(b)))
            }};
        }
        let instantiated = match &*compiled.pre {
            Linked::V0_1(pre) => instantiate!(pre, Exports::V0_1),
            Linked::V0_2(pre) => instantiate!(pre, Exports::V0_2),
        };
        match instantiated {
            Outcome::Ok((store, exports)) => {
                let on_events = match &exports {
                    Exports::V0_2(PluginExports {
                        handler: Some(HandlerExports::Batch(h)),
                        ..
                    }) => Some(h.func_on_events().func().typed(&store).map_err(|e| {
                        PluginError::Instantiate {
                            file: compiled.file.clone(),
                            reason: format!("on-events: {e:#}"),
                        }
                    })?),
                    _ => None,
                };
                Ok(Instance {
                    clock: store.data().clock.clone(),
                    imports: None,
                    store,
                    exports,
                    deadline,
                    resources: Vec::new(),
                    v0_1_resources: Vec::new(),
                    words: Vec::new(),
                    on_events,
                })
            }
            Outcome::Failed(FailureKind::Timeout, _) => Err(PluginError::Instantiate {
                file: compiled.file.clone(),
                reason: format!("took longer than {deadline:?}"),
            }),
            Outcome::GuestError(reason) | Outcome::Failed(_, reason) => {
                Err(PluginError::Instantiate {
                    file: compiled.file.clone(),
                    reason,
                })
            }
        }
    }

    /// A fresh instance of `recipe`: instantiated, initialised and (0.2) connected.
    pub(crate) async fn start(recipe: &Recipe) -> Result<Self, String> {
        let mut instance = Instance::new(
            &recipe.compiled,
            recipe.name.clone(),
            recipe.limits,
            recipe.access.clone(),
            recipe.log_gate.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        instance
            .store
            .data_mut()
            .limiter
            .count_into(recipe.memory.clone());
        match instance.init(&recipe.config).await {
            Outcome::Ok(_) => {}
            Outcome::GuestError(reason) => return Err(format!("init failed: {reason}")),
            Outcome::Failed(kind, reason) => {
                return Err(format!("init {}: {reason}", kind.as_str()));
            }
        }
        if let Exports::V0_2(_) = instance.exports {
            let Some(context) = &recipe.context else {
                return Err("a 0.2 instance needs its plugin's context".into());
            };
            instance.connect(context.clone());
        }
        Ok(instance)
    }

    /// Gives the guest its view of the cache.
    pub(crate) fn set_access(&mut self, access: Arc<Access>) {
        self.store.data_mut().access = access;
    }

    /// The cap on what the guest logs (shared with the plugin's later instances).
    pub(crate) fn log_gate(&self) -> Arc<LogGate> {
        self.store.data().log_gate.clone()
    }

    /// The plugin's linear memory in use, which this instance counts into (shared with the
    /// plugin's later instances through its [`Recipe`]).
    pub(crate) fn memory_use(&self) -> MemoryUse {
        self.store.data().limiter.usage()
    }

    /// The resource type of each subscription its `init` declared, by handle.
    pub(crate) fn resources(&self) -> &[Gvk] {
        &self.resources
    }

    /// Why the host refused a write of the last call, if it refused one.
    pub(crate) fn refused(&self) -> Option<crate::client::Refusal> {
        self.store
            .data()
            .v0_2_imports
            .as_ref()
            .and_then(|i| i.refused())
    }

    /// Connects a 0.2 instance to its plugin's queue, client and recorder, with the resource
    /// type of each subscription handle its `init` returned.
    pub(crate) fn connect(&mut self, plugin: Arc<Context>) {
        let imports = Arc::new(InstanceImports::new(plugin, self.resources.clone()));
        self.imports = Some(imports.clone());
        self.store.data_mut().v0_2_imports = Some(imports);
    }

    /// Calls the guest's `init`.
    pub(crate) async fn init(&mut self, config: &str) -> Outcome<Declaration> {
        let deadline = self.deadline;
        let outcome = match &self.exports {
            Exports::V0_1(b) => {
                let h = b.kubewasm_controller_handler().clone();
                let outcome = guarded(
                    &mut self.store,
                    deadline,
                    || Duration::ZERO,
                    async |s| h.call_init(s, config).await,
                )
                .await;
                if let Outcome::Ok(info) = &outcome {
                    self.v0_1_resources =
                        info.subscriptions.iter().map(|s| s.gvk.clone()).collect();
                }
                outcome.map(|info| Declaration::V0_1(info.into()))
            }
            Exports::V0_2(b) => match b.plugin.clone() {
                PluginExport::V0_2_0(p) => guarded(
                    &mut self.store,
                    deadline,
                    || Duration::ZERO,
                    async |s| p.call_init(s, config).await,
                )
                .await
                .map(|info| Declaration::V0_2(info.into())),
                PluginExport::V0_2_2(p) => guarded(
                    &mut self.store,
                    deadline,
                    || Duration::ZERO,
                    async |s| p.call_init(s, config).await,
                )
                .await
                .map(|info| Declaration::V0_2(info.into())),
            },
        };
        if let Outcome::Ok(declared) = &outcome {
            self.resources = declared.resources();
        }
        outcome
    }

    /// The wall time of the last [`deliver`](Self::deliver) or
    /// [`deliver_batch`](Self::deliver_batch) call into the guest (zero if it made none).
    pub(crate) fn last_call(&self) -> Duration {
        self.store.data().last_call
    }

    /// Whether the guest takes events in batches (`batch-handler`, 0.2.1).
    pub(crate) fn takes_batches(&self) -> bool {
        matches!(
            &self.exports,
            Exports::V0_2(PluginExports {
                handler: Some(HandlerExports::Batch(_)),
                ..
            })
        )
    }

    /// Starts counting the API waits the next call's wall limit excuses from zero (none for
    /// a 0.1 instance, which cannot call the API server).
    fn reset_api_waits(&self) {
        if let Some(i) = &self.imports {
            i.reset_waited();
        }
    }

    /// Delivers one event: a handler call of the guest's contract (a `batch-handler` guest
    /// gets a batch of one). Time the call waits for the API server does not count toward
    /// its deadline.
    pub(crate) async fn deliver(&mut self, queued: &Queued) -> Outcome<()> {
        self.store.data_mut().last_call = Duration::ZERO;
        let handler = match &self.exports {
            Exports::V0_1(b) => {
                let Some(resource) = self.v0_1_resources.get(queued.subscription) else {
                    return Outcome::GuestError(format!(
                        "the guest declared no subscription {}",
                        queued.subscription
                    ));
                };
                let h = b.kubewasm_controller_handler().clone();
                return deliver_one!(
                    &mut self.store,
                    &self.clock,
                    self.deadline,
                    || Duration::ZERO,
                    &h,
                    resource,
                    &queued.event
                );
            }
            Exports::V0_2(b) => b.handler.clone(),
        };
        match handler {
            Some(HandlerExports::Single(h)) => {
                let Ok(handle) = u32::try_from(queued.subscription) else {
                    return Outcome::GuestError("a subscription handle over u32".into());
                };
                self.reset_api_waits();
                let imports = &self.imports;
                let excused = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
                deliver_one!(
                    &mut self.store,
                    &self.clock,
                    self.deadline,
                    excused,
                    &h,
                    handle,
                    &queued.event
                )
            }
            Some(HandlerExports::Batch(_)) => {
                match self.deliver_batch(std::slice::from_ref(queued)).await {
                    Outcome::Ok(failed) => match failed.into_iter().next() {
                        Some((_, reason)) => Outcome::GuestError(reason),
                        None => Outcome::Ok(()),
                    },
                    Outcome::GuestError(reason) => Outcome::GuestError(reason),
                    Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
                }
            }
            None => Outcome::GuestError("the component exports no event handlers".into()),
        }
    }

    /// Calls the guest's `on-events` with `events`, in one call under one deadline; answers
    /// the events the guest failed, by position, with its reason.
    pub(crate) async fn deliver_batch(
        &mut self,
        events: &[Queued],
    ) -> Outcome<Vec<(usize, String)>> {
        self.store.data_mut().last_call = Duration::ZERO;
        let Some(on_events) = self.on_events else {
            return Outcome::GuestError("the component exports no `batch-handler`".into());
        };
        let mut words = std::mem::take(&mut self.words);
        let documents = match lower_batch(events, &mut words) {
            Ok(documents) => documents,
            Err(reason) => {
                self.words = words;
                return Outcome::GuestError(reason);
            }
        };
        let batch = EventBatch {
            documents,
            events: &words,
        };
        // SAFETY: `typed` checked this signature against the component's `on-events` when
        // the instance was made; only the lifetime of the batch's borrows differs.
        let on_events = unsafe {
            TypedFunc::<(EventBatch<'_>,), (Vec<batch::EventError>,)>::new_unchecked(
                *on_events.func(),
            )
        };
        let deadline = self.deadline;
        self.reset_api_waits();
        let imports = &self.imports;
        let api_waited = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
        let answered = guarded_with(
            &mut self.store,
            &self.clock,
            deadline,
            api_waited,
            async |s| {
                on_events
                    .call_async(s, (batch,))
                    .await
                    .map(|(errors,)| Ok(errors))
            },
        )
        .await;
        self.words = words;
        match answered {
            Outcome::Ok(errors) => {
                let mut failed = Vec::with_capacity(errors.len());
                for e in errors {
                    match usize::try_from(e.index) {
                        Ok(i) if i < events.len() => failed.push((i, e.reason)),
                        _ => {
                            return Outcome::Failed(
                                FailureKind::Trap,
                                format!(
                                    "on-events answered an error for event {} of a batch of {}",
                                    e.index,
                                    events.len()
                                ),
                            );
                        }
                    }
                }
                Outcome::Ok(failed)
            }
            Outcome::GuestError(reason) => Outcome::GuestError(reason),
            Outcome::Failed(kind, reason) => Outcome::Failed(kind, reason),
        }
    }

    /// Calls the guest's `reconcile`. Time the call waits for the API server does not count
    /// toward its deadline.
    pub(crate) async fn reconcile(&mut self, key: &wit::Key) -> Outcome<Action> {
        let Exports::V0_2(PluginExports {
            reconcile: Some(r), ..
        }) = &self.exports
        else {
            return Outcome::GuestError("the component exports no `reconcile`".into());
        };
        let r = r.clone();
        self.reset_api_waits();
        let imports = &self.imports;
        let excused = || imports.as_ref().map_or(Duration::ZERO, |i| i.waited());
        guarded_with(
            &mut self.store,
            &self.clock,
            self.deadline,
            excused,
            async |s| r.call_reconcile(s, key).await,
        )
        .await
    }
}

/// What every instance of one plugin version is made from (a fresh one after a fault).
#[derive(Clone)]
pub(crate) struct Recipe {
    pub(crate) compiled: CompiledPlugin,
    /// The plugin's name, which its instances' log lines carry.
    pub(crate) name: Arc<str>,
    /// The config string its `init` is given.
    pub(crate) config: String,
    pub(crate) limits: Limits,
    pub(crate) access: Arc<Access>,
    /// The plugin's log cap, shared by every instance.
    pub(crate) log_gate: Arc<LogGate>,
    /// The plugin's linear memory in use, counted by every instance.
    pub(crate) memory: MemoryUse,
    /// A 0.2 plugin's queue, client and counters, which its instances' imports use (`None`
    /// for 0.1).
    pub(crate) context: Option<Arc<Context>>,
}

/// The most of a guest's error message kept in the log and the plugin's status.
const MAX_REASON: usize = 1024;

/// A guest's error reason as the log and the plugin's status show it: cut to [`MAX_REASON`]
/// bytes and [`escaped`](super::escape::escaped), so it stays one line of the log.
pub(crate) fn shown(reason: &str) -> std::borrow::Cow<'_, str> {
    crate::guest::escape::escaped(cut(reason))
}

/// `reason` cut to [`MAX_REASON`] bytes (at a character boundary).
pub(crate) fn cut(reason: &str) -> &str {
    if reason.len() <= MAX_REASON {
        return reason;
    }
    let mut end = MAX_REASON;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
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
    let clock = store.data().clock.clone();
    guarded_with(store, &clock, deadline, excused, call).await
}

/// [`guarded`], with the store's call clock (`clock`, the one in its [`HostState`]) handed in
/// by a caller that holds it.
async fn guarded_with<T, F>(
    store: &mut Store<HostState>,
    clock: &CallClock,
    deadline: Duration,
    excused: impl Fn() -> Duration,
    call: F,
) -> Outcome<T>
where
    F: AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<Result<T, String>>,
{
    debug_assert!(std::ptr::eq(clock, &*store.data().clock));
    let started = Ticks::now();
    // A refused growth in an earlier call that the guest survived says nothing about
    // how this one ends.
    store.data_mut().limiter.exceeded = false;
    clock.start(deadline);
    let _in_flight = CallInFlight::start();
    store.set_epoch_deadline(1);
    let (result, ended) = {
        let mut call = std::pin::pin!(timed(clock, started, call(store)));
        // Most calls finish in their first poll: only arm a timer for those that wait.
        match futures::poll!(call.as_mut()) {
            Poll::Ready((r, ended)) => (Some(r), ended),
            Poll::Pending => loop {
                // Wall time not excused: waits for the API server are, also while they last,
                // so an API call ends at its own timeout rather than at this limit.
                let unexcused = Ticks::now().since(started).saturating_sub(excused());
                let remaining = wall_limit(deadline).saturating_sub(unexcused);
                if remaining.is_zero() {
                    break (None, Ticks::now());
                }
                // While an API call is in progress the remaining time does not shrink: look
                // again no more often than every tick.
                let wait = remaining.max(crate::wasm::engine::EPOCH_TICK);
                if let Ok((r, ended)) = tokio::time::timeout(wait, call.as_mut()).await {
                    break (Some(r), ended);
                }
            },
        }
    };
    clock.stop();
    store.data_mut().last_call = ended.since(started);
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

    use super::*;
    use crate::model::grants::Grants;
    use crate::testing::{config_map, engine};

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
            Outcome::Ok(Declaration::V0_1(info)) => {
                assert_eq!(info.name, "x");
                assert_eq!(info.subscriptions.len(), 1);
                assert_eq!(info.subscriptions[0].gvk.kind, "Deployment");
                assert_eq!(info.subscriptions[0].namespace.as_deref(), Some("ns"));
                assert_eq!(
                    info.subscriptions[0].delivery,
                    crate::model::declared::Delivery::CacheOnly
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
        let config = r#"{"name":"survivor","mode":"try-alloc","trapOn":"boom","subscriptions":[{"group":"","version":"v1","kind":"ConfigMap"}]}"#;
        assert!(matches!(i.init(config).await, Outcome::Ok(_)));
        let add = |name: &str| Queued {
            generation: 0,
            subscription: 0,
            event: Event::Add {
                object: config_map("a", name, 1, &[]),
                in_initial_list: false,
            },
        };
        // The guest asks for 1 GiB, is refused, and carries on.
        match i.deliver(&add("greedy")).await {
            Outcome::Ok(()) => {}
            other => panic!("{other:?}"),
        }
        assert!(
            kubewasm_tests::guest_logs()
                .lines("survivor")
                .contains(&"TRYALLOC refused".to_owned())
        );
        match i.deliver(&add("boom")).await {
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
