//! Each plugin's recent log lines, for its page: every line the process logs with a `plugin`
//! field (the guest's own lines, target `kubewasm::guest`, and the host's lines about it),
//! as the log filter lets them through. Bounded: [`LINES_PER_PLUGIN`] lines of at most
//! [`LINE_BYTES`] each, for at most [`MAX_PLUGINS`] keys.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use jiff::Timestamp;
use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// Lines kept per plugin.
pub const LINES_PER_PLUGIN: usize = 50;
/// Longest line kept, in bytes; a longer one is cut.
pub const LINE_BYTES: usize = 1024;
/// Plugins whose lines are kept; a new key past this evicts the one logged to least recently.
pub const MAX_PLUGINS: usize = 128;

/// The target of the lines a guest logs.
const GUEST_TARGET: &str = "kubewasm::guest";

/// One line as it was logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub at: Timestamp,
    pub level: Level,
    /// Whether the guest logged it (else the host, about the plugin).
    pub guest: bool,
    /// The message and its other fields (`key=value`), cut at [`LINE_BYTES`]; guest text.
    pub text: String,
}

/// The lines kept, by plugin key. Cheap to clone.
#[derive(Clone, Default)]
pub struct RecentLogs {
    kept: Arc<Mutex<HashMap<String, VecDeque<Line>>>>,
}

impl std::fmt::Debug for RecentLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecentLogs").finish_non_exhaustive()
    }
}

impl RecentLogs {
    /// The process's: the log subscriber [`crate::logging::init`] installs writes into it, and
    /// the host's status page reads it.
    pub fn global() -> &'static RecentLogs {
        static GLOBAL: OnceLock<RecentLogs> = OnceLock::new();
        GLOBAL.get_or_init(RecentLogs::default)
    }

    /// The layer that keeps each line with a `plugin` field here.
    pub fn layer(&self) -> RecentLogsLayer {
        RecentLogsLayer(self.clone())
    }

    /// Keeps `line` for `plugin`, dropping its oldest past the bounds.
    pub fn push(&self, plugin: &str, mut line: Line) {
        if line.text.len() > LINE_BYTES {
            let mut end = LINE_BYTES;
            while !line.text.is_char_boundary(end) {
                end -= 1;
            }
            line.text.truncate(end);
            line.text.push('…');
        }
        let mut kept = self.kept.lock();
        if !kept.contains_key(plugin) && kept.len() >= MAX_PLUGINS {
            let stalest = kept
                .iter()
                .min_by_key(|(_, lines)| lines.back().map(|l| l.at))
                .map(|(key, _)| key.clone());
            if let Some(key) = stalest {
                kept.remove(&key);
            }
        }
        let lines = kept.entry(plugin.to_owned()).or_default();
        if lines.len() >= LINES_PER_PLUGIN {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `plugin`'s kept lines, oldest first.
    pub fn lines(&self, plugin: &str) -> Vec<Line> {
        self.kept
            .lock()
            .get(plugin)
            .map(|lines| lines.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets the lines of every plugin `keep` says no.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.kept.lock().retain(|key, _| keep(key));
    }

    /// The bytes the kept lines hold.
    pub fn bytes(&self) -> usize {
        let kept = self.kept.lock();
        kept.iter()
            .map(|(key, lines)| {
                key.capacity()
                    + size_of::<VecDeque<Line>>()
                    + lines.capacity() * size_of::<Line>()
                    + lines.iter().map(|l| l.text.capacity()).sum::<usize>()
            })
            .sum()
    }
}

/// Keeps the lines of events that carry a `plugin` field in a [`RecentLogs`].
pub struct RecentLogsLayer(RecentLogs);

impl<S: Subscriber> Layer<S> for RecentLogsLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if meta.fields().field("plugin").is_none() {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let Some(plugin) = fields.plugin else {
            return;
        };
        self.0.push(
            &plugin,
            Line {
                at: Timestamp::now(),
                level: *meta.level(),
                guest: meta.target() == GUEST_TARGET,
                text: fields.text,
            },
        );
    }
}

/// An event's plugin, and its message followed by its other fields.
#[derive(Default)]
struct Fields {
    plugin: Option<String>,
    text: String,
}

impl Fields {
    fn add(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        // Fields past the kept length are not formatted at all.
        if self.text.len() > LINE_BYTES {
            return;
        }
        match field.name() {
            "message" if self.text.is_empty() => {
                let _ = self.text.write_fmt(value);
            }
            "message" => {
                let tail = std::mem::take(&mut self.text);
                let _ = self.text.write_fmt(value);
                self.text.push(' ');
                self.text.push_str(&tail);
            }
            name => {
                if !self.text.is_empty() {
                    self.text.push(' ');
                }
                let _ = write!(self.text, "{name}={value}");
            }
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "plugin" {
            self.plugin = Some(value.to_owned());
        } else {
            self.add(field, format_args!("{value}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "plugin" {
            self.plugin = Some(format!("{value:?}"));
        } else {
            self.add(field, format_args!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[test]
    fn lines_with_a_plugin_field_are_kept_per_plugin_and_bounded() {
        let logs = RecentLogs::default();
        let subscriber = tracing_subscriber::registry().with(logs.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "kubewasm::guest", plugin = "a", name = "A", "hello <b>");
            tracing::warn!(plugin = %"b", reason = "bad", "plugin file rejected");
            tracing::info!("no plugin here");
            for i in 0..(LINES_PER_PLUGIN + 5) {
                tracing::info!(target: "kubewasm::guest", plugin = "c", "line {i}");
            }
            tracing::info!(target: "kubewasm::guest", plugin = "d", "{}", "x".repeat(5000));
        });
        let a = logs.lines("a");
        assert_eq!(a.len(), 1);
        assert!(a[0].guest);
        assert_eq!(a[0].text, "hello <b> name=A");
        let b = logs.lines("b");
        assert_eq!((b[0].level, b[0].guest), (Level::WARN, false));
        assert_eq!(b[0].text, "plugin file rejected reason=bad");
        let c = logs.lines("c");
        assert_eq!(c.len(), LINES_PER_PLUGIN);
        assert_eq!(c[0].text, "line 5", "the oldest lines went first");
        let d = logs.lines("d");
        assert!(d[0].text.len() <= LINE_BYTES + '…'.len_utf8(), "cut");
        assert!(logs.bytes() < 4 * LINES_PER_PLUGIN * LINE_BYTES);
        logs.retain(|key| key == "a");
        assert!(logs.lines("c").is_empty());
    }

    #[test]
    fn past_the_plugin_limit_the_stalest_plugin_is_forgotten() {
        let logs = RecentLogs::default();
        let line = |second: i64| Line {
            at: Timestamp::from_second(second).expect("a time"),
            level: Level::INFO,
            guest: true,
            text: "x".into(),
        };
        for i in 0..MAX_PLUGINS {
            logs.push(&format!("p{i}"), line(100 + i as i64));
        }
        logs.push("p0", line(1000));
        logs.push("new", line(1001));
        assert!(!logs.lines("p0").is_empty(), "p0 logged lately");
        assert!(logs.lines("p1").is_empty(), "p1 was the stalest");
        assert_eq!(logs.lines("new").len(), 1);
    }
}
