//! What the pages are made from: the host's summary and one row per plugin.

use jiff::Timestamp;

use super::history::TrackView;
use super::rank::Condition;
use super::snapshot::PluginView;

/// What every page says of the host itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub(super) version: &'static str,
    pub(super) started: Timestamp,
    pub(super) now: Timestamp,
    pub(super) history_bytes: usize,
}

/// One plugin's row: its view, its condition and its history.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(super) view: PluginView,
    pub(super) condition: Condition,
    pub(super) track: Option<TrackView>,
}
