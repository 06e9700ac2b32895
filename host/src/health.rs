//! Whether this replica's informers reach the API server, as leader election and `/readyz`
//! read it.
//!
//! A replica whose watches are dead leads blind: its cache stops changing, its plugins stop
//! hearing of changes, and nothing it writes follows the cluster. Its Lease renewals may still
//! go through (a proxy or NAT that dropped the long-lived watch connections keeps passing new
//! short ones), so the Lease alone does not show it. [`ApiHealth`] watches the informers'
//! failure streaks and calls the replica unhealthy when
//! - an informer found a connection dead (a watch or LIST silent past its idle limit: this
//!   replica has been blind for that long already; or its connection gone under it, as when
//!   an HTTP/2 PING goes unanswered), until its watch opens again, or
//! - an informer has failed without reaching the server (transport errors, 5xx) for longer
//!   than [`HealthOptions::tolerance`] (a passing blip, a server restart, is tolerated);
//!
//! and it stays unhealthy until [`HealthOptions::hold`] has passed without either, so a
//! replica that just recovered does not take leadership straight back from the standby that
//! took over. The leader elector steps down and releases its Leases while this says
//! unhealthy, and does not contend again until it says healthy; `/readyz` says why.

use std::collections::HashMap;
use std::time::Duration;

use kubewasm_informer::{InformerKey, SharedInformerFactory};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// `Ok` while the informers reach the API server, else why not.
pub type Verdict = Result<(), String>;

/// How long failures are tolerated and how long a recovery is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthOptions {
    /// An informer failing without reaching the server for longer than this makes the
    /// replica unhealthy (a dead connection does at once).
    pub tolerance: Duration,
    /// After its last unhealthy moment, the replica is held unhealthy for this long.
    pub hold: Duration,
    /// How often the informers are looked at besides their signal (for the tolerance and the
    /// hold to run out).
    pub check_every: Duration,
}

impl HealthOptions {
    /// The timings for a leader election's: failures tolerated for the renew deadline (as
    /// long as a leader that cannot renew keeps leading), a recovery held for the lease
    /// duration (so a standby that took over has the Lease before this replica contends).
    pub fn for_election(lease_duration: Duration, renew_deadline: Duration) -> HealthOptions {
        HealthOptions {
            tolerance: renew_deadline,
            hold: lease_duration,
            check_every: Duration::from_millis(250),
        }
    }
}

impl Default for HealthOptions {
    /// client-go's election timings: lease 15 s, renew deadline 10 s.
    fn default() -> Self {
        HealthOptions::for_election(Duration::from_secs(15), Duration::from_secs(10))
    }
}

/// The informers' health, kept up to date by a task until its cancel fires. Clones share it.
#[derive(Clone)]
pub struct ApiHealth {
    verdict: watch::Receiver<Verdict>,
}

impl ApiHealth {
    /// Starts following `factory`'s informers.
    pub fn spawn(
        factory: SharedInformerFactory,
        options: HealthOptions,
        cancel: CancellationToken,
    ) -> ApiHealth {
        let (sender, verdict) = watch::channel(Ok(()));
        let mut judge = Judge {
            options,
            dead_seen: HashMap::new(),
            last_bad: None,
        };
        let mut signal = factory.health_signal();
        tokio::spawn(async move {
            loop {
                signal.borrow_and_update();
                let now = judge.judge(&factory, Instant::now());
                sender.send_if_modified(|old| {
                    if *old == now {
                        return false;
                    }
                    match &now {
                        Ok(()) => tracing::info!("the informers reach the API server again"),
                        Err(reason) if old.is_ok() => {
                            tracing::warn!(%reason, "the informers do not reach the API server")
                        }
                        Err(_) => {}
                    }
                    *old = now;
                    true
                });
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = signal.changed() => {}
                    _ = tokio::time::sleep(options.check_every) => {}
                }
            }
        });
        ApiHealth { verdict }
    }

    /// A health that is always good (for hosts without informers to follow).
    pub fn always() -> ApiHealth {
        let (_, verdict) = watch::channel(Ok(()));
        ApiHealth { verdict }
    }

    /// The verdict now.
    pub fn verdict(&self) -> Verdict {
        self.verdict.borrow().clone()
    }

    /// The verdict as it changes.
    pub fn subscribe(&self) -> watch::Receiver<Verdict> {
        self.verdict.clone()
    }
}

/// The state the verdict is judged from.
struct Judge {
    options: HealthOptions,
    /// Per informer, the dead connections already counted.
    dead_seen: HashMap<InformerKey, u64>,
    /// The last moment the informers were judged unhealthy, and why.
    last_bad: Option<(Instant, String)>,
}

impl Judge {
    fn judge(&mut self, factory: &SharedInformerFactory, now: Instant) -> Verdict {
        let mut bad = None;
        {
            let informers = factory.informers();
            self.dead_seen
                .retain(|key, _| informers.iter().any(|(k, _)| k == key));
            for (key, informer) in informers {
                let stats = informer.stats();
                let seen = self.dead_seen.entry(key.clone()).or_insert(0);
                let died = stats.dead_connections > *seen;
                *seen = stats.dead_connections;
                let failing = stats.failing.filter(|f| f.unreachable);
                let down = failing.as_ref().is_some_and(|f| {
                    f.dead || now.duration_since(f.since) >= self.options.tolerance
                });
                if died || down {
                    let what = failing.map_or_else(
                        || "found its watch connection dead".to_owned(),
                        |f| {
                            let dead = if f.dead {
                                "found its connection dead, "
                            } else {
                                ""
                            };
                            format!(
                                "{dead}failing for {:.1} s: {}",
                                now.duration_since(f.since).as_secs_f64(),
                                f.error
                            )
                        },
                    );
                    bad.get_or_insert_with(Vec::new)
                        .push(format!("informer {}: {what}", describe(&key)));
                }
            }
        }
        if let Some(reasons) = bad {
            let reason = summarize(&reasons);
            self.last_bad = Some((now, reason.clone()));
            return Err(reason);
        }
        match &self.last_bad {
            Some((at, reason)) if now.duration_since(*at) < self.options.hold => Err(format!(
                "recovering ({:.1} s of {:.1} s healthy): {reason}",
                now.duration_since(*at).as_secs_f64(),
                self.options.hold.as_secs_f64()
            )),
            _ => Ok(()),
        }
    }
}

/// The informers that do not reach the API server, as `/readyz` and the log say it: the first
/// two in full and how many more, so a connection that carried every watch does not make a
/// reason of hundreds of lines.
fn summarize(reasons: &[String]) -> String {
    const SHOWN: usize = 2;
    let mut text = reasons[..reasons.len().min(SHOWN)].join("; ");
    if reasons.len() > SHOWN {
        text.push_str(&format!("; and {} more informers", reasons.len() - SHOWN));
    }
    text
}

/// An informer as logs and `/readyz` name it: `apps/v1 deployments in team-a (app=web)`.
fn describe(key: &InformerKey) -> String {
    let mut text = format!("{} {}", key.resource.api_version, key.resource.plural);
    if let Some(ns) = &key.namespace {
        text.push_str(&format!(" in {ns}"));
    }
    let selectors: Vec<&str> = [key.label_selector.as_deref(), key.field_selector.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if !selectors.is_empty() {
        text.push_str(&format!(" ({})", selectors.join(";")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_devserver::Verb;
    use kubewasm_informer::FactoryOptions;

    /// On the dev server: failing lists (500) past the tolerance make the replica unhealthy
    /// with the informer named; once a list succeeds it is held unhealthy ("recovering") for
    /// the hold, then healthy. A watch found dead makes it unhealthy at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failing_lists_and_dead_watches_make_the_informers_unhealthy_for_a_while() {
        let (server, client) = kubewasm_tests::devserver().await;
        server.fail_next(Verb::List, 1_000_000, 500);
        let factory = SharedInformerFactory::new(
            client,
            FactoryOptions {
                reflector: kubewasm_informer::ReflectorOptions {
                    bookmark_idle_limit: Duration::from_millis(1500),
                    ..Default::default()
                },
                ..FactoryOptions::default()
            },
        );
        let key = InformerKey::all(kube::discovery::ApiResource::erase::<
            k8s_openapi::api::core::v1::ConfigMap,
        >(&()));
        factory.informer_for(key);
        factory.start();
        let cancel = CancellationToken::new();
        let options = HealthOptions {
            tolerance: Duration::from_millis(500),
            hold: Duration::from_secs(3),
            check_every: Duration::from_millis(50),
        };
        let health = ApiHealth::spawn(factory.clone(), options, cancel.clone());
        let mut verdicts = health.subscribe();
        let unhealthy = verdicts
            .wait_for(|v| v.as_ref().is_err_and(|r| !r.starts_with("recovering")))
            .await
            .expect("verdict")
            .clone();
        let reason = unhealthy.unwrap_err();
        assert!(
            reason.contains("v1 configmaps") && reason.contains("500"),
            "{reason}"
        );

        server.fail_next(Verb::List, 0, 500);
        let recovering = verdicts
            .wait_for(|v| v.as_ref().is_err_and(|r| r.starts_with("recovering")))
            .await
            .expect("verdict")
            .clone();
        let since = Instant::now();
        assert!(recovering.unwrap_err().contains("500"));
        verdicts.wait_for(Result::is_ok).await.expect("verdict");
        assert!(
            since.elapsed() >= Duration::from_secs(1),
            "held for the hold, not less: {:?}",
            since.elapsed()
        );

        // Every watch open now goes silent: found dead after the bookmark idle limit.
        server.stall_watches();
        let dead = verdicts
            .wait_for(Result::is_err)
            .await
            .expect("verdict")
            .clone();
        assert!(dead.unwrap_err().contains("v1 configmaps"));
        verdicts.wait_for(Result::is_ok).await.expect("verdict");

        cancel.cancel();
        factory.shutdown().await;
        server.shutdown().await;
    }
}
