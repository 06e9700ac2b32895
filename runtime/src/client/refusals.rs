//! Why the host refuses a write without sending it ([`Refusal`]), and refused writes in the
//! host's log. A guest that loops on a write it may not make (no grant,
//! this replica does not lead, no token left, an invalid name) would otherwise log one WARN
//! line per call: each kind of refusal is a [`Notices`] of its own (the first logged at once,
//! later ones at most once a second, with how many went unlogged since). The write metrics
//! count every one.

use tokio::time::Instant;

use crate::guest::notices::Notices;

/// Why the host refused a write without sending it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The plugin has no write grant for the resource and verb.
    NotGranted,
    /// This replica does not hold the leader election Lease.
    NotLeader,
    /// The plugin's client-side write rate limit has no token left.
    RateLimited,
    /// A namespace, name, kind or object the guest gave fails the API server's rules.
    Invalid,
}

impl Refusal {
    /// Every refusal, for making metric series up front.
    pub const ALL: [Refusal; 4] = [
        Refusal::NotGranted,
        Refusal::NotLeader,
        Refusal::RateLimited,
        Refusal::Invalid,
    ];

    /// A lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NotGranted => "not-granted",
            Refusal::NotLeader => "not-leader",
            Refusal::RateLimited => "rate-limited",
            Refusal::Invalid => "invalid",
        }
    }
}

/// Decides which of a plugin's refusals are logged.
#[derive(Default)]
pub(super) struct RefusalLog {
    /// By [`Refusal`], in the order of [`Refusal::ALL`].
    notices: [Notices; Refusal::ALL.len()],
}

impl RefusalLog {
    /// `Some(n)` when this refusal is to be logged, `n` being how many of its kind were not
    /// logged since the last line; `None` when it stays out of the log.
    pub(super) fn admit(&self, refusal: Refusal, now: Instant) -> Option<u64> {
        self.notices[refusal as usize].admit(now)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::guest::notices::EVERY;

    #[test]
    fn each_kind_of_refusal_is_thinned_on_its_own() {
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
        for other in [Refusal::NotLeader, Refusal::RateLimited, Refusal::Invalid] {
            assert_eq!(log.admit(other, start), Some(0), "{other:?}");
        }
        assert_eq!(log.admit(Refusal::NotGranted, start + EVERY), Some(999));
        assert_eq!(log.admit(Refusal::NotGranted, start + EVERY), None);
    }
}
