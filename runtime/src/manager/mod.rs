//! The plugin manager: the map of loaded plugins, their loads, reloads and unloads, the
//! leases on shared informers and indexes, and the policy the host sets for each plugin.

pub(crate) mod controller;
pub(crate) mod leases;
pub(crate) mod plugin_host;
pub(crate) mod policy;
