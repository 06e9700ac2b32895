//! Where the workspace is.

use std::path::PathBuf;

/// The workspace root: the parent of this crate's directory, as cargo compiled it.
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
