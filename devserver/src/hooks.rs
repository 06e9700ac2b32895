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
    /// The request's `Impersonate-User` header: whom the client asked to act as (the dev
    /// server authorizes no one, so it only records it).
    pub impersonate_user: Option<String>,
    /// When the request arrived.
    pub at: std::time::Instant,
}

/// The resource a fault or a dropped watch is limited to: a lower-case plural such as
/// `configmaps`, or `deployments.apps` to name its API group too (as kubectl writes it).
/// Without a group it is that plural in any group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceName {
    plural: String,
    group: Option<String>,
}

/// Why a resource name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadResourceName(String);

impl std::fmt::Display for BadResourceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` is not a resource: name the lower-case plural, such as configmaps or \
             deployments.apps",
            self.0
        )
    }
}

impl std::error::Error for BadResourceName {}

impl std::str::FromStr for ResourceName {
    type Err = BadResourceName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadResourceName(text.to_owned());
        let (plural, group) = match text.split_once('.') {
            Some((plural, group)) => (plural, Some(group)),
            None => (text, None),
        };
        let label = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if !label(plural) || group.is_some_and(|g| !g.split('.').all(label)) {
            return Err(bad());
        }
        Ok(ResourceName {
            plural: plural.to_owned(),
            group: group.map(str::to_owned),
        })
    }
}

impl std::fmt::Display for ResourceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.group {
            Some(group) => write!(f, "{}.{group}", self.plural),
            None => f.write_str(&self.plural),
        }
    }
}

impl ResourceName {
    /// Whether a request to `plural` in API group `group` ("" for core) is this resource.
    pub fn matches(&self, group: &str, plural: &str) -> bool {
        self.plural == plural && self.group.as_deref().is_none_or(|g| g == group)
    }
}

/// How [`Hooks::corrupt_gzip_lists`] spoils a gzipped LIST answer: each is a body a gzip
/// decoder must refuse, found at a different point of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GzipCorruption {
    /// The stream is cut in half: it ends before its last block and its trailer.
    Truncated,
    /// The trailer's CRC-32 is off by one bit: every byte decompresses, the check fails.
    BadCrc,
    /// A valid gzip header, then bytes that are not deflate.
    GarbageAfterHeader,
}

impl GzipCorruption {
    /// Spoils `gzip`, a whole gzip stream.
    pub fn apply(self, gzip: &mut Vec<u8>) {
        const HEADER: usize = 10;
        const TRAILER: usize = 8;
        match self {
            GzipCorruption::Truncated => gzip.truncate(gzip.len() / 2),
            GzipCorruption::BadCrc => {
                if let Some(at) = gzip.len().checked_sub(TRAILER) {
                    gzip[at] ^= 1;
                }
            }
            GzipCorruption::GarbageAfterHeader => {
                // 0xff opens a block of the reserved type 3 (a final one): not deflate.
                let len = gzip.len().max(HEADER + 1);
                gzip.resize(len, 0);
                gzip[HEADER..].fill(0xff);
            }
        }
    }
}

/// Which requests a fault hits: a verb, on every resource or on one.
type FaultKey = (Verb, Option<ResourceName>);

/// Faults, latency and log shared by all requests.
#[derive(Default)]
pub(crate) struct Hooks {
    failures: Mutex<HashMap<FaultKey, (usize, u16)>>,
    latency: Mutex<Duration>,
    log: Mutex<Vec<RequestRecord>>,
    /// Bumped by each stall: a watch opened before the bump goes silent.
    stalls: tokio::sync::watch::Sender<u64>,
    /// Protobuf LIST answers still to be cut short by a byte.
    garbled_lists: std::sync::atomic::AtomicUsize,
    /// Gzipped LIST answers still to be spoiled, and how.
    corrupt_gzip: Mutex<(usize, Option<GzipCorruption>)>,
    /// Group versions' resource lists served (`/api/v1`, `/apis/GROUP/VERSION`): discovery
    /// of kinds, which the request log leaves out.
    resource_lists: std::sync::atomic::AtomicUsize,
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

    /// The next `n` requests with `verb` (to `resource` only, when given) answer `code`;
    /// `n = 0` cancels that fault.
    pub fn fail_next(&self, verb: Verb, resource: Option<ResourceName>, n: usize, code: u16) {
        let mut failures = self.failures.lock();
        if n == 0 {
            failures.remove(&(verb, resource));
        } else {
            failures.insert((verb, resource), (n, code));
        }
    }

    /// The next `n` LIST answers in protobuf lose their last byte (a body that does not decode).
    pub fn garble_protobuf_lists(&self, n: usize) {
        self.garbled_lists
            .store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether this protobuf LIST answer is to be garbled (and one fewer is).
    pub fn take_garbled_list(&self) -> bool {
        self.garbled_lists
            .fetch_update(
                std::sync::atomic::Ordering::Relaxed,
                std::sync::atomic::Ordering::Relaxed,
                |n| n.checked_sub(1),
            )
            .is_ok()
    }

    /// The next `n` LIST answers that are gzipped (any wire) are spoiled as `how` says;
    /// `n = 0` cancels it.
    pub fn corrupt_gzip_lists(&self, n: usize, how: GzipCorruption) {
        *self.corrupt_gzip.lock() = (n, Some(how));
    }

    /// How this gzipped LIST answer is to be spoiled, if it is (and one fewer is).
    pub fn take_gzip_corruption(&self) -> Option<GzipCorruption> {
        let mut pending = self.corrupt_gzip.lock();
        let (n, how) = &mut *pending;
        *n = n.checked_sub(1)?;
        *how
    }

    pub fn set_latency(&self, latency: Duration) {
        *self.latency.lock() = latency;
    }

    pub fn latency(&self) -> Duration {
        *self.latency.lock()
    }

    /// Logs the request and returns the injected failure it must answer with, if any: a
    /// fault on its verb and resource before one on its verb alone.
    pub fn record(&self, record: RequestRecord) -> Result<(), Status> {
        let mut failures = self.failures.lock();
        let key = if failures.is_empty() {
            None
        } else {
            failures
                .keys()
                .find(|(verb, resource)| {
                    *verb == record.verb
                        && resource
                            .as_ref()
                            .is_some_and(|r| r.matches(&record.group, &record.resource))
                })
                .cloned()
                .or_else(|| {
                    let general = (record.verb, None);
                    failures.contains_key(&general).then_some(general)
                })
        };
        self.log.lock().push(record);
        let Some(key) = key else {
            return Ok(());
        };
        let Some((remaining, code)) = failures.get_mut(&key) else {
            return Ok(());
        };
        let code = *code;
        *remaining -= 1;
        if *remaining == 0 {
            failures.remove(&key);
        }
        Err(Status::injected(code))
    }

    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().clone()
    }

    pub fn clear_requests(&self) {
        self.log.lock().clear();
    }

    pub fn resource_list_served(&self) {
        self.resource_lists
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn resource_lists(&self) -> usize {
        self.resource_lists
            .load(std::sync::atomic::Ordering::Relaxed)
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
            impersonate_user: None,
            at: std::time::Instant::now(),
        }
    }

    #[test]
    fn failures_apply_to_the_next_n_requests_of_the_verb_only() {
        let hooks = Hooks::default();
        hooks.fail_next(Verb::List, None, 2, 429);
        assert!(hooks.record(record(Verb::Get)).is_ok());
        assert_eq!(hooks.record(record(Verb::List)).unwrap_err().code, 429);
        assert_eq!(hooks.record(record(Verb::List)).unwrap_err().code, 429);
        assert!(hooks.record(record(Verb::List)).is_ok());
        assert_eq!(hooks.requests().len(), 4);
        hooks.clear_requests();
        assert!(hooks.requests().is_empty());
    }

    fn record_of(verb: Verb, group: &str, resource: &str) -> RequestRecord {
        RequestRecord {
            group: group.into(),
            resource: resource.into(),
            ..record(verb)
        }
    }

    #[test]
    fn a_fault_on_a_resource_hits_only_that_resource_and_comes_before_the_verbs() {
        let hooks = Hooks::default();
        let deployments: ResourceName = "deployments".parse().unwrap();
        hooks.fail_next(Verb::Create, Some(deployments), 2, 409);
        hooks.fail_next(Verb::Create, None, 1, 500);
        let create = |group, resource| hooks.record(record_of(Verb::Create, group, resource));
        assert!(
            hooks
                .record(record_of(Verb::Update, "apps", "deployments"))
                .is_ok()
        );
        assert_eq!(create("apps", "deployments").unwrap_err().code, 409);
        assert_eq!(create("apps", "deployments").unwrap_err().code, 409);
        // Used up: the fault on every resource is next.
        assert_eq!(create("apps", "deployments").unwrap_err().code, 500);
        assert!(create("apps", "deployments").is_ok());

        let apps_only: ResourceName = "deployments.apps".parse().unwrap();
        hooks.fail_next(Verb::Delete, Some(apps_only.clone()), 5, 429);
        let delete = |group, resource| hooks.record(record_of(Verb::Delete, group, resource));
        assert!(delete("", "configmaps").is_ok());
        assert!(
            delete("example.com", "deployments").is_ok(),
            "another group"
        );
        assert_eq!(delete("apps", "deployments").unwrap_err().code, 429);
        hooks.fail_next(Verb::Delete, Some(apps_only), 0, 429);
        assert!(delete("apps", "deployments").is_ok(), "cancelled");
    }

    #[test]
    fn each_gzip_corruption_is_refused_by_a_decoder_and_only_the_next_n_are_spoiled() {
        use std::io::{Read, Write};
        let text = "configuration text ".repeat(500);
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(text.as_bytes()).unwrap();
        let whole = encoder.finish().unwrap();
        let decode = |gzip: &[u8]| {
            let mut out = String::new();
            flate2::read::GzDecoder::new(gzip)
                .read_to_string(&mut out)
                .map(|_| out)
        };
        assert_eq!(decode(&whole).unwrap(), text);
        for how in [
            GzipCorruption::Truncated,
            GzipCorruption::BadCrc,
            GzipCorruption::GarbageAfterHeader,
        ] {
            let mut spoiled = whole.clone();
            how.apply(&mut spoiled);
            assert!(decode(&spoiled).is_err(), "{how:?}");
        }
        let hooks = Hooks::default();
        assert_eq!(hooks.take_gzip_corruption(), None);
        hooks.corrupt_gzip_lists(2, GzipCorruption::BadCrc);
        assert_eq!(hooks.take_gzip_corruption(), Some(GzipCorruption::BadCrc));
        assert_eq!(hooks.take_gzip_corruption(), Some(GzipCorruption::BadCrc));
        assert_eq!(hooks.take_gzip_corruption(), None);
    }

    #[test]
    fn resource_names_are_plurals_with_an_optional_group() {
        let name: ResourceName = "deployments.apps".parse().unwrap();
        assert!(name.matches("apps", "deployments"));
        assert!(!name.matches("", "deployments"));
        assert_eq!(name.to_string(), "deployments.apps");
        let core: ResourceName = "configmaps".parse().unwrap();
        assert!(core.matches("", "configmaps"));
        assert!(!core.matches("", "secrets"));
        for bad in [
            "",
            "Deployment",
            "deployments.",
            ".apps",
            "config maps",
            "pods/status",
        ] {
            assert!(bad.parse::<ResourceName>().is_err(), "{bad:?}");
        }
    }
}
