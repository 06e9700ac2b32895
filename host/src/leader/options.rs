//! The settings of leader election ([`ElectionOptions`], client-go's defaults), why it can fail,
//! this replica's identity, and the retry clock every elector and the membership heartbeat
//! keep.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Why leader election could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The timings or names make no sense (renew deadline not below the lease duration, ...).
    #[error("invalid leader election settings: {0}")]
    Invalid(String),
}

/// The settings of one elector, client-go's defaults in [`ElectionOptions::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionOptions {
    /// Name of the Lease all replicas contend for.
    pub lease_name: String,
    /// Namespace of the Lease.
    pub namespace: String,
    /// Who this replica is; written to `holderIdentity`. Unique per replica.
    pub identity: String,
    /// How long a standby waits, from when it last saw the record change, before taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives leadership up.
    pub renew_deadline: Duration,
    /// How often the leader renews and standbys try to acquire.
    pub retry_period: Duration,
}

impl ElectionOptions {
    /// client-go's timings: lease 15 s, renew deadline 10 s, retry every 2 s.
    pub fn new(lease_name: &str, namespace: &str, identity: &str) -> ElectionOptions {
        ElectionOptions {
            lease_name: lease_name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the settings: names given, `retry period < renew deadline < lease duration`, and
    /// the lease duration a whole number of seconds of at least one (the Lease stores seconds).
    pub fn validate(&self) -> Result<(), LeaderError> {
        let invalid = |m: String| Err(LeaderError::Invalid(m));
        if self.lease_name.is_empty() || self.namespace.is_empty() || self.identity.is_empty() {
            return invalid("the lease name, namespace and identity must not be empty".into());
        }
        if self.lease_duration < Duration::from_secs(1) || self.lease_duration.subsec_nanos() != 0 {
            return invalid(format!(
                "the lease duration ({:?}) must be a whole number of seconds, at least 1",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return invalid(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?})",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return invalid(format!(
                "the retry period ({:?}) must be above zero and shorter than the renew deadline \
                 ({:?})",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// This replica's identity: `POD_NAME` (from the downward API), else `HOSTNAME` inside a pod
/// (the pod name), else the host name with a random suffix, so two processes on one machine
/// never share an identity.
pub fn default_identity() -> String {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(pod) = env("POD_NAME") {
        return pod;
    }
    let hostname = env("HOSTNAME").or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
    });
    if env("KUBERNETES_SERVICE_HOST").is_some()
        && let Some(pod) = &hostname
    {
        return pod.clone();
    }
    let suffix = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!(
        "{}_{:016x}",
        hostname.unwrap_or_else(|| "kubewasm".into()),
        suffix
    )
}

/// Ticks every `period`, the first at once; an attempt that overran a tick is followed by a
/// full period, not a burst of catch-up attempts.
pub(super) fn retry_ticks(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}
