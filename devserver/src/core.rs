//! The server's shared state, independent of HTTP: store, resource registry, hooks, options.

use crate::Options;
use crate::hooks::Hooks;
use crate::registry::Registry;
use crate::store::Store;

/// Everything a request handler needs; one per server, shared by `Arc`.
pub(crate) struct Core {
    pub store: Store,
    pub registry: Registry,
    pub hooks: Hooks,
    pub options: Options,
}

impl Core {
    pub fn new(options: Options) -> Core {
        Core {
            store: Store::new(options.history_size),
            registry: Registry::with_builtins(),
            hooks: Hooks::default(),
            options,
        }
    }
}
