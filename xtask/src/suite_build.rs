//! The build `cargo xtask test` runs its tests on, which the image test's image holds too: its
//! cargo arguments, and clippy as the compiler of the workspace's crates.

use std::path::PathBuf;

use anyhow::Context;

/// Clippy as the compiler of the workspace's own crates, warnings denied, the way `cargo clippy`
/// runs it (cargo's `RUSTC_WORKSPACE_WRAPPER`; `CLIPPY_ARGS` is how cargo-clippy hands its
/// arguments to the driver). The build the tests run is then also the lint: the dependencies are
/// compiled once, where `cargo clippy` first checked every one of them (wasmtime, cranelift,
/// kube) for nothing but the workspace's lints, the second-largest stage of the suite. Every
/// cargo command of the suite carries it, or cargo would rebuild the workspace's crates without.
pub struct Lint {
    driver: PathBuf,
}

/// The build the suite runs its tests on: every target as clippy --all-targets sees it, but a
/// cdylib guest's library (see `test::run_stages`). The image test's image holds its `kubewasm`.
pub const BUILD: [&str; 7] = [
    "build",
    "--workspace",
    "--tests",
    "--benches",
    "--examples",
    "--bins",
    "--locked",
];

/// The variables [`Lint`] sets; a build that must not lint (the image's) removes them.
pub const LINT_VARS: [&str; 2] = ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS"];

impl Lint {
    /// The toolchain's `clippy-driver`, beside `rustc` in its sysroot.
    pub fn find() -> anyhow::Result<Lint> {
        let output = std::process::Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .context("cannot run rustc to find its sysroot")?;
        anyhow::ensure!(output.status.success(), "rustc --print sysroot failed");
        let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        let driver = sysroot.join("bin/clippy-driver");
        anyhow::ensure!(
            driver.is_file(),
            "no clippy-driver in {}: install it with `rustup component add clippy`",
            sysroot.display()
        );
        Ok(Lint { driver })
    }

    /// Sets the variables for every child process from now on (the guests' build too).
    pub fn apply_to_every_cargo(&self) {
        // SAFETY: xtask is single-threaded here; no other thread reads the environment.
        unsafe {
            std::env::set_var(LINT_VARS[0], &self.driver);
            std::env::set_var(
                LINT_VARS[1],
                "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
            );
        }
    }
}
