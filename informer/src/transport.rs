//! Which transport failures say a connection died under a request, told apart from those that
//! say one could not be made.
//!
//! A watch or LIST whose connection dies (an HTTP/2 PING went unanswered and the client closed
//! the connection, the peer reset it, closed it mid-body, or stopped acknowledging) fails with
//! an error whose cause is buried in kube's, hyper's and h2's wrappers: the source chain is
//! walked to find it. A connect that failed or timed out is not a dead connection: no
//! connection was ever up.

use std::error::Error as StdError;
use std::io;

/// Whether `err` says the connection carrying a request or its response died: a transport
/// failure after the connection was made, not a connect that failed, not a stream the server
/// reset on a connection that lives on.
pub(crate) fn connection_died(err: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        if let Some(err) = err.downcast_ref::<hyper_util::client::legacy::Error>()
            && err.is_connect()
        {
            return false;
        }
        if let Some(err) = err.downcast_ref::<h2::Error>() {
            // Decisive: h2 says whether the connection failed (an I/O error, hyper closing it
            // after an unanswered PING, a GOAWAY for an error) or one stream was reset.
            return err.is_io() || (err.is_go_away() && err.reason() != Some(h2::Reason::NO_ERROR));
        }
        if let Some(err) = err.downcast_ref::<hyper::Error>()
            && (err.is_timeout() || err.is_incomplete_message())
        {
            // An HTTP/2 keep-alive (PING) timeout, or an HTTP/1.1 connection closed before
            // the message ended.
            return true;
        }
        if let Some(err) = err.downcast_ref::<io::Error>() {
            if broken_kind(err.kind()) {
                return true;
            }
            // `io::Error::source` skips a wrapped error and goes to the wrapped error's
            // source; the wrapped error itself may be the one that tells.
            if let Some(inner) = err.get_ref() {
                next = Some(inner as &(dyn StdError + 'static));
                continue;
            }
        }
        next = err.source();
    }
    false
}

/// The innermost cause of `err`, as text: what the transport said, under the wrappers whose
/// own text ("error reading a body from connection") does not tell.
pub(crate) fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut last = err;
    let mut next = Some(err);
    while let Some(err) = next {
        last = err;
        next = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => err.source(),
        };
    }
    last.to_string()
}

/// The I/O error kinds of a connection that was up and went away.
fn broken_kind(kind: io::ErrorKind) -> bool {
    matches!(
        kind,
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected
            | io::ErrorKind::TimedOut
            | io::ErrorKind::UnexpectedEof
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kube hands a response body's failure over as an `io::Error` of kind `Other` around its
    /// own error, which wraps the transport's: the cause is found under both.
    #[test]
    fn a_broken_pipe_under_wrappers_is_a_dead_connection_and_other_failures_are_not() {
        let wrapped = |inner: io::Error| {
            let kube = kube::Error::Service(Box::new(inner));
            io::Error::other(kube)
        };
        let broken = wrapped(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
        assert!(connection_died(&broken));
        assert_eq!(root_cause(&broken), "closed");
        let reset = wrapped(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(connection_died(&reset));
        let parse = wrapped(io::Error::new(io::ErrorKind::InvalidData, "not JSON"));
        assert!(!connection_died(&parse));
        assert!(!connection_died(&io::Error::other("something else")));
    }
}
