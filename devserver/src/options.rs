//! Server options.

use std::time::Duration;

/// How a [`DevServer`](crate::DevServer) is started.
#[derive(Debug, Clone)]
pub struct Options {
    /// TCP port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Events kept per resource; a watch or list from a resourceVersion older than the kept
    /// history answers 410 Gone, as the API server does after etcd compaction.
    pub history_size: usize,
    /// How often a watch that asked for bookmarks (`allowWatchBookmarks=true`) receives one.
    pub bookmark_interval: Duration,
}

impl Default for Options {
    /// A random port, 10,000 events of history per resource, a bookmark every second.
    fn default() -> Options {
        Options {
            port: 0,
            history_size: 10_000,
            bookmark_interval: Duration::from_secs(1),
        }
    }
}
