//! Building guests: one module per language, each turning sources in `examples-guests/` (and the
//! test guests) into components in `target/plugins/`.

use std::path::PathBuf;

/// Where a guest build reads from and writes to.
pub struct Ctx {
    /// The workspace root.
    pub root: PathBuf,
    /// The WIT package every guest targets (`wit/`).
    pub wit_dir: PathBuf,
    /// Finished components, one `NAME.wasm` per guest (`target/plugins/`).
    pub out_dir: PathBuf,
    /// Language toolchains installed by the build itself (`target/toolchains/`).
    pub tools_dir: PathBuf,
}

impl Ctx {
    pub fn new() -> Self {
        let root = crate::workspace_root();
        Ctx {
            wit_dir: root.join("wit"),
            out_dir: root.join("target/plugins"),
            tools_dir: root.join("target/toolchains"),
            root,
        }
    }
}

/// Builds every guest of every language; returns the components written.
pub fn build_all(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(&ctx.out_dir)?;
    let built = Vec::new();
    Ok(built)
}
