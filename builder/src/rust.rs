//! Rust guests: cargo for `wasm32-wasip2`; no cargo-component, no adapter (wit-bindgen's
//! output is a component already).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::toolchain::{RUST_TARGET, Toolchains};

/// `cargo build --target wasm32-wasip2 --profile PROFILE` in `dir` for `packages` (none: the
/// package in `dir`), with `target_dir` when given. Flags meant for a host build (target-cpu,
/// coverage, sanitizers) must not reach wasm, so RUSTFLAGS are dropped.
pub fn cargo_build(
    tools: &Toolchains,
    dir: &Path,
    profile: &str,
    target_dir: Option<&Path>,
    packages: &[String],
) -> anyhow::Result<Command> {
    let cargo = tools.cargo_for_wasm()?;
    let mut command = Command::new(cargo);
    command
        .current_dir(dir)
        .args(["build", "--target", RUST_TARGET, "--profile", profile])
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS");
    if let Some(target_dir) = target_dir {
        command.arg("--target-dir").arg(target_dir);
    }
    for package in packages {
        command.args(["-p", package]);
    }
    Ok(command)
}

/// Where cargo puts the component of the library `lib_name` built with `profile`.
pub fn output(target_dir: &Path, profile: &str, lib_name: &str) -> PathBuf {
    let profile_dir = if profile == "dev" { "debug" } else { profile };
    target_dir
        .join(RUST_TARGET)
        .join(profile_dir)
        .join(format!("{lib_name}.wasm"))
}
