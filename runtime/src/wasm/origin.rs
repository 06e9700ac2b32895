//! Where a plugin version's compiled code came from: a compile, a cache, precompiled code. Its
//! own module, importing nothing, so that the observer can name it without reaching into the
//! component module (and through it the contracts).

/// Where a compiled plugin's code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Compiled now (and written to the on-disk cache when there is one).
    Compiled,
    /// Loaded from the on-disk compile cache.
    DiskCache,
    /// Shared with a plugin already loaded from the same bytes.
    Memory,
    /// Loaded from precompiled code shipped with the component and verified against this
    /// host's engine (`PluginEngine::install_precompiled`).
    Precompiled,
}

impl Origin {
    /// A lowercase label for `/plugins` and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Compiled => "compiled",
            Origin::DiskCache => "cache",
            Origin::Memory => "memory",
            Origin::Precompiled => "precompiled",
        }
    }
}
