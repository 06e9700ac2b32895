//! Errors of loading and running plugins.

use std::path::PathBuf;

/// Why a plugin could not be compiled, loaded or started.
///
/// Every variant that concerns a file names it, so an operator reading the log knows which
/// file to fix.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The bytes are not WebAssembly at all.
    #[error("{file}: not a WebAssembly file (no `\\0asm` header)")]
    NotWasm { file: PathBuf },
    /// A core module was given where a component is needed.
    #[error(
        "{file}: a core WebAssembly module, not a component; build for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule { file: PathBuf },
    /// The component does not parse or validate.
    #[error("{file}: invalid component: {reason}")]
    Invalid { file: PathBuf, reason: String },
    /// The component imports something the host does not provide (another world).
    #[error(
        "{file}: not a kubewasm:controller component (imports the host does not provide): {reason}"
    )]
    WrongWorld { file: PathBuf, reason: String },
    /// The component lacks an export of the `controller` world.
    #[error("{file}: missing exports of the kubewasm:controller/handler interface: {reason}")]
    MissingExports { file: PathBuf, reason: String },
    /// Instantiating the component failed (e.g. its start trapped or hit the memory cap).
    #[error("{file}: instantiation failed: {reason}")]
    Instantiate { file: PathBuf, reason: String },
    /// The guest's `init` returned an error.
    #[error("{file}: init failed: {reason}")]
    InitFailed { file: PathBuf, reason: String },
    /// The guest's `init` trapped, ran out of time or memory.
    #[error("{file}: init trapped: {reason}")]
    InitTrapped { file: PathBuf, reason: String },
    /// `init` asked for something the host's config does not allow. `plugin` is the plugin's
    /// key (its file's stem), the config section the author writes the grant in.
    #[error(
        "{file}: plugin `{plugin}` is not granted {what}: add it to `grants` in \
         `[plugins.{plugin}]` of the config"
    )]
    NotGranted {
        file: PathBuf,
        plugin: String,
        what: String,
    },
    /// An admission policy's webhooks match resources its grants do not cover; `what` names
    /// the rule, the resource and the config line that would grant it.
    #[error("{file}: plugin `{plugin}`'s admission webhooks reach past its grants: {what}")]
    WebhookNotGranted {
        file: PathBuf,
        plugin: String,
        what: String,
    },
    /// `init` returned subscriptions or indexes that make no sense.
    #[error("{file}: plugin `{plugin}` declared an invalid {what}")]
    InvalidDeclaration {
        file: PathBuf,
        plugin: String,
        what: String,
    },
    /// `init` declared more than the host's limits allow (a name, subscriptions, indexes).
    /// The plugin's name is not repeated: it may be what is too long.
    #[error("{file}: the plugin declared {what}")]
    OverLimit { file: PathBuf, what: String },
    /// The plugin has write grants and `[impersonation]` is on, but its file name makes no
    /// service account name: its writes could go as nobody, so it is not loaded.
    #[error("{file}: its writes cannot impersonate a service account: {reason}")]
    NoAccount {
        file: PathBuf,
        #[source]
        reason: crate::model::names::InvalidName,
    },
    /// Resolving a subscribed resource against the API server failed.
    #[error(
        "{file}: plugin `{plugin}` subscribes to {resource}, which the API server does not serve: {reason}"
    )]
    UnknownResource {
        file: PathBuf,
        plugin: String,
        resource: String,
        reason: String,
    },
    /// The file's name makes no plugin key.
    #[error(transparent)]
    InvalidKey(#[from] crate::model::identity::InvalidKey),
    /// Another loaded file has the same key (the same name in another plugins directory, or
    /// a registry source of that name).
    #[error(
        "{file}: plugin `{key}` is already loaded from {other}: a plugin is known by its file \
         name, so only one of them can load; rename or remove one"
    )]
    DuplicateKey {
        file: PathBuf,
        key: String,
        other: PathBuf,
    },
    /// No plugin with that id is loaded.
    #[error("no plugin with id {0}")]
    UnknownPlugin(u64),
    /// The engine could not compile or set up something it should always manage.
    #[error("engine: {0}")]
    Engine(String),
    /// The host is shutting down.
    #[error("the plugin host is shutting down")]
    ShuttingDown,
}
