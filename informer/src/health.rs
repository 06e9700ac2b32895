//! Whether an informer reaches its API server: the failure streak a reflector is in, and the
//! signal a factory's informers raise when it starts or ends, so a caller (leader election,
//! readiness) can follow the informers' health without polling them.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::Error;

/// The failures of a reflector since its last successful list or watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// When the streak began.
    pub since: Instant,
    /// Whether a failure of the streak says the server was not reached: no answer within an
    /// idle limit, a transport error, or a 5xx (see [`Error::is_unreachable`]). A refusal
    /// (403, 404, ...) is an answer: the server is reached, the request is wrong.
    pub unreachable: bool,
    /// Whether a failure of the streak found a connection dead (see
    /// [`Error::is_dead_connection`]): the informer's watch is down until a new one opens,
    /// which ends the streak.
    pub dead: bool,
    /// The latest failure, as text.
    pub error: String,
}

/// Bumped whenever an informer of a factory starts or ends a failure streak, or finds a
/// connection dead; clones share it.
#[derive(Clone, Default)]
pub struct HealthSignal(Arc<watch::Sender<u64>>);

impl std::fmt::Debug for HealthSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("HealthSignal")
            .field(&*self.0.borrow())
            .finish()
    }
}

impl HealthSignal {
    /// A receiver that sees each bump (read the informers' [`crate::InformerStats`] then).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }

    pub(crate) fn bump(&self) {
        self.0.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl Error {
    /// Whether the failure says the API server was not reached: a watch or LIST that sent
    /// nothing within its idle limit, a transport failure, or a 5xx answer (a proxy's 502,
    /// 503, 504 or the server failing).
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::WatchIdle(_)
            | Error::BookmarksStopped(_)
            | Error::ListIdle(_)
            | Error::ConnectionDied { .. } => true,
            Error::Client(_) => true,
            Error::Api { code, .. } => *code >= 500,
            _ => false,
        }
    }

    /// Whether the failure found a connection dead: open, but silent past its idle limit; or
    /// gone under the request or its response (an unanswered HTTP/2 PING, a reset, a close
    /// mid-response). A connect that failed is not one: no connection was up.
    pub fn is_dead_connection(&self) -> bool {
        match self {
            Error::WatchIdle(_)
            | Error::BookmarksStopped(_)
            | Error::ListIdle(_)
            | Error::ConnectionDied { .. } => true,
            Error::Client(err) => crate::transport::connection_died(err),
            _ => false,
        }
    }
}
