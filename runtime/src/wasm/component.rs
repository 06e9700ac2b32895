//! Loading a component: recognising what the bytes are and checking that they target the
//! `controller` world, with errors that name the file and the reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{Component, Linker};

use crate::contracts::{ControllerPre, v0_2};
use crate::error::PluginError;
pub use crate::wasm::origin::Origin;
use crate::wasm::state::HostState;

/// A component compiled for the host's engine and linked against its imports, ready to be
/// instantiated any number of times (one instance per plugin, a fresh one after a fault).
#[derive(Clone)]
pub struct CompiledPlugin {
    pub(crate) file: PathBuf,
    pub(crate) hash: String,
    /// Shared by every plugin loaded from the same bytes.
    pub(crate) pre: Arc<Linked>,
    pub(crate) origin: Origin,
}

impl CompiledPlugin {
    /// The file the component came from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The SHA-256 of the component's bytes, hex.
    pub fn content_hash(&self) -> &str {
        &self.hash
    }

    /// Whether compiling was skipped (the code came from the on-disk cache, from a verified
    /// precompiled artifact or from a copy already loaded).
    pub fn from_cache(&self) -> bool {
        self.origin != Origin::Compiled
    }

    /// Where the compiled code came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }
}

/// A component linked against the contract version it was built for.
pub(crate) enum Linked {
    /// `kubewasm:controller@0.1.0`: event handlers driven by the actor.
    V0_1(ControllerPre<HostState>),
    /// `kubewasm:controller@0.2.0`, any of its worlds: handlers, reconcile driven by the
    /// host's workqueue, or both.
    V0_2(v0_2::PluginPre),
}

/// What the first eight bytes say a file is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Component,
}

/// Tells a component from a core module or anything else by its preamble (magic + version /
/// layer), before the compiler gives a less readable error.
pub(crate) fn classify(file: &Path, bytes: &[u8]) -> Result<Kind, PluginError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(PluginError::NotWasm {
            file: file.to_owned(),
        });
    }
    // Bytes 4..6 are the version, 6..8 the layer: 0 for core modules, 1 for components.
    match bytes[6..8] {
        [0, 0] => Err(PluginError::CoreModule {
            file: file.to_owned(),
        }),
        [1, 0] => Ok(Kind::Component),
        _ => Err(PluginError::Invalid {
            file: file.to_owned(),
            reason: format!("unknown WebAssembly layer {:?}", &bytes[6..8]),
        }),
    }
}

/// Links a compiled component against the host's imports and finds the world's exports: those
/// of a 0.2.0 world (observer, reconciler or controller) if it has them, else those of 0.1.0.
pub(crate) fn link(
    linker: &Linker<HostState>,
    component: &Component,
    file: &Path,
) -> Result<Linked, PluginError> {
    let pre = linker
        .instantiate_pre(component)
        .map_err(|e| PluginError::WrongWorld {
            file: file.to_owned(),
            reason: format!("{e:#}"),
        })?;
    if let Some(linked) = v0_2::PluginPre::new(pre.clone()) {
        return linked
            .map(Linked::V0_2)
            .map_err(|e| PluginError::MissingExports {
                file: file.to_owned(),
                reason: format!("{e:#}"),
            });
    }
    ControllerPre::new(pre)
        .map(Linked::V0_1)
        .map_err(|e| PluginError::MissingExports {
            file: file.to_owned(),
            reason: format!("{e:#}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_not_wasm() {
        let err = classify(Path::new("x.wasm"), b"hello world").unwrap_err();
        assert!(matches!(err, PluginError::NotWasm { .. }));
        assert!(err.to_string().contains("x.wasm"));
    }

    #[test]
    fn core_module_preamble_is_recognised() {
        let err = classify(Path::new("m.wasm"), b"\0asm\x01\0\0\0").unwrap_err();
        assert!(matches!(err, PluginError::CoreModule { .. }));
        assert!(err.to_string().contains("m.wasm"));
    }

    #[test]
    fn component_preamble_is_accepted() {
        assert_eq!(
            classify(Path::new("c.wasm"), b"\0asm\x0d\0\x01\0").unwrap(),
            Kind::Component
        );
    }
}
