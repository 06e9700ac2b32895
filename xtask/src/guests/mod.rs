//! Building guests: one module per language, each turning sources in `examples-guests/` (and the
//! test guests) into components in `target/plugins/` (test guests: `target/test-plugins/`).

mod rust;

mod c;
mod go;
mod js;
mod python;
mod toolchain;

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
}

impl Ctx {
    pub fn new() -> Self {
        let root = crate::workspace_root();
        Ctx {
            wit_dir: root.join("wit"),
            out_dir: root.join("target/plugins"),
            test_out_dir: root.join("target/test-plugins"),
            tools_dir: root.join("target/toolchains"),
            root,
        }
    }
}

/// Builds every guest of every language; returns the components written.
pub fn build_all(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(&ctx.out_dir)?;
    std::fs::create_dir_all(&ctx.test_out_dir)?;
    let mut built = Vec::new();
    built.extend(rust::build(ctx)?);
    built.extend(c::build(ctx)?);
    built.extend(python::build(ctx)?);
    built.extend(js::build(ctx)?);
    built.extend(go::build(ctx)?);
    Ok(built)
}

/// Prints one line per component: its path and size.
pub fn print_summary(built: &[PathBuf]) {
    for path in built {
        let size = std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
        eprintln!(
            "xtask: built {} ({} KiB)",
            path.display(),
            size.div_ceil(1024)
        );
    }
}
