//! The last minutes of each plugin, sampled every [`SAMPLE_EVERY`]: how many events,
//! reconciles and errors each interval saw (a fixed ring per plugin, for the sparklines), since
//! when its condition has held, and when its last error came. Times are when a sample saw the
//! change, so they are right to within one interval.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::time::Duration;

use jiff::Timestamp;
use parking_lot::Mutex;

use super::rank::Condition;
use super::snapshot::PluginView;

/// How often the plugins are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// How many samples each plugin keeps: ten minutes.
pub const SAMPLES: usize = 120;

/// What one interval saw of a plugin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Point {
    pub events: u32,
    pub reconciles: u32,
    /// Handler and reconcile errors and faults.
    pub errors: u32,
    /// Milliseconds spent in guest calls.
    pub busy_ms: u32,
}

/// The counters a sample compares with the last.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    events: u64,
    reconciles: u64,
    errors: u64,
    busy_ms: u64,
}

impl Totals {
    fn of(plugin: &PluginView) -> Totals {
        Totals {
            events: plugin.events,
            reconciles: plugin.reconciles,
            errors: plugin.error_count(),
            // Float to integer saturates; seconds of calls are never negative.
            busy_ms: (plugin.call_seconds * 1000.0) as u64,
        }
    }
}

/// One plugin's history.
struct Track {
    last: Totals,
    /// A ring: `points[next]` is overwritten by the next sample.
    points: [Point; SAMPLES],
    next: usize,
    filled: usize,
    condition: Condition,
    since: Timestamp,
    /// A hash of the last error message (not the message: the status holds that).
    last_error: Option<u64>,
    last_error_at: Option<Timestamp>,
}

impl Track {
    fn new(now: Timestamp) -> Track {
        Track {
            last: Totals::default(),
            points: [Point::default(); SAMPLES],
            next: 0,
            filled: 0,
            condition: Condition::Healthy,
            since: now,
            last_error: None,
            last_error_at: None,
        }
    }

    fn window_errors(&self) -> u64 {
        self.points.iter().map(|p| u64::from(p.errors)).sum()
    }

    /// Oldest first.
    fn points(&self) -> Vec<Point> {
        let start = (self.next + SAMPLES - self.filled) % SAMPLES;
        (0..self.filled)
            .map(|i| self.points[(start + i) % SAMPLES])
            .collect()
    }
}

/// What the page shows of one plugin's history, read against its fresh view.
#[derive(Debug, Clone)]
pub struct TrackView {
    /// Oldest first, one per [`SAMPLE_EVERY`].
    pub points: Vec<Point>,
    pub condition: Condition,
    /// Since when the condition has held (when the host first saw it).
    pub since: Timestamp,
    pub last_error_at: Option<Timestamp>,
    /// Errors within the window, the ones since the last sample included.
    pub window_errors: u64,
}

/// Every loaded plugin's history.
#[derive(Default)]
pub struct History {
    tracks: Mutex<HashMap<String, Track>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("plugins", &self.tracks.lock().len())
            .finish()
    }
}

fn hash(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// A counter's growth since the last sample, as a point's field (a counter that went back, as
/// after an unload and a load of the same key, counts from zero).
fn delta(now: u64, last: u64) -> u32 {
    let grown = if now >= last { now - last } else { now };
    u32::try_from(grown).unwrap_or(u32::MAX)
}

impl History {
    /// Records one sample of `plugins` taken at `now`; plugins no longer loaded are forgotten.
    pub fn observe(&self, plugins: &[PluginView], now: Timestamp) {
        let mut tracks = self.tracks.lock();
        tracks.retain(|key, _| plugins.iter().any(|p| &p.key == key));
        for plugin in plugins {
            let track = tracks
                .entry(plugin.key.clone())
                .or_insert_with(|| Track::new(now));
            let totals = Totals::of(plugin);
            let point = Point {
                events: delta(totals.events, track.last.events),
                reconciles: delta(totals.reconciles, track.last.reconciles),
                errors: delta(totals.errors, track.last.errors),
                busy_ms: delta(totals.busy_ms, track.last.busy_ms),
            };
            track.points[track.next] = point;
            track.next = (track.next + 1) % SAMPLES;
            track.filled = (track.filled + 1).min(SAMPLES);
            track.last = totals;
            let message = plugin.last_error.as_deref().map(hash);
            if point.errors > 0 || (message.is_some() && message != track.last_error) {
                track.last_error_at = Some(now);
            }
            track.last_error = message;
            let condition = Condition::of(plugin, track.window_errors() > 0);
            if condition != track.condition {
                track.condition = condition;
                track.since = now;
            }
        }
    }

    /// `plugin`'s history read against its fresh view (errors since the last sample count as
    /// now); `None` before its first sample.
    pub fn view(&self, plugin: &PluginView, now: Timestamp) -> Option<TrackView> {
        let tracks = self.tracks.lock();
        let track = tracks.get(&plugin.key)?;
        let fresh = u64::from(delta(plugin.error_count(), track.last.errors));
        let window_errors = track.window_errors() + fresh;
        let condition = Condition::of(plugin, window_errors > 0);
        Some(TrackView {
            points: track.points(),
            condition,
            since: if condition == track.condition {
                track.since
            } else {
                now
            },
            last_error_at: if fresh > 0 {
                Some(now)
            } else {
                track.last_error_at
            },
            window_errors,
        })
    }

    /// The bytes the history holds: its tracks and their keys.
    pub fn bytes(&self) -> usize {
        let tracks = self.tracks.lock();
        tracks.capacity() * (size_of::<String>() + size_of::<Track>())
            + tracks.keys().map(String::capacity).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_runtime::PluginState;

    fn plugin(key: &str, events: u64, errors: u64) -> PluginView {
        PluginView {
            key: key.into(),
            file: format!("{key}.wasm"),
            name: key.into(),
            contract: String::new(),
            state: PluginState::Running,
            failed: false,
            replay_done: true,
            content_hash: String::new(),
            events,
            handler_errors: errors,
            reconciles: 0,
            reconcile_errors: 0,
            faults: 0,
            restarts: 0,
            queue_depth: 0,
            workqueue: None,
            retries: 0,
            writes_refused: 0,
            call_seconds: events as f64 / 1000.0,
            memory_bytes: 0,
            last_error: (errors > 0).then(|| "boom".to_owned()),
            subscriptions: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
            webhooks: None,
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("a time")
    }

    #[test]
    fn each_sample_keeps_the_growth_and_the_ring_stays_its_size() {
        let history = History::default();
        history.observe(&[plugin("p", 10, 0)], at(0));
        history.observe(&[plugin("p", 25, 0)], at(5));
        let view = history.view(&plugin("p", 25, 0), at(6)).expect("sampled");
        let events: Vec<u32> = view.points.iter().map(|p| p.events).collect();
        assert_eq!(events, [10, 15]);
        let busy: Vec<u32> = view.points.iter().map(|p| p.busy_ms).collect();
        assert_eq!(busy, [10, 15], "a millisecond per event");
        assert_eq!(view.condition, Condition::Healthy);
        assert_eq!(view.since, at(0));

        let before = history.bytes();
        for i in 0..(SAMPLES as u64 * 3) {
            history.observe(&[plugin("p", 25 + i * 2, 0)], at(10 + i as i64));
        }
        let view = history
            .view(&plugin("p", 0, 0), at(10_000))
            .expect("sampled");
        assert_eq!(view.points.len(), SAMPLES);
        assert!(view.points.iter().all(|p| p.events == 2), "{view:?}");
        assert_eq!(history.bytes(), before, "the ring does not grow");
    }

    #[test]
    fn an_error_marks_the_plugin_erroring_since_the_sample_that_saw_it_until_it_leaves_the_window()
    {
        let history = History::default();
        history.observe(&[plugin("p", 1, 0), plugin("q", 1, 0)], at(0));
        history.observe(&[plugin("p", 2, 1), plugin("q", 2, 0)], at(5));
        let view = history.view(&plugin("p", 2, 1), at(6)).expect("sampled");
        assert_eq!(view.condition, Condition::Erroring);
        assert_eq!((view.since, view.last_error_at), (at(5), Some(at(5))));
        assert_eq!(view.window_errors, 1);

        // An error after the last sample counts at once.
        let view = history.view(&plugin("q", 2, 3), at(7)).expect("sampled");
        assert_eq!(view.condition, Condition::Erroring);
        assert_eq!((view.since, view.last_error_at), (at(7), Some(at(7))));

        for i in 0..SAMPLES as i64 {
            history.observe(&[plugin("p", 2, 1)], at(10 + i));
        }
        let view = history.view(&plugin("p", 2, 1), at(1000)).expect("sampled");
        assert_eq!(view.condition, Condition::Healthy);
        assert_eq!(
            view.last_error_at,
            Some(at(5)),
            "the time of the last error stays"
        );
        assert!(
            history.view(&plugin("q", 2, 0), at(1000)).is_none(),
            "an unloaded plugin is forgotten"
        );
    }
}
