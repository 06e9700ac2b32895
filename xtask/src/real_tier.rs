//! The real-server tier of `cargo xtask test`: every test in a module named `real` runs against
//! a real kube-apiserver and etcd, started from the envtest assets that `KUBEBUILDER_ASSETS`
//! names. Without them the tier is skipped, and the summary says so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The variable naming the folder with `kube-apiserver` and `etcd` (the envtest convention).
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The nextest filter selecting the tier: tests whose path starts with `real::`.
pub const FILTER: &str = "test(/^real::/)";

/// Whether the tier runs, decided from the environment.
pub enum Tier {
    Run { assets: PathBuf },
    Skip { reason: String },
}

impl Tier {
    /// Reads `KUBEBUILDER_ASSETS`. A relative path is made absolute (tests run from their
    /// crate's directory) and exported so for every child process. A folder without the
    /// binaries is an error, not a skip: whoever set the variable meant the tier to run.
    pub fn from_env(root: &Path) -> anyhow::Result<Tier> {
        let Some(value) = std::env::var_os(ASSETS_VAR).filter(|v| !v.is_empty()) else {
            return Ok(Tier::Skip {
                reason: format!(
                    "{ASSETS_VAR} is not set (set it to a folder holding kube-apiserver and \
                     etcd, e.g. ../shared/envtest/bin, to run it)"
                ),
            });
        };
        let assets = root.join(PathBuf::from(value));
        for binary in ["kube-apiserver", "etcd"] {
            if !assets.join(binary).is_file() {
                bail!("{ASSETS_VAR}={} has no {binary}", assets.display());
            }
        }
        let assets = assets
            .canonicalize()
            .with_context(|| format!("resolving {}", assets.display()))?;
        // SAFETY: xtask is single-threaded here; no other thread reads the environment.
        unsafe { std::env::set_var(ASSETS_VAR, &assets) };
        Ok(Tier::Run { assets })
    }
}

/// What a nextest run reported in its closing summary line.
pub struct Outcome {
    /// nextest's summary line, e.g. `Summary [ 40.1s] 11 tests run: 11 passed, 0 skipped`.
    pub summary: String,
    pub passed: bool,
}

/// Runs `command` (a `cargo nextest run`), echoing its output, and keeps its summary line.
pub fn run_reporting(command: &mut Command) -> anyhow::Result<Outcome> {
    eprintln!("xtask: running the real-server tier");
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start cargo nextest for the real-server tier")?;
    let mut summary = String::new();
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            let line = line.context("reading nextest's output")?;
            eprintln!("{line}");
            if line.trim_start().starts_with("Summary") {
                summary = line.trim().to_owned();
            }
        }
    }
    let status = child.wait().context("waiting for cargo nextest")?;
    Ok(Outcome {
        summary,
        passed: status.success(),
    })
}
