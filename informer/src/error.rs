//! The crate's error type.

/// What can go wrong in the informer crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not a JSON object, or its `metadata` has the wrong shape.
    #[error("invalid object JSON: {0}")]
    InvalidObject(#[source] serde_json::Error),
    /// The object has no `metadata.name`, so it cannot be keyed.
    #[error("object has no metadata.name")]
    MissingName,
    /// The object is larger than the compact representation can address (2 GiB).
    #[error("object of {0} bytes is too large")]
    TooLarge(usize),
    /// A cached object did not deserialize into the requested type.
    #[error("cannot deserialize the cached object into the requested type: {0}")]
    Deserialize(#[source] serde_json::Error),
    /// `by_index` and friends were asked for an index nobody added.
    #[error("index {0:?} does not exist")]
    IndexNotFound(String),
    /// `add_indexers` was given a name that is already in use.
    #[error("index {0:?} already exists")]
    IndexExists(String),
    /// The operation is only allowed before the informer starts.
    #[error("the informer has already started")]
    AlreadyStarted,
    /// The API server answered with a `metav1.Status` failure.
    #[error("API server answered {code} {reason}: {message}")]
    Api {
        /// HTTP status code, e.g. 410 for an expired resourceVersion.
        code: u16,
        /// The Status reason, e.g. `Expired` or `TooManyRequests`.
        reason: String,
        /// The human readable message.
        message: String,
    },
    /// The HTTP client failed (connection, TLS, body).
    #[error("request to the API server failed: {0}")]
    Client(#[source] kube::Error),
    /// A watch sent nothing (no event, no bookmark), or did not answer, within its idle limit
    /// (its server-side timeout plus a margin): the connection is presumed dead.
    #[error("the watch sent nothing for {0:?} (its timeout plus margin); presumed dead")]
    WatchIdle(std::time::Duration),
    /// A watch whose server sends bookmarks sent nothing (no event, no bookmark), or did not
    /// answer, within the bookmark idle limit: the connection is presumed dead.
    #[error(
        "the watch sent no event or bookmark for {0:?} though its server sends bookmarks; \
         presumed dead"
    )]
    BookmarksStopped(std::time::Duration),
    /// A LIST did not answer, or its body stopped arriving, for its idle limit: the connection
    /// is presumed dead and the LIST is retried.
    #[error("the LIST sent nothing for {0:?}; presumed dead")]
    ListIdle(std::time::Duration),
    /// The connection under a watch or LIST died while its response was read: an HTTP/2 PING
    /// went unanswered (the client closed the connection), or the peer reset it, closed it
    /// mid-response or stopped acknowledging. The request is made again on a new connection.
    #[error("the connection died while the {what} was read: {cause}")]
    ConnectionDied {
        /// What was being read: `watch stream` or `LIST body`.
        what: &'static str,
        /// The transport's own words, from under the wrappers (`source` has them all).
        cause: String,
        /// The transport's failure, as kube's client reports it.
        #[source]
        source: std::io::Error,
    },
    /// A response body could not be read or parsed.
    #[error("malformed response from the API server: {0}")]
    Response(String),
    /// A protobuf answer did not decode; the resource is read as JSON from then on.
    #[error("a protobuf answer did not decode (reading JSON instead from now on): {0}")]
    Protobuf(#[source] kubewasm_protobuf::Error),
    /// A transform function rejected an object.
    #[error("transform failed: {0}")]
    Transform(String),
}

impl Error {
    /// The HTTP status code when the API server answered with an error status.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the requested resourceVersion is too old (410 Gone): only a relist helps.
    pub fn is_expired(&self) -> bool {
        self.status_code() == Some(410)
    }
}

impl From<kube::Error> for Error {
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Error::Api {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            other => Error::Client(other),
        }
    }
}

/// The crate's result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
