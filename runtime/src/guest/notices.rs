//! Log lines a guest can cause by looping (refused queue adds, failed reconciles), thinned to
//! one a second: the first is logged at once, later ones at most once per [`EVERY`], with how
//! many went unlogged since. Metrics count every one.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// How often, at most, one kind of notice of one plugin is logged.
pub(crate) const EVERY: Duration = Duration::from_secs(1);

/// Decides which notices of one kind reach the log.
#[derive(Debug, Default)]
pub(crate) struct Notices(Mutex<Notice>);

#[derive(Debug, Default)]
struct Notice {
    logged: Option<Instant>,
    unlogged: u64,
}

impl Notices {
    /// `Some(n)` when this notice is to be logged, `n` being how many were not logged since
    /// the last one; `None` when it stays out of the log.
    pub(crate) fn admit(&self, now: Instant) -> Option<u64> {
        let mut notice = self.0.lock();
        if notice
            .logged
            .is_some_and(|at| now.duration_since(at) < EVERY)
        {
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
    fn the_first_is_logged_then_one_a_second_with_the_count_between() {
        let notices = Notices::default();
        let start = Instant::now();
        assert_eq!(notices.admit(start), Some(0));
        let logged = (1..500)
            .filter(|i| notices.admit(start + Duration::from_millis(*i)).is_some())
            .count();
        assert_eq!(logged, 0);
        assert_eq!(notices.admit(start + EVERY), Some(499));
        assert_eq!(notices.admit(start + EVERY), None);
    }
}
