//! The on-disk store of pulled artifacts, inside the cache directory beside the compiled
//! plugins: content-addressed blobs (`oci/blobs/sha256/<hex>`, manifests and components alike,
//! each checked against its digest before it is kept), and the links the reloader loads
//! (`oci/plugins/NAME.wasm -> ../blobs/sha256/<hex>`), each with a record of the source and
//! manifest digest it came from (`oci/plugins/.NAME.json`).
//!
//! Every write is a temporary file renamed into place, so a crash leaves no half blob, and a
//! link is swapped in one rename, so the reloader sees the old version or the new one.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::reference::is_sha256_digest;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Content whose hash is not the digest it was pulled as.
    #[error("digest mismatch: expected {expected}, the content is {actual}")]
    DigestMismatch { expected: String, actual: String },
    /// A digest kubewasm does not store (only `sha256:<hex>`).
    #[error("unsupported digest `{0}`: only sha256 is supported")]
    Digest(String),
}

/// What a plugin's link points at and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Linked {
    /// The source as configured (`oci://...`).
    pub source: String,
    /// The manifest digest the source resolved to.
    pub manifest: String,
    /// The component's (layer's) digest: the blob the link points at.
    pub layer: String,
    /// The digest of the precompiled layer installed for it, when the source trusts
    /// precompiled code and the artifact ships it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precompiled: Option<String>,
}

/// The store under one cache directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

/// `sha256:<hex>` of `bytes`.
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(71);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

impl BlobStore {
    /// The store in `cache_dir/oci`.
    pub fn new(cache_dir: &Path) -> BlobStore {
        BlobStore {
            root: cache_dir.join("oci"),
        }
    }

    /// The directory of plugin links, for the reloader to watch.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// Creates the store's directories.
    pub fn create(&self) -> Result<(), StoreError> {
        for dir in [self.root.join("blobs/sha256"), self.plugins_dir()] {
            std::fs::create_dir_all(&dir).map_err(|source| StoreError::Io { path: dir, source })?;
        }
        Ok(())
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf, StoreError> {
        if !is_sha256_digest(digest) {
            return Err(StoreError::Digest(digest.to_owned()));
        }
        Ok(self
            .root
            .join("blobs/sha256")
            .join(&digest["sha256:".len()..]))
    }

    /// The stored blob `digest`, checked against its digest (`None` when absent).
    pub fn read(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.blob_path(digest)?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        verify(digest, &bytes)?;
        Ok(Some(bytes))
    }

    /// Stores `bytes` as the blob `digest`, refusing content that does not hash to it. A blob
    /// already there is replaced: callers write only what they could not read back intact.
    pub fn write(&self, digest: &str, bytes: &[u8]) -> Result<(), StoreError> {
        verify(digest, bytes)?;
        write_atomically(&self.blob_path(digest)?, bytes)
    }

    /// What `name`'s link points at, if it is linked.
    pub fn linked(&self, name: &str) -> Option<Linked> {
        let record = std::fs::read(self.record_path(name)).ok()?;
        let linked: Linked = serde_json::from_slice(&record).ok()?;
        self.link_path(name).exists().then_some(linked)
    }

    /// Points `name`'s link at the stored blob `linked.layer`, in one rename.
    pub fn link(&self, name: &str, linked: &Linked) -> Result<(), StoreError> {
        let blob = self.blob_path(&linked.layer)?;
        let record = serde_json::to_vec(linked).unwrap_or_default();
        write_atomically(&self.record_path(name), &record)?;
        let link = self.link_path(name);
        let staged = self.plugins_dir().join(format!(".{name}.wasm.new"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let _ = std::fs::remove_file(&staged);
        let target = Path::new("../blobs/sha256").join(blob.file_name().unwrap_or_default());
        std::os::unix::fs::symlink(&target, &staged).map_err(io(&staged))?;
        std::fs::rename(&staged, &link).map_err(io(&link))
    }

    /// Removes `name`'s link and record (the blobs stay: another source may use them).
    pub fn unlink(&self, name: &str) {
        let _ = std::fs::remove_file(self.link_path(name));
        let _ = std::fs::remove_file(self.record_path(name));
    }

    /// The names that have a link.
    pub fn link_names(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.plugins_dir()) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name.strip_suffix(".wasm")?;
                (!stem.starts_with('.')).then(|| stem.to_owned())
            })
            .collect();
        names.sort();
        names
    }

    fn link_path(&self, name: &str) -> PathBuf {
        self.plugins_dir().join(format!("{name}.wasm"))
    }

    fn record_path(&self, name: &str) -> PathBuf {
        self.plugins_dir().join(format!(".{name}.json"))
    }
}

/// Checks that `bytes` hash to `digest`.
pub(crate) fn verify(digest: &str, bytes: &[u8]) -> Result<(), StoreError> {
    let actual = sha256_digest(bytes);
    if actual == digest {
        Ok(())
    } else {
        Err(StoreError::DigestMismatch {
            expected: digest.to_owned(),
            actual,
        })
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write as _;
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.as_file().sync_all().map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_are_kept_only_under_their_digest_and_links_swap_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::new(dir.path());
        store.create().unwrap();
        let (v1, v2) = (b"version one".to_vec(), b"version two".to_vec());
        let (d1, d2) = (sha256_digest(&v1), sha256_digest(&v2));
        assert!(matches!(
            store.write(&d1, &v2),
            Err(StoreError::DigestMismatch { .. })
        ));
        assert_eq!(store.read(&d1).unwrap(), None);
        assert!(store.write("sha256:../../etc", &v1).is_err());
        store.write(&d1, &v1).unwrap();
        store.write(&d2, &v2).unwrap();
        assert_eq!(store.read(&d1).unwrap(), Some(v1.clone()));

        let linked = |layer: &str| Linked {
            source: "oci://r.example/p:1".into(),
            manifest: sha256_digest(b"manifest"),
            layer: layer.to_owned(),
            precompiled: None,
        };
        store.link("p", &linked(&d1)).unwrap();
        let link = store.plugins_dir().join("p.wasm");
        assert_eq!(std::fs::read(&link).unwrap(), v1);
        store.link("p", &linked(&d2)).unwrap();
        assert_eq!(std::fs::read(&link).unwrap(), v2);
        assert_eq!(store.linked("p"), Some(linked(&d2)));
        assert_eq!(store.link_names(), ["p"]);
        store.unlink("p");
        assert_eq!(store.linked("p"), None);
        assert!(store.link_names().is_empty());

        // A blob corrupted on disk is refused, not loaded, and can be written again.
        let path = store.blob_path(&d1).unwrap();
        std::fs::write(&path, b"tampered").unwrap();
        assert!(store.read(&d1).is_err());
        store.write(&d1, &v1).unwrap();
        assert_eq!(store.read(&d1).unwrap(), Some(v1));
    }
}
