//! Who a plugin is: [`PluginKey`], the stem of the file it was loaded from, which is also its
//! key in the config (`[plugins.KEY]`). The operator chooses it by naming the file, so two
//! loaded plugins can never share it; the name a guest's `init` declares is only a label shown
//! beside it. Every piece of host state that belongs to a plugin (metric series, log fields,
//! the admission registry and webhook names, field manager, User-Agent, Event source) is keyed
//! by this value, so a guest cannot reach another plugin's state by declaring its name.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The longest key, in bytes: it is a field manager (at most 128 bytes), part of a User-Agent
/// and of a webhook's DNS name.
pub const MAX_KEY_BYTES: usize = 100;

/// A plugin's identity: its file's stem, checked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PluginKey(Arc<str>);

/// Why a file's name makes no plugin key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file}: its name makes no plugin key ({reason}); name the file KEY.wasm, KEY of 1 to \
     {MAX_KEY_BYTES} ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit"
)]
pub struct InvalidKey {
    pub file: String,
    pub reason: &'static str,
}

impl PluginKey {
    /// The key of the plugin loaded from `file`: its name without the extension.
    pub fn of(file: &Path) -> Result<PluginKey, InvalidKey> {
        let invalid = |reason| InvalidKey {
            file: file.display().to_string(),
            reason,
        };
        let stem = file
            .file_stem()
            .ok_or_else(|| invalid("it has no file name"))?
            .to_str()
            .ok_or_else(|| invalid("it is not UTF-8"))?;
        PluginKey::new(stem).map_err(invalid)
    }

    /// A key from its text (a config key, a file stem).
    pub fn new(key: &str) -> Result<PluginKey, &'static str> {
        if key.is_empty() {
            return Err("it is empty");
        }
        if key.len() > MAX_KEY_BYTES {
            return Err("it is too long");
        }
        if !key.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err("it does not start with a letter or digit");
        }
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err("it holds a character other than letters, digits, `-`, `_` and `.`");
        }
        Ok(PluginKey(key.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as the shared string the runtime's logs and metrics hold.
    pub fn to_arc(&self) -> Arc<str> {
        self.0.clone()
    }
}

impl fmt::Display for PluginKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_the_file_stem() {
        let key = PluginKey::of(Path::new("/plugins/sample-controller.wasm")).unwrap();
        assert_eq!(key.as_str(), "sample-controller");
    }

    #[test]
    fn names_that_make_no_key_are_refused_with_the_rule() {
        for bad in [
            "/p/.hidden.wasm",
            "/p/a b.wasm",
            "/p/a\nb.wasm",
            "/p/caf\u{e9}.wasm",
            "/p/-x.wasm",
        ] {
            let err = PluginKey::of(Path::new(bad)).unwrap_err().to_string();
            assert!(err.contains("KEY.wasm"), "{bad}: {err}");
        }
        let long = format!("/p/{}.wasm", "a".repeat(MAX_KEY_BYTES + 1));
        assert!(PluginKey::of(Path::new(&long)).is_err());
    }
}
