//! Where a guest build reads from and writes to, and how it builds Rust guests.

use std::path::PathBuf;

/// Where a guest build reads from and writes to.
pub struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// The WIT package every guest targets (`wit/`).
    pub wit_dir: PathBuf,
    /// Finished example components, one `NAME.wasm` per guest (`target/plugins/`): what
    /// `kubewasm dev` loads.
    pub out_dir: PathBuf,
    /// Finished test-only components (`target/test-plugins/`), kept apart so `dev` never loads
    /// the deliberately misbehaving guests of the tests.
    pub test_out_dir: PathBuf,
    /// Language toolchains installed by the build itself (`target/toolchains/`).
    pub tools_dir: PathBuf,
    /// Rust guests with fat LTO, one codegen unit and LLVM's inlining of functions with large
    /// stack frames off, as a plugin is shipped (`cargo xtask bench`, whose figures are of
    /// shipped guests; the `kubewasm new` template's release build); otherwise the `guest`
    /// profile as it is, quicker to build (the tests, `cargo xtask dev`).
    pub lto: bool,
}

impl Ctx {
    pub fn new() -> Self {
        let root = crate::workspace::root();
        Ctx {
            wit_dir: root.join("wit"),
            out_dir: root.join("target/plugins"),
            test_out_dir: root.join("target/test-plugins"),
            tools_dir: root.join("target/toolchains"),
            root,
            lto: false,
        }
    }

    /// The same, its Rust guests built as they are shipped (see [`Ctx::lto`]).
    pub fn with_lto(self) -> Self {
        Ctx { lto: true, ..self }
    }
}
