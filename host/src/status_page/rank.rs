//! How bad a plugin's state is, and the order of the status page's rows: worst first.

use std::cmp::Reverse;

use kubewasm_runtime::PluginState;

use super::snapshot::PluginView;

/// A plugin's condition, worst first (the order of the variants is the page's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Condition {
    /// Its restarts kept failing: it receives nothing and is retried rarely.
    Failed,
    /// A fault threw its instance away; a fresh one is starting.
    Restarting,
    /// Running, but it had handler or reconcile errors or faults within the history's window.
    Erroring,
    /// Loaded with nothing running (unloaded or shutting down).
    Stopped,
    Healthy,
}

impl Condition {
    /// The word the page shows (also its CSS class and the rows' `data-condition`).
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Failed => "failed",
            Condition::Restarting => "restarting",
            Condition::Erroring => "erroring",
            Condition::Stopped => "stopped",
            Condition::Healthy => "healthy",
        }
    }

    /// The condition of `plugin`; `recent_errors` says whether its errors grew lately.
    pub fn of(plugin: &PluginView, recent_errors: bool) -> Condition {
        match plugin.state {
            _ if plugin.failed => Condition::Failed,
            PluginState::Failed => Condition::Failed,
            PluginState::Restarting => Condition::Restarting,
            PluginState::Stopped => Condition::Stopped,
            PluginState::Running if recent_errors => Condition::Erroring,
            PluginState::Running => Condition::Healthy,
        }
    }
}

/// What orders a row: its condition, then the newest error first, then the most errors in
/// the window, then the key (so equal rows keep one order between refreshes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowOrder<'a> {
    condition: Condition,
    last_error_at: Reverse<Option<jiff::Timestamp>>,
    window_errors: Reverse<u64>,
    key: &'a str,
}

impl<'a> RowOrder<'a> {
    pub fn new(
        condition: Condition,
        last_error_at: Option<jiff::Timestamp>,
        window_errors: u64,
        key: &'a str,
    ) -> Self {
        RowOrder {
            condition,
            last_error_at: Reverse(last_error_at),
            window_errors: Reverse(window_errors),
            key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worse_conditions_and_newer_errors_come_first() {
        let t = |s: i64| Some(jiff::Timestamp::from_second(s).expect("a time"));
        let mut rows = [
            RowOrder::new(Condition::Healthy, None, 0, "a"),
            RowOrder::new(Condition::Erroring, t(10), 1, "b"),
            RowOrder::new(Condition::Erroring, t(20), 1, "c"),
            RowOrder::new(Condition::Failed, t(5), 9, "d"),
            RowOrder::new(Condition::Healthy, None, 0, "0"),
            RowOrder::new(Condition::Erroring, t(20), 7, "e"),
        ];
        rows.sort();
        let keys: Vec<&str> = rows.iter().map(|r| r.key).collect();
        assert_eq!(keys, ["d", "e", "c", "b", "0", "a"]);
    }
}
