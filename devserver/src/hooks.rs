//! Test hooks: injected failures, added latency and the request log (in-process only).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use crate::Status;

/// The API verb of a request, as the request log and fault injection name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

/// One request to a resource, as recorded in the request log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    pub verb: Verb,
    /// API group, "" for the core group.
    pub group: String,
    pub version: String,
    /// Lower-case plural, e.g. `configmaps`.
    pub resource: String,
    pub namespace: Option<String>,
    /// The raw query string (without `?`).
    pub query: String,
    /// The object's name when the path names one (not on a create or a collection).
    pub name: Option<String>,
    /// Who sent it: the bearer token (the dev server authenticates no one, so a token is how
    /// a test tells its clients apart), else the user agent, else empty.
    pub client: String,
    /// The request's User-Agent header; empty when it has none.
    pub user_agent: String,
    /// When the request arrived.
    pub at: std::time::Instant,
}

/// Faults, latency and log shared by all requests.
#[derive(Default)]
pub(crate) struct Hooks {
    failures: Mutex<HashMap<Verb, (usize, u16)>>,
    latency: Mutex<Duration>,
    log: Mutex<Vec<RequestRecord>>,
    /// Bumped by each stall: a watch opened before the bump goes silent.
    stalls: tokio::sync::watch::Sender<u64>,
}

impl Hooks {
    /// Makes every watch open now silent for good (see [`Hooks::stall_signal`]).
    pub fn stall_watches(&self) {
        self.stalls.send_modify(|n| *n += 1);
    }

    /// What a new watch holds to learn that it must go silent: the signal changes when
    /// [`Hooks::stall_watches`] is called after it was taken.
    pub fn stall_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.stalls.subscribe()
    }

    pub fn fail_next(&self, verb: Verb, n: usize, code: u16) {
        let mut failures = self.failures.lock();
        if n == 0 {
            failures.remove(&verb);
        } else {
            failures.insert(verb, (n, code));
        }
    }

    pub fn set_latency(&self, latency: Duration) {
        *self.latency.lock() = latency;
    }

    pub fn latency(&self) -> Duration {
        *self.latency.lock()
    }

    /// Logs the request and returns the injected failure it must answer with, if any.
    pub fn record(&self, record: RequestRecord) -> Result<(), Status> {
        let verb = record.verb;
        self.log.lock().push(record);
        let mut failures = self.failures.lock();
        let Some((remaining, code)) = failures.get_mut(&verb) else {
            return Ok(());
        };
        let code = *code;
        *remaining -= 1;
        if *remaining == 0 {
            failures.remove(&verb);
        }
        Err(Status::injected(code))
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().clone()
    }

    pub fn clear_requests(&self) {
        self.log.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(verb: Verb) -> RequestRecord {
        RequestRecord {
            verb,
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
            namespace: None,
            query: String::new(),
            name: None,
            client: String::new(),
            user_agent: String::new(),
            at: std::time::Instant::now(),
        }
    }

    #[test]
    fn failures_apply_to_the_next_n_requests_of_the_verb_only() {
        let hooks = Hooks::default();
        hooks.fail_next(Verb::List, 2, 429);
        assert!(hooks.record(record(Verb::Get)).is_ok());
        assert_eq!(hooks.record(record(Verb::List)).unwrap_err().code, 429);
        assert_eq!(hooks.record(record(Verb::List)).unwrap_err().code, 429);
        assert!(hooks.record(record(Verb::List)).is_ok());
        assert_eq!(hooks.requests().len(), 4);
        hooks.clear_requests();
        assert!(hooks.requests().is_empty());
    }
}
