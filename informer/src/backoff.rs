//! Exponential backoff with jitter for list and watch retries (client-go's defaults).

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

/// How retries after list/watch failures are spaced.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffOptions {
    /// The first delay (client-go: 800 ms).
    pub initial: Duration,
    /// Each further delay is the previous one times this (client-go: 2).
    pub factor: f64,
    /// Delays never grow past this before jitter (client-go: 30 s).
    pub cap: Duration,
    /// After this long without a failure the next delay starts again at `initial` (2 min).
    pub reset_after: Duration,
    /// A random extra of up to this fraction of the delay is added (client-go: 1.0).
    pub jitter: f64,
}

impl Default for BackoffOptions {
    fn default() -> Self {
        BackoffOptions {
            initial: Duration::from_millis(800),
            factor: 2.0,
            cap: Duration::from_secs(30),
            reset_after: Duration::from_secs(120),
            jitter: 1.0,
        }
    }
}

/// The delay state of one retry loop; uses Tokio's clock, so tests can pause it.
#[derive(Debug)]
pub(crate) struct Backoff {
    options: BackoffOptions,
    current: Duration,
    last_failure: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(options: BackoffOptions) -> Backoff {
        Backoff {
            current: options.initial,
            options,
            last_failure: None,
        }
    }

    /// The delay before the next attempt after a failure now.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        let healthy = self
            .last_failure
            .is_none_or(|last| now.duration_since(last) >= self.options.reset_after);
        self.current = if healthy {
            self.options.initial
        } else {
            self.current
                .mul_f64(self.options.factor)
                .min(self.options.cap)
        };
        self.last_failure = Some(now);
        let jitter = self.options.jitter.max(0.0);
        if jitter > 0.0 {
            let extra = rand::rng().random_range(0.0..=jitter);
            self.current + self.current.mul_f64(extra)
        } else {
            self.current
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> BackoffOptions {
        BackoffOptions {
            jitter: 0.0,
            ..BackoffOptions::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn doubles_up_to_the_cap_then_resets_after_two_healthy_minutes() {
        let mut backoff = Backoff::new(no_jitter());
        let mut delays = Vec::new();
        for _ in 0..7 {
            let d = backoff.next_delay();
            delays.push(d.as_millis());
            tokio::time::advance(d).await;
        }
        assert_eq!(delays, vec![800, 1600, 3200, 6400, 12800, 25600, 30000]);
        // 30 s (the last delay) + 89 s = 119 s since the last failure: not yet healthy.
        tokio::time::advance(Duration::from_secs(89)).await;
        assert_eq!(backoff.next_delay(), Duration::from_secs(30));
        tokio::time::advance(Duration::from_secs(120)).await;
        assert_eq!(backoff.next_delay(), Duration::from_millis(800));
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_stays_within_its_fraction() {
        let mut backoff = Backoff::new(BackoffOptions::default());
        for _ in 0..50 {
            tokio::time::advance(Duration::from_secs(121)).await;
            let d = backoff.next_delay();
            assert!(
                d >= Duration::from_millis(800) && d <= Duration::from_millis(1600),
                "{d:?}"
            );
        }
    }
}
