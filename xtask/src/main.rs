//! Repository chores, run as `cargo xtask <command>`.
//!
//! - `build-guests`: build every example and test guest (Rust, C, Go, Python, JavaScript) into
//!   `target/plugins/`, installing missing language toolchains from the registries first.
//! - `test`: what CI runs: fmt check, clippy with warnings denied, guests, the whole test suite.
//! - `dev`: the main job: the example plugins on the embedded development API server.

mod guests;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("build-guests") => guests::build_all(&guests::Ctx::new()).map(|_| ()),
        Some(other) => Err(anyhow::anyhow!("unknown command `{other}`\n\n{USAGE}")),
        None => Err(anyhow::anyhow!("{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: {err:#}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <build-guests|test|dev>";

/// The workspace root (the parent of this crate's directory).
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
