//! The status page on the metrics address (`GET /` from a browser, `/plugin/KEY`): for an
//! operator, which plugin is failing and since when, what its queue does, what it costs, and
//! its recent log lines; `/plugins` and `/metrics` stay the machines' answers.
//!
//! The page is made on request from a fresh [`Snapshot`]; what it shows over time comes from
//! the [`History`] a sampler task keeps (one sample every [`SAMPLE_EVERY`], a fixed ring per
//! plugin) and the [`RecentLogs`] the log subscriber fills. Both are bounded, and their size is
//! exported as `kubewasm_status_page_history_bytes`.

mod history;
mod logs;
mod rank;
mod render;
mod row;
mod snapshot;

use std::sync::Arc;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

pub use history::{History, SAMPLE_EVERY, SAMPLES};
pub use logs::{Line, RecentLogs, RecentLogsLayer};
pub use rank::Condition;
pub use snapshot::{FileView, InformerView, LeaderView, PluginView, QueueView, Snapshot};

use rank::RowOrder;
use row::{Row, Summary};

/// Reads the host's state for one page or one sample.
pub type SnapshotSource = Arc<dyn Fn() -> Snapshot + Send + Sync>;

/// The status page of one host. Cheap to share.
pub struct StatusPage {
    source: SnapshotSource,
    history: History,
    logs: RecentLogs,
    started: Timestamp,
}

impl std::fmt::Debug for StatusPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusPage")
            .field("history", &self.history)
            .finish_non_exhaustive()
    }
}

impl StatusPage {
    /// A page over `source`, showing the lines `logs` keeps.
    pub fn new(source: SnapshotSource, logs: RecentLogs) -> StatusPage {
        StatusPage {
            source,
            history: History::default(),
            logs,
            started: Timestamp::now(),
        }
    }

    /// Takes one sample into the history; returns the bytes the history and the kept log
    /// lines hold now.
    pub fn sample(&self) -> usize {
        let snapshot = (self.source)();
        self.history.observe(&snapshot.plugins, Timestamp::now());
        self.logs.retain(|key| {
            snapshot.plugins.iter().any(|p| p.key == key)
                || snapshot.files.iter().any(|f| f.key == key)
        });
        self.bytes()
    }

    /// The bytes the history and the kept log lines hold.
    pub fn bytes(&self) -> usize {
        self.history.bytes() + self.logs.bytes()
    }

    /// Samples every [`SAMPLE_EVERY`] until `cancel` fires, handing each sample's size to
    /// `report` (the metric).
    pub fn spawn_sampler(
        self: Arc<Self>,
        report: impl Fn(usize) + Send + 'static,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SAMPLE_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return,
                    _ = ticks.tick() => report(self.sample()),
                }
            }
        })
    }

    /// The overview page, as HTML.
    pub fn overview_html(&self) -> String {
        let (summary, snapshot, rows) = self.read();
        render::overview(&summary, &snapshot, &rows).into_string()
    }

    /// The overview as plain text (what `curl /` gets).
    pub fn overview_text(&self) -> String {
        let (summary, snapshot, rows) = self.read();
        render::text(&summary, &snapshot, &rows)
    }

    /// The page of the plugin `key`: `Err` holds the not-found page.
    pub fn plugin_html(&self, key: &str) -> Result<String, String> {
        let (summary, snapshot, rows) = self.read();
        match rows.iter().find(|r| r.view.key == key) {
            Some(row) => {
                Ok(render::plugin(&summary, &snapshot, row, &self.logs.lines(key)).into_string())
            }
            None => Err(render::not_found(&summary, &snapshot, key).into_string()),
        }
    }

    /// A fresh snapshot and its plugins' rows, worst first.
    fn read(&self) -> (Summary, Snapshot, Vec<Row>) {
        let now = Timestamp::now();
        let snapshot = (self.source)();
        let mut rows: Vec<Row> = snapshot
            .plugins
            .iter()
            .map(|view| {
                let track = self.history.view(view, now);
                let condition = track.as_ref().map_or_else(
                    || Condition::of(view, view.error_count() > 0),
                    |t| t.condition,
                );
                Row {
                    view: view.clone(),
                    condition,
                    track,
                }
            })
            .collect();
        rows.sort_by(|a, b| order(a).cmp(&order(b)));
        let summary = Summary {
            version: env!("CARGO_PKG_VERSION"),
            started: self.started,
            now,
            history_bytes: self.bytes(),
        };
        (summary, snapshot, rows)
    }
}

fn order(row: &Row) -> RowOrder<'_> {
    RowOrder::new(
        row.condition,
        row.track.as_ref().and_then(|t| t.last_error_at),
        row.track.as_ref().map_or(0, |t| t.window_errors),
        &row.view.key,
    )
}

#[cfg(test)]
mod tests;
