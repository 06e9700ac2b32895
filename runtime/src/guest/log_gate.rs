//! The per-plugin cap on guest log output: lines per second (a token bucket shared by all of
//! a plugin's instances, so a restart does not refill it) and bytes per line, with what was
//! dropped or cut counted and reported; every admitted line escaped (one record is one line).
//! Also the per-plugin limit on the host's own lines about the guest's errors (handler and
//! reconcile errors, whose number the guest decides): one a second, the rest counted.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::guest::escape::escaped;
use crate::guest::notices::Notices;
use crate::observer::PluginObserver;

/// How much a plugin may log: with the defaults, a plugin that logs a line per event keeps
/// every line of a 10,000-object replay, and one that floods the log passes at most about
/// 8 MB per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// Lines per second, through the `log` import, stdout and stderr together, once a burst
    /// is used up. More are dropped and counted.
    pub lines_per_second: u32,
    /// Lines that may come at once (the bucket's size; at least `lines_per_second`).
    pub burst_lines: u32,
    /// Longest line kept, in bytes; a longer one is cut and counted.
    pub line_bytes: usize,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            lines_per_second: 1000,
            burst_lines: 10_000,
            line_bytes: 8 << 10,
        }
    }
}

impl LogLimits {
    fn capacity(&self) -> f64 {
        f64::from(self.burst_lines.max(self.lines_per_second))
    }
}

/// Admits a plugin's log lines within its [`LogLimits`].
pub(crate) struct LogGate {
    limits: LogLimits,
    bucket: Mutex<Bucket>,
    observer: OnceLock<Arc<dyn PluginObserver>>,
    declared: OnceLock<Arc<str>>,
    tap: Option<LogTap>,
    /// Which of the plugin's handler errors, and which of its reconcile errors, reach the
    /// log: one budget each, so a flood of one kind never hides the other.
    handler_errors: Notices,
    reconcile_errors: Notices,
}

/// Where a guest error a host line reports came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuestErrors {
    /// A handler (`on-add`, `on-events`, ...) answered `err`.
    Handler,
    /// A reconcile answered `err`.
    Reconcile,
}

/// One line a plugin logged (through the `log` import, stdout or stderr), as admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedLine {
    /// The plugin's key (its file's name without `.wasm`).
    pub plugin: Arc<str>,
    pub line: String,
}

/// Keeps the lines every plugin logged, whatever the process's log filter, for `kubewasm
/// test`'s `logged` assert (observers act only by logging). Holds the newest lines up to
/// [`LogTap::MAX_BYTES`]; each line has a number, counted from the first, so a reader can ask
/// for the lines after the ones it saw.
#[derive(Clone, Default)]
pub struct LogTap {
    kept: Arc<Mutex<Kept>>,
}

impl std::fmt::Debug for LogTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogTap")
            .field("next", &self.next())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Kept {
    lines: VecDeque<LoggedLine>,
    /// The number of `lines[0]`.
    first: u64,
    bytes: usize,
}

impl LogTap {
    /// How many bytes of lines are kept: a plugin flooding its log cannot grow the host.
    pub const MAX_BYTES: usize = 32 << 20;

    fn push(&self, plugin: &str, line: &str) {
        let mut kept = self.kept.lock();
        kept.bytes += line.len() + plugin.len();
        kept.lines.push_back(LoggedLine {
            plugin: plugin.into(),
            line: line.to_owned(),
        });
        while kept.bytes > Self::MAX_BYTES {
            let Some(old) = kept.lines.pop_front() else {
                break;
            };
            kept.bytes -= old.line.len() + old.plugin.len();
            kept.first += 1;
        }
    }

    /// The number the next line will get.
    pub fn next(&self) -> u64 {
        let kept = self.kept.lock();
        kept.first + kept.lines.len() as u64
    }

    /// The kept lines numbered `from` on, oldest first.
    pub fn since(&self, from: u64) -> Vec<LoggedLine> {
        let kept = self.kept.lock();
        let skip = usize::try_from(from.saturating_sub(kept.first)).unwrap_or(usize::MAX);
        kept.lines.iter().skip(skip).cloned().collect()
    }
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
    /// Lines dropped since the last notice.
    dropped: u64,
    noticed: Instant,
}

/// How often, at most, the host logs that a plugin's lines were dropped.
const NOTICE_EVERY: Duration = Duration::from_secs(1);

impl LogGate {
    pub(crate) fn new(limits: LogLimits) -> Self {
        LogGate {
            limits,
            bucket: Mutex::new(Bucket {
                tokens: limits.capacity(),
                refilled: Instant::now(),
                dropped: 0,
                noticed: Instant::now(),
            }),
            observer: OnceLock::new(),
            declared: OnceLock::new(),
            tap: None,
            handler_errors: Notices::default(),
            reconcile_errors: Notices::default(),
        }
    }

    /// The gate that also hands every admitted line to `tap`.
    pub(crate) fn tapped(limits: LogLimits, tap: Option<LogTap>) -> Self {
        LogGate {
            tap,
            ..LogGate::new(limits)
        }
    }

    /// The name the plugin's `init` declared (checked: no control characters, bounded), which
    /// its guest lines carry as `name` beside the key they are logged under.
    pub(crate) fn set_declared_name(&self, name: &str) {
        let _ = self.declared.set(name.into());
    }

    /// The declared name, empty before `init` returned.
    pub(crate) fn declared_name(&self) -> &str {
        self.declared.get().map_or("", |n| n)
    }

    /// Where drops are counted from now on (the plugin's metric handles, made once its name
    /// is known).
    pub(crate) fn set_observer(&self, observer: Arc<dyn PluginObserver>) {
        let _ = self.observer.set(observer);
    }

    fn count(&self, n: u64) {
        if let Some(o) = self.observer.get() {
            o.log_dropped(n);
        }
    }

    /// Whether the host logs a line about a guest error of `source` now: `Some(n)`, `n` the
    /// error lines of that source kept out of the log since the last one logged, at most once
    /// a second for all of the plugin's handlers, and once a second for all of its reconcile
    /// workers; `None` when it stays out (counted as
    /// `kubewasm_plugin_error_lines_suppressed_total`). The error itself is counted and
    /// recorded in the status by the caller either way.
    pub(crate) fn admit_error(&self, source: GuestErrors) -> Option<u64> {
        let notices = match source {
            GuestErrors::Handler => &self.handler_errors,
            GuestErrors::Reconcile => &self.reconcile_errors,
        };
        let admitted = notices.admit(tokio::time::Instant::now());
        if admitted.is_none()
            && let Some(o) = self.observer.get()
        {
            o.errors_unlogged(1);
        }
        admitted
    }

    /// The line to log (cut to the length limit and [`escaped`]), or `None` when the plugin is
    /// over its rate.
    /// `plugin` names it in the notice that lines were dropped, logged at most once a second.
    pub(crate) fn admit<'a>(&self, plugin: &str, line: &'a str) -> Option<Cow<'a, str>> {
        {
            let mut b = self.bucket.lock();
            let now = Instant::now();
            let rate = f64::from(self.limits.lines_per_second);
            let elapsed = now.duration_since(b.refilled);
            b.tokens = (b.tokens + elapsed.as_secs_f64() * rate).min(self.limits.capacity());
            b.refilled = now;
            if b.tokens < 1.0 {
                b.dropped += 1;
                self.count(1);
                return None;
            }
            b.tokens -= 1.0;
            if b.dropped > 0 && now.duration_since(b.noticed) >= NOTICE_EVERY {
                tracing::warn!(
                    plugin,
                    "plugin {plugin}: {} log lines dropped, over its limit of {} lines per \
                     second (`log-lines-per-second`)",
                    b.dropped,
                    self.limits.lines_per_second
                );
                b.dropped = 0;
                b.noticed = now;
            }
        }
        let admitted = if line.len() <= self.limits.line_bytes {
            escaped(line)
        } else {
            self.count(1);
            let mut end = self.limits.line_bytes;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            Cow::Owned(format!(
                "{}… [cut: {} bytes, over `log-line-bytes`]",
                escaped(&line[..end]),
                line.len()
            ))
        };
        if let Some(tap) = &self.tap {
            tap.push(plugin, &admitted);
        }
        Some(admitted)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// Counts dropped log lines, and error lines kept out of the log.
    #[derive(Default)]
    struct Counted(AtomicU64, AtomicU64);

    impl PluginObserver for Counted {
        fn log_dropped(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }

        fn errors_unlogged(&self, n: u64) {
            self.1.fetch_add(n, Ordering::Relaxed);
        }
    }

    #[test]
    fn lines_over_the_rate_are_dropped_and_long_lines_cut_and_both_counted() {
        let gate = LogGate::new(LogLimits {
            lines_per_second: 5,
            burst_lines: 5,
            line_bytes: 4,
        });
        let counted = Arc::new(Counted::default());
        gate.set_observer(counted.clone());
        let admitted = (0..20).filter(|_| gate.admit("p", "ok").is_some()).count();
        assert!((5..=6).contains(&admitted), "{admitted}");
        let dropped = counted.0.load(Ordering::Relaxed);
        assert_eq!(dropped, 20 - admitted as u64);
        std::thread::sleep(Duration::from_millis(450));
        let cut = gate.admit("p", "héllo world").expect("refilled");
        assert!(cut.starts_with("hél…"), "{cut}");
        assert!(cut.contains("cut: 12 bytes"), "{cut}");
        assert_eq!(counted.0.load(Ordering::Relaxed), dropped + 1);
    }

    #[test]
    fn admitted_lines_are_escaped_cut_ones_too() {
        let gate = LogGate::new(LogLimits {
            lines_per_second: 100,
            burst_lines: 100,
            line_bytes: 8,
        });
        assert_eq!(gate.admit("p", "a\nINFO b").as_deref(), Some(r"a\nINFO b"));
        let cut = gate.admit("p", "a\r\u{1b}[2Jbcdefgh").expect("admitted");
        assert!(cut.starts_with(r"a\r\u{1b}[2Jbc…"), "{cut}");
        assert_eq!(gate.admit("p", "plain").as_deref(), Some("plain"));
    }

    #[tokio::test(start_paused = true)]
    async fn error_lines_are_one_a_second_and_the_rest_counted() {
        let gate = LogGate::new(LogLimits::default());
        let counted = Arc::new(Counted::default());
        gate.set_observer(counted.clone());
        assert_eq!(gate.admit_error(GuestErrors::Handler), Some(0));
        let logged = (0..14_352)
            .filter(|_| gate.admit_error(GuestErrors::Handler).is_some())
            .count();
        assert_eq!(logged, 0);
        // A flood of handler errors does not hide the first reconcile error.
        assert_eq!(gate.admit_error(GuestErrors::Reconcile), Some(0));
        assert_eq!(counted.1.load(Ordering::Relaxed), 14_352);
        assert_eq!(
            counted.0.load(Ordering::Relaxed),
            0,
            "no guest line dropped"
        );
        tokio::time::advance(crate::guest::notices::EVERY).await;
        assert_eq!(gate.admit_error(GuestErrors::Handler), Some(14_352));
        assert!(
            gate.admit("p", "guest lines keep their own budget")
                .is_some()
        );
    }

    #[test]
    fn a_tap_keeps_admitted_lines_numbered_and_drops_the_oldest_past_its_size() {
        let tap = LogTap::default();
        let gate = LogGate::tapped(
            LogLimits {
                lines_per_second: 2,
                burst_lines: 2,
                line_bytes: 4,
            },
            Some(tap.clone()),
        );
        assert_eq!(tap.next(), 0);
        gate.admit("p", "one");
        gate.admit("q", "two and more");
        gate.admit("p", "over the rate");
        let lines = tap.since(0);
        assert_eq!(
            lines.len(),
            2,
            "the line over the rate is not kept: {lines:?}"
        );
        assert_eq!((&*lines[0].plugin, lines[0].line.as_str()), ("p", "one"));
        assert!(
            lines[1].line.starts_with("two …"),
            "cut as logged: {lines:?}"
        );
        assert_eq!(tap.since(1), lines[1..]);
        assert_eq!(tap.next(), 2);

        let big = "x".repeat(LogTap::MAX_BYTES / 2);
        tap.push("p", &big);
        tap.push("p", &big);
        tap.push("p", "last");
        assert_eq!(tap.next(), 5);
        let kept = tap.since(0);
        assert_eq!(kept.len(), 2, "the oldest went");
        assert_eq!(kept[1].line, "last");
        assert_eq!(tap.since(4).len(), 1);
    }
}
