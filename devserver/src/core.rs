//! The server's shared state, independent of HTTP: store, resource registry, hooks, options.

use crate::Options;
use crate::hooks::Hooks;
use crate::registry::Registry;
use crate::store::Store;
use crate::wire::JsonOnly;

/// Everything a request handler needs; one per server, shared by `Arc`.
pub(crate) struct Core {
    pub store: Store,
    pub registry: Registry,
    pub hooks: Hooks,
    pub options: Options,
    /// Resources no longer answered in protobuf.
    pub json_only: JsonOnly,
}

impl Core {
    pub fn new(options: Options) -> Core {
        Core {
            store: Store::new(options.history_size),
            registry: Registry::with_builtins(),
            hooks: Hooks::default(),
            options,
            json_only: JsonOnly::default(),
        }
    }
}
