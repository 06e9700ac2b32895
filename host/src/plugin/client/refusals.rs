//! Refused writes in the host's log. A guest that loops on a write it may not make (no grant,
//! or this replica does not lead) would otherwise log one WARN line per call: of each kind of
//! refusal, the first is logged at once and later ones at most once per [`NOTICE_EVERY`], with
//! how many went unlogged since. The write metrics count every one.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::Refusal;

/// How often, at most, one plugin logs a refusal of one kind.
pub(super) const NOTICE_EVERY: Duration = Duration::from_secs(1);

/// Decides which of a plugin's refusals are logged.
#[derive(Default)]
pub(super) struct RefusalLog {
    /// By [`Refusal`], in the order of [`Refusal::ALL`].
    notices: Mutex<[Notice; Refusal::ALL.len()]>,
}

#[derive(Default, Clone, Copy)]
struct Notice {
    logged: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    /// `Some(n)` when this refusal is to be logged, `n` being how many of its kind were not
    /// logged since the last line; `None` when it stays out of the log.
    pub(super) fn admit(&self, refusal: Refusal, now: Instant) -> Option<u64> {
        let mut notices = self.notices.lock();
        let notice = &mut notices[refusal as usize];
        let due = notice
            .logged
            .is_none_or(|at| now.duration_since(at) >= NOTICE_EVERY);
        if !due {
            notice.unlogged += 1;
            return None;
        }
        notice.logged = Some(now);
        Some(std::mem::take(&mut notice.unlogged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_refusal_is_logged_then_one_line_a_second_with_the_count_between() {
        let log = RefusalLog::default();
        let start = Instant::now();
        assert_eq!(log.admit(Refusal::NotGranted, start), Some(0));
        let quiet = (1..1000)
            .filter(|i| {
                log.admit(Refusal::NotGranted, start + Duration::from_micros(*i))
                    .is_some()
            })
            .count();
        assert_eq!(quiet, 0);
        // Each kind has its own notice.
        assert_eq!(log.admit(Refusal::NotLeader, start), Some(0));
        assert_eq!(
            log.admit(Refusal::NotGranted, start + NOTICE_EVERY),
            Some(999)
        );
        assert_eq!(log.admit(Refusal::NotGranted, start + NOTICE_EVERY), None);
    }
}
