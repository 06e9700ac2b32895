//! The trait a plugin implements.

use crate::{Error, Plugin};

/// A kubewasm plugin written in Rust.
///
/// The host creates one instance of the component per loaded plugin and calls [`Controller::init`]
/// once, before any event. The returned [`Plugin`] holds the controller's state, its
/// subscriptions and indexes, and one typed handler per watched resource; the host then delivers
/// events one at a time, in order, to those handlers. Export the type with
/// [`export_controller!`](crate::export_controller).
pub trait Controller: Sized + 'static {
    /// Builds the plugin from its config string (the host's per-plugin `config`, empty when none
    /// is set). An error stops the plugin from loading; the host logs the message.
    fn init(config: &str) -> Result<Plugin<Self>, Error>;
}
