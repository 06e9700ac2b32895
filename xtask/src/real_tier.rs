//! The real-server tier of `cargo xtask test`: every test in a module named `real` runs against
//! a real kube-apiserver and etcd, started from the envtest assets that `KUBEBUILDER_ASSETS`
//! names (one server shared by the tests that keep to their own namespaces, one per test for
//! those that restart or compact it). Without them the tier is skipped, and the summary says so.
//! The tier runs inside the suite's one nextest run, where its tests, which mostly wait on the
//! API server, fill the thread the long serial lanes leave; its counts are read back from the
//! run's JUnit report ([`Tally`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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

/// Where nextest writes the run's JUnit report (`[profile.default.junit]` in
/// `.config/nextest.toml`), relative to the workspace root.
pub const JUNIT: &str = "target/nextest/default/junit.xml";

/// How the tier's tests ended in one nextest run, read from its JUnit report.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
}

impl Tally {
    /// The tier's tests in a JUnit report: every `<testcase>` whose name has a module named
    /// `real`, failed when it holds a `<failure>` or an `<error>`.
    pub fn from_junit(xml: &str) -> Tally {
        let mut tally = Tally::default();
        for case in xml.split("<testcase ").skip(1) {
            // A case without output closes its own tag; otherwise it ends at `</testcase>`.
            let head_end = case.find('>').unwrap_or(case.len());
            let head = &case[..head_end];
            let body = if head.ends_with('/') {
                ""
            } else {
                case.split("</testcase>").next().unwrap_or(case)
            };
            let Some(name) = attribute(head, "name") else {
                continue;
            };
            if !name.contains("::real::") {
                continue;
            }
            if body.contains("<failure") || body.contains("<error") {
                tally.failed += 1;
            } else {
                tally.passed += 1;
            }
        }
        tally
    }

    /// `7 tests run: 6 passed, 1 failed`, the way nextest counts.
    pub fn counts(&self) -> String {
        let run = self.passed + self.failed;
        let mut text = format!("{run} tests run: {} passed", self.passed);
        if self.failed > 0 {
            text.push_str(&format!(", {} failed", self.failed));
        }
        text
    }
}

/// The value of `key="..."` in a tag's attributes. A value holds no `"` (XML escapes it), so
/// splitting at them alternates between ` key=` and the value.
fn attribute<'a>(tag: &'a str, key: &str) -> Option<&'a str> {
    let parts: Vec<&str> = tag.split('"').collect();
    parts
        .chunks_exact(2)
        .find(|pair| pair[0].trim().strip_suffix('=') == Some(key))
        .map(|pair| pair[1])
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
    fn the_tally_counts_the_real_tests_of_a_junit_report_and_their_failures() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="5" failures="1" errors="1">
  <testsuite name="kubewasm::e2e" tests="5">
    <testcase name="differential::real::a_write_is_refused" classname="kubewasm::e2e" time="1.2"/>
    <testcase name="differential::real::refused_writes" classname="kubewasm::e2e" time="2.0">
      <failure type="test failure">thread panicked</failure>
      <system-err>left: 1 &lt; right: 2</system-err>
    </testcase>
    <testcase name="envtest::real::servers_die" classname="kubewasm::e2e" time="0.4">
      <error type="SIGSEGV">crashed</error>
    </testcase>
    <testcase name="cli::real::rbac" classname="kubewasm::e2e" time="3.1">
      <system-out>ok</system-out>
    </testcase>
    <testcase name="differential::dev::a_write_is_refused" classname="kubewasm::e2e" time="0.1">
      <failure type="test failure">not the tier's</failure>
    </testcase>
  </testsuite>
</testsuites>"#;
        let tally = Tally::from_junit(xml);
        assert_eq!(
            tally,
            Tally {
                passed: 2,
                failed: 2
            }
        );
        assert_eq!(tally.counts(), "4 tests run: 2 passed, 2 failed");
        assert_eq!(Tally::from_junit("").counts(), "0 tests run: 0 passed");
    }
}
