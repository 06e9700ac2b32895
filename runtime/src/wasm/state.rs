//! The data of one instance's store: a locked-down WASI context, the memory limiter, the
//! guest's view of the cache and the per-call deadline.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWrite;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::cache::access::Access;
use crate::guest::log_gate::LogGate;
use crate::model::grants::Limits;

/// Everything a plugin instance's host functions can reach.
pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// The plugin's name for log lines.
    pub(crate) plugin: Arc<str>,
    /// The resources the guest may read; replaced once `init` has declared its subscriptions.
    pub(crate) access: Arc<Access>,
    /// The most JSON one cache query may answer with.
    pub(crate) answer_budget: usize,
    /// The memory cap, for messages.
    pub(crate) memory: usize,
    /// Caps what the guest logs (shared by the plugin's instances).
    pub(crate) log_gate: Arc<LogGate>,
    /// The running time of the call in progress.
    pub(crate) clock: Arc<CallClock>,
    /// The wall time of the last call, from its start to its return: what the event loop
    /// reports and sizes batches by, measured by the two clock reads that bound the call.
    pub(crate) last_call: Duration,
    /// What a 0.2 instance's `client` and `queue` imports act on; `None` for 0.1.
    pub(crate) v0_2_imports: Option<Arc<crate::reconcile::context::InstanceImports>>,
}

/// Measures a guest call's own running time against its deadline: the time spent inside polls
/// of the call (the guest's code and the synchronous host functions it calls), not the time
/// between polls, when the call waits for a worker thread after yielding it (other plugins'
/// work on a busy machine) or waits on an asynchronous host call (a WASI sleep).
///
/// Atomics rather than a lock: it is written by the call's own polls and read by the epoch
/// callback on the same thread. Instants are [`Ticks`], nanoseconds of the monotonic clock as
/// one integer, so that a call that finishes in one poll costs the two clock reads that bound
/// it and a few integer operations, without `Instant` arithmetic.
#[derive(Debug)]
pub(crate) struct CallClock {
    /// The call's deadline in nanoseconds; [`NONE`] between calls.
    deadline: AtomicU64,
    /// Running time of the finished polls of this call, in nanoseconds.
    used: AtomicU64,
    /// When the poll in progress started; [`NONE`] between polls.
    polling_since: AtomicU64,
}

/// No deadline (between calls), or no poll in progress.
const NONE: u64 = u64::MAX;

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos())
        .unwrap_or(NONE - 1)
        .min(NONE - 1)
}

/// A reading of the monotonic clock (`CLOCK_MONOTONIC`, the clock `Instant` reads on Linux), in
/// nanoseconds since an unspecified start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ticks(u64);

impl Ticks {
    /// The clock now.
    pub(crate) fn now() -> Ticks {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on every Linux
        // (and `Instant::now` relies on it the same way).
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let subsec = u64::try_from(ts.tv_nsec).unwrap_or(0);
        Ticks(
            secs.saturating_mul(1_000_000_000)
                .saturating_add(subsec)
                .min(NONE - 1),
        )
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub(crate) fn since(self, earlier: Ticks) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Default for CallClock {
    fn default() -> Self {
        CallClock {
            deadline: AtomicU64::new(NONE),
            used: AtomicU64::new(0),
            polling_since: AtomicU64::new(NONE),
        }
    }
}

impl CallClock {
    /// Starts measuring a call that may run for `deadline`.
    pub(crate) fn start(&self, deadline: Duration) {
        self.used.store(0, Ordering::Relaxed);
        self.polling_since.store(NONE, Ordering::Relaxed);
        self.deadline.store(nanos(deadline), Ordering::Relaxed);
    }

    /// Stops measuring (between calls nothing is past its deadline).
    pub(crate) fn stop(&self) {
        self.deadline.store(NONE, Ordering::Relaxed);
        self.polling_since.store(NONE, Ordering::Relaxed);
        self.used.store(0, Ordering::Relaxed);
    }

    /// The call is being polled from `now`.
    pub(crate) fn resume(&self, now: Ticks) {
        self.polling_since.store(now.0, Ordering::Relaxed);
    }

    /// The poll that started at the last `resume` returned at `now`.
    ///
    /// Loads and stores rather than read-modify-writes: only the call's own task writes the
    /// clock (its polls, and `start` and `stop` around them); the epoch callback only reads.
    pub(crate) fn pause(&self, now: Ticks) {
        let since = self.polling_since.load(Ordering::Relaxed);
        self.polling_since.store(NONE, Ordering::Relaxed);
        if since != NONE {
            let polled = now.0.saturating_sub(since);
            let used = self.used.load(Ordering::Relaxed);
            self.used
                .store(used.saturating_add(polled), Ordering::Relaxed);
        }
    }

    /// The running time of the call so far.
    pub(crate) fn used(&self) -> Duration {
        let used = self.used.load(Ordering::Relaxed);
        let since = self.polling_since.load(Ordering::Relaxed);
        let polling = if since == NONE {
            0
        } else {
            Ticks::now().0.saturating_sub(since)
        };
        Duration::from_nanos(used.saturating_add(polling))
    }

    /// Whether the call has run for its whole deadline.
    pub(crate) fn exceeded(&self) -> bool {
        let deadline = self.deadline.load(Ordering::Relaxed);
        deadline != NONE && self.used() >= Duration::from_nanos(deadline)
    }
}

impl HostState {
    /// A state with no preopened directories, no sockets, no environment, stdin closed and
    /// stdout / stderr going to the log tagged with `plugin`.
    pub(crate) fn new(
        plugin: Arc<str>,
        limits: &Limits,
        access: Arc<Access>,
        log_gate: Arc<LogGate>,
    ) -> Self {
        let memory = limits.memory;
        let wasi = WasiCtx::builder()
            .stdout(GuestOutput {
                plugin: plugin.clone(),
                stream: "stdout",
                gate: log_gate.clone(),
            })
            .stderr(GuestOutput {
                plugin: plugin.clone(),
                stream: "stderr",
                gate: log_gate.clone(),
            })
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        HostState {
            wasi,
            table,
            limiter: MemoryLimiter::new(memory),
            plugin,
            access,
            answer_budget: limits.answer_budget(),
            log_gate,
            memory,
            clock: Arc::default(),
            last_call: Duration::ZERO,
            v0_2_imports: None,
        }
    }

    /// Whether the call in progress has run for its whole deadline.
    pub(crate) fn past_deadline(&self) -> bool {
        self.clock.exceeded()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The linear memory a plugin's live instances hold, in bytes: the handler instance's and each
/// reconcile worker's (and, during a restart, the old one's until it is dropped). Shared by
/// the plugin's instances like its log gate; read by its status and
/// `kubewasm_plugin_memory_bytes`. Host-side memory (the cache, wasmtime's own structures) is
/// not in it.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoryUse(Arc<AtomicUsize>);

impl MemoryUse {
    pub(crate) fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub(&self, bytes: usize) {
        // Never below zero, whatever the order of a drop and a concurrent read.
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(bytes))
            });
    }
}

/// Caps an instance's linear memory and remembers whether the guest hit the cap, so a trap that
/// follows (Rust aborts when an allocation fails) is reported as a memory fault. Counts what
/// its instance holds into the plugin's [`MemoryUse`], and takes it out again when dropped
/// with the store.
pub(crate) struct MemoryLimiter {
    max: usize,
    pub(crate) exceeded: bool,
    usage: MemoryUse,
    /// What this store's memories hold, as counted into `usage`.
    held: usize,
    /// The growth last allowed, taken back if wasmtime then fails to grow.
    allowed: usize,
}

/// Tables hold function references; a guest needing more than this is broken or hostile.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// The most WASI resources (streams, pollables) one instance may hold at once. A plugin has
/// no network and no files, so it holds a few; wasmtime's default of a million let a guest
/// calling `get-stdout` in a loop hold a million output streams, each a host task with a
/// line buffer of up to 8 KiB, none of it in its memory cap. Past it the call traps.
pub(crate) const MAX_RESOURCES: usize = 1024;

impl MemoryLimiter {
    fn new(max: usize) -> Self {
        MemoryLimiter {
            max,
            exceeded: false,
            usage: MemoryUse::default(),
            held: 0,
            allowed: 0,
        }
    }

    /// The plugin's memory use this instance counts into.
    pub(crate) fn usage(&self) -> MemoryUse {
        self.usage.clone()
    }

    /// Counts this instance into `usage` (the plugin's) from now on, moving what it holds.
    pub(crate) fn count_into(&mut self, usage: MemoryUse) {
        self.usage.sub(self.held);
        usage.add(self.held);
        self.usage = usage;
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.usage.sub(self.held);
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    /// Called for a memory's creation too (`current` 0), so `held` counts every byte.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max {
            self.exceeded = true;
            return Ok(false);
        }
        self.allowed = desired.saturating_sub(current);
        self.held += self.allowed;
        self.usage.add(self.allowed);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.held = self.held.saturating_sub(self.allowed);
        self.usage.sub(self.allowed);
        self.allowed = 0;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// A guest's stdout or stderr: every line becomes a tracing event tagged with the plugin.
struct GuestOutput {
    plugin: Arc<str>,
    stream: &'static str,
    gate: Arc<LogGate>,
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineLogger {
            plugin: self.plugin.clone(),
            stream: self.stream,
            buf: Vec::new(),
            gate: self.gate.clone(),
        })
    }
}

/// Longest line kept before it is logged unfinished, so a guest cannot grow host memory by
/// never writing a newline.
const MAX_LINE: usize = 8 << 10;

struct LineLogger {
    plugin: Arc<str>,
    stream: &'static str,
    buf: Vec<u8>,
    gate: Arc<LogGate>,
}

impl LineLogger {
    fn emit(&mut self, end: usize) {
        let line = String::from_utf8_lossy(&self.buf[..end]);
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(line) = self.gate.admit(&self.plugin, line) {
            tracing::info!(target: "kubewasm::guest", plugin = %self.plugin, name = self.gate.declared_name(), stream = self.stream, "{line}");
        }
        self.buf.drain(..end);
    }
}

impl AsyncWrite for LineLogger {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.buf.extend_from_slice(data);
        while let Some(pos) = this.buf.iter().position(|b| *b == b'\n') {
            this.emit(pos + 1);
        }
        if this.buf.len() >= MAX_LINE {
            this.emit(this.buf.len());
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.buf.is_empty() {
            this.emit(this.buf.len());
        }
        Poll::Ready(Ok(()))
    }
}

impl HostState {
    /// One line the guest logged through the `log` import (of either contract), through the
    /// plugin's log cap, tagged with the plugin's key and declared name.
    pub(crate) fn guest_log(&self, level: tracing::Level, message: &str) {
        let plugin = &*self.plugin;
        let name = self.log_gate.declared_name();
        let Some(message) = self.log_gate.admit(plugin, message) else {
            return;
        };
        match level {
            tracing::Level::TRACE => {
                tracing::trace!(target: "kubewasm::guest", plugin, name, "{message}")
            }
            tracing::Level::DEBUG => {
                tracing::debug!(target: "kubewasm::guest", plugin, name, "{message}")
            }
            tracing::Level::INFO => {
                tracing::info!(target: "kubewasm::guest", plugin, name, "{message}")
            }
            tracing::Level::WARN => {
                tracing::warn!(target: "kubewasm::guest", plugin, name, "{message}")
            }
            tracing::Level::ERROR => {
                tracing::error!(target: "kubewasm::guest", plugin, name, "{message}")
            }
        }
    }
}

/// Implements a contract's `log` import (`$log`, its generated module) on [`HostState`]: its
/// levels mapped onto tracing's, each line through the plugin's log cap.
macro_rules! log_import {
    ($log:ident) => {
        impl $log::Host for HostState {
            fn log(&mut self, level: $log::Level, message: String) {
                let level = match level {
                    $log::Level::Trace => tracing::Level::TRACE,
                    $log::Level::Debug => tracing::Level::DEBUG,
                    $log::Level::Info => tracing::Level::INFO,
                    $log::Level::Warn => tracing::Level::WARN,
                    $log::Level::Error => tracing::Level::ERROR,
                };
                self.guest_log(level, &message);
            }
        }
    };
}
pub(crate) use log_import;

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter;

    use super::*;

    /// `get-stdout` as WASI links it: each call adds a stream to the instance's table, and
    /// past [`MAX_RESOURCES`] the call fails (a trap for the guest) instead of growing the host.
    #[tokio::test]
    async fn an_instance_holds_at_most_its_resource_cap_of_streams() {
        use wasmtime_wasi::cli::WasiCliView;
        use wasmtime_wasi::p2::bindings::cli::stdout::Host as _;

        let mut state = HostState::new(
            "hoarder".into(),
            &Limits::default(),
            Arc::new(Access::empty(crate::model::grants::Grants::default())),
            Arc::new(LogGate::new(crate::guest::log_gate::LogLimits::default())),
        );
        let mut held = Vec::new();
        for _ in 0..MAX_RESOURCES {
            held.push(state.cli().get_stdout().expect("within the cap"));
        }
        let refused = state.cli().get_stdout().expect_err("past the cap");
        assert!(
            format!("{refused:#}").contains("no free keys"),
            "{refused:#}"
        );
        drop(held);
    }

    #[test]
    fn memory_limiter_refuses_growth_past_the_cap_and_remembers_it() {
        let mut l = MemoryLimiter::new(1 << 20);
        assert!(l.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!l.exceeded);
        assert!(!l.memory_growing(1 << 20, (1 << 20) + 65536, None).unwrap());
        assert!(l.exceeded);
    }

    #[test]
    fn memory_use_counts_what_each_instance_holds_until_it_is_dropped() {
        let plugin = MemoryUse::default();
        let mut a = MemoryLimiter::new(1 << 30);
        a.memory_growing(0, 1 << 20, None).unwrap();
        a.count_into(plugin.clone());
        assert_eq!(plugin.bytes(), 1 << 20, "the creation is moved over");
        a.memory_growing(1 << 20, 3 << 20, None).unwrap();
        let mut b = MemoryLimiter::new(1 << 30);
        b.count_into(plugin.clone());
        b.memory_growing(0, 1 << 16, None).unwrap();
        assert_eq!(plugin.bytes(), (3 << 20) + (1 << 16));
        // Allowed, then failed in wasmtime: not held.
        b.memory_growing(1 << 16, 1 << 29, None).unwrap();
        b.memory_grow_failed(wasmtime::Error::msg("no memory"))
            .unwrap();
        assert_eq!(plugin.bytes(), (3 << 20) + (1 << 16));
        // Refused past the cap: not held either.
        assert!(!b.memory_growing(1 << 16, 1 << 31, None).unwrap());
        drop(a);
        assert_eq!(plugin.bytes(), 1 << 16);
        drop(b);
        assert_eq!(plugin.bytes(), 0);
    }

    #[test]
    fn the_call_clock_counts_polls_not_the_waits_between_them() {
        let clock = CallClock::default();
        assert!(!clock.exceeded(), "no call, no deadline");
        clock.start(Duration::from_millis(30));
        clock.resume(Ticks::now());
        std::thread::sleep(Duration::from_millis(10));
        clock.pause(Ticks::now());
        // Waiting to be polled again does not count.
        std::thread::sleep(Duration::from_millis(40));
        assert!(!clock.exceeded());
        let used = clock.used();
        assert!(
            used >= Duration::from_millis(10) && used < Duration::from_millis(40),
            "{used:?}"
        );
        clock.resume(Ticks::now());
        std::thread::sleep(Duration::from_millis(25));
        assert!(clock.exceeded());
        clock.stop();
        assert!(!clock.exceeded());
    }

    #[test]
    fn ticks_measure_what_instant_measures() {
        use std::time::Instant;
        // Each tick read between two instant reads: the same clock, so the ticks' interval
        // lies between the inner and the outer instants' whatever the scheduler does between
        // the reads.
        let (first, ticks, second) = (Instant::now(), Ticks::now(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
        let (third, end, fourth) = (Instant::now(), Ticks::now(), Instant::now());
        let by_ticks = end.since(ticks);
        assert!(by_ticks >= Duration::from_millis(20), "{by_ticks:?}");
        let (inner, outer) = (third - second, fourth - first);
        assert!(
            inner <= by_ticks && by_ticks <= outer,
            "ticks {by_ticks:?}, instants {inner:?} to {outer:?}"
        );
        assert_eq!(ticks.since(Ticks::now()), Duration::ZERO, "never negative");
    }

    #[test]
    fn line_logger_keeps_partial_lines_until_the_newline() {
        let mut l = LineLogger {
            plugin: "p".into(),
            stream: "stdout",
            buf: Vec::new(),
            gate: Arc::new(LogGate::new(Default::default())),
        };
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let _ = Pin::new(&mut l).poll_write(&mut cx, b"hello ");
        assert_eq!(l.buf, b"hello ");
        let _ = Pin::new(&mut l).poll_write(&mut cx, b"world\nnext");
        assert_eq!(l.buf, b"next");
    }
}
