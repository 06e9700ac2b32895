//! Plugins from OCI registries: components published as Wasm OCI artifacts, pushed and pulled
//! by `kubewasm push` / `kubewasm pull`, and configured as plugin sources (`source =
//! "oci://..."`) that are pulled once into a content-addressed on-disk store and, with
//! `poll-seconds`, followed as their tag moves.
//!
//! A source is never loaded from the network directly: it is materialised as a link
//! `NAME.wasm` in a directory the reloader watches beside the plugins directory, so a pulled
//! version goes through the same load and hot-reload path as a file dropped into the plugins
//! directory (same guarantees: the informers stay warm, nothing queued is lost, a version that
//! does not load leaves the running one in place).

mod artifact;
mod credentials;
mod reference;
mod registry;
mod sources;
mod store;

pub use artifact::{
    ANNOTATION_CONTRACT, ANNOTATION_PLUGIN, ANNOTATION_SOURCE, ArtifactError, CONFIG_MEDIA_TYPE,
    LAYER_MEDIA_TYPE, MAX_PRECOMPILED_BYTES, Metadata, PRECOMPILED_MEDIA_TYPE,
};
pub use credentials::{Credentials, CredentialsError};
pub use reference::{ReferenceError, parse_reference};
pub use registry::{Pulled, Registry, RegistryError, RegistryOptions};
pub use sources::{PullObserver, SharedSources, SourceSpec, SourceStatus, Sources};
pub use store::{BlobStore, StoreError};
