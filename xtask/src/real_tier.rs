//! The real-server tier of `cargo xtask test`: every test in a module named `real` runs against
//! a real kube-apiserver and etcd, started from the envtest assets that `KUBEBUILDER_ASSETS`
//! names (one server shared by the tests that keep to their own namespaces, one per test for
//! those that restart or compact it). Without them the tier is skipped, and the summary says so.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The variable naming the folder with `kube-apiserver` and `etcd` (the envtest convention).
pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";

/// The nextest filter selecting the tier: tests in a module named `real` (e.g.
/// `differential::real::NAME` in the end-to-end binary).
pub const FILTER: &str = "test(/::real::/)";

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
        let tier = Tier::from_value(root, std::env::var_os(ASSETS_VAR))?;
        if let Tier::Run { assets } = &tier {
            // SAFETY: xtask is single-threaded here; no other thread reads the environment.
            unsafe { std::env::set_var(ASSETS_VAR, assets) };
        }
        Ok(tier)
    }

    /// The tier for a value of `KUBEBUILDER_ASSETS` (relative to `root`).
    fn from_value(root: &Path, value: Option<OsString>) -> anyhow::Result<Tier> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
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
        Ok(Tier::Run { assets })
    }
}

/// The counts of a nextest summary line without its skipped count (the tests of other tiers):
/// `Summary [ 40.1s] 7 tests run: 6 passed, 1 failed, 296 skipped` gives
/// `7 tests run: 6 passed, 1 failed`.
pub fn counts(summary: &str) -> &str {
    let Some((_, counts)) = summary.split_once("] ") else {
        return "no summary from nextest";
    };
    match counts.rsplit_once(", ") {
        Some((kept, skipped)) if skipped.ends_with("skipped") => kept,
        _ => counts,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_or_empty_skips_and_says_why() {
        for value in [None, Some(OsString::new())] {
            match Tier::from_value(Path::new("/"), value) {
                Ok(Tier::Skip { reason }) => assert!(reason.contains(ASSETS_VAR), "{reason}"),
                _ => panic!("expected a skip"),
            }
        }
    }

    #[test]
    fn a_folder_without_the_binaries_is_an_error_and_one_with_them_runs_by_absolute_path() {
        let root = std::env::temp_dir().join(format!("xtask-tier-{}", std::process::id()));
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("etcd"), "").unwrap();
        let error = Tier::from_value(&root, Some("bin".into()))
            .err()
            .expect("an error");
        assert!(error.to_string().contains("kube-apiserver"), "{error}");
        std::fs::write(bin.join("kube-apiserver"), "").unwrap();
        let tier = Tier::from_value(&root, Some("bin".into())).expect("runs");
        let Tier::Run { assets } = tier else {
            panic!("expected the tier to run")
        };
        assert!(assets.is_absolute() && assets.ends_with("bin"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn counts_drop_the_skipped_tests_of_other_tiers() {
        assert_eq!(
            counts("     Summary [  34.863s] 7 tests run: 7 passed, 296 skipped"),
            "7 tests run: 7 passed"
        );
        assert_eq!(
            counts("Summary [ 9.1s] 8 tests run: 6 passed, 2 failed, 0 skipped"),
            "8 tests run: 6 passed, 2 failed"
        );
        assert_eq!(counts(""), "no summary from nextest");
    }
}
