//! A token bucket (golang.org/x/time/rate's `Limiter`): the overall retry limit of a workqueue and
//! the client-side write limit of a plugin.

use std::time::Duration;

use tokio::time::Instant;

/// Holds up to `burst` tokens and gains `qps` tokens a second. Reserving a token that is not
/// there yet is allowed: the bucket goes into debt and the caller learns how long to wait, so
/// callers are served in order of reservation.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    qps: f64,
    burst: f64,
    /// May be negative: tokens reserved ahead of time.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket. `qps` must be positive and `burst` at least 1 (checked by the options
    /// that carry them).
    pub(crate) fn new(qps: f64, burst: u32) -> Self {
        TokenBucket {
            qps,
            burst: f64::from(burst.max(1)),
            tokens: f64::from(burst.max(1)),
            last: Instant::now(),
        }
    }

    /// Takes one token and answers how long until it is really available (zero if now).
    pub(crate) fn reserve(&mut self, now: Instant) -> Duration {
        self.refill(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }

    /// Gives back a token taken by [`TokenBucket::reserve`] and not used.
    pub(crate) fn cancel(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_bucket_serves_its_burst_then_one_token_per_period() {
        let mut bucket = TokenBucket::new(10.0, 3);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(now), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(now), Duration::from_millis(100));
        assert_eq!(bucket.reserve(now), Duration::from_millis(200));
        // After 200 ms both reservations are paid for and the bucket is empty.
        let later = now + Duration::from_millis(200);
        assert_eq!(bucket.reserve(later), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_accumulate_up_to_the_burst_only() {
        let mut bucket = TokenBucket::new(100.0, 2);
        let now = Instant::now();
        bucket.reserve(now);
        bucket.reserve(now);
        let much_later = now + Duration::from_secs(60);
        assert_eq!(bucket.reserve(much_later), Duration::ZERO);
        assert_eq!(bucket.reserve(much_later), Duration::ZERO);
        assert_eq!(bucket.reserve(much_later), Duration::from_millis(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_reservation_is_given_back() {
        let mut bucket = TokenBucket::new(1.0, 1);
        let now = Instant::now();
        assert_eq!(bucket.reserve(now), Duration::ZERO);
        assert_eq!(bucket.reserve(now), Duration::from_secs(1));
        bucket.cancel();
        assert_eq!(bucket.reserve(now), Duration::from_secs(1));
    }
}
