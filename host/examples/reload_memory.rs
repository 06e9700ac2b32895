//! Resident memory of a `kubewasm dev` process through consecutive hot reloads of one plugin,
//! each with new bytes (a custom section appended: a compile-cache miss, the same code), from a
//! host started on a warm compile cache, as a deployment's pod is:
//!
//! ```sh
//! cargo run -p kubewasm --example reload_memory -- \
//!     --kubewasm target/debug/kubewasm --plugin target/plugins/sample-controller.wasm
//! cargo run -p kubewasm --example reload_memory -- \
//!     --kubewasm target/debug/kubewasm --plugin target/plugins --plugin /tmp/lto/sample-controller.wasm
//! ```
//!
//! `--kubewasm` may be any build of the binary (the static musl one included), so builds are
//! compared by the same harness. The cache is filled first by `kubewasm compile` in a process of
//! its own. The host runs the plugin alone, with the example manifests and config; "steady" is
//! its resident set once the plugin is loaded and has settled, "peak" the kernel's high-water
//! mark of the process (`VmHWM`), "end" the resident set once the last version has loaded and
//! settled. `--plugin` may be given more than once, and a directory stands for every `*.wasm` in
//! it: each plugin gets a host of its own, one after the other. Prints a Markdown table, one row
//! per plugin (a plugin whose reloads failed says why in its row, and the tool then fails).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use kubewasm_tests::{free_port, http_get as get, variant};
use sha2::{Digest, Sha256};

/// A child process killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `VmRSS` and `VmHWM` of process `pid`, MiB.
fn memory_mib(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map(|kib| kib / 1024.0)
            .with_context(|| format!("no {name}"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// Polls `check` every 100 ms until it answers `Some`, for at most `patience`.
fn wait_for<T>(
    what: &str,
    patience: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(found) = check() {
            return Ok(found);
        }
        ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The content hash `/plugins` lists for the plugin loaded from `file_name`, once it runs.
fn loaded_hash(port: u16, file_name: &str) -> Option<String> {
    let (_, body) = get(port, "/plugins")?;
    let listing: serde_json::Value = serde_json::from_str(&body).ok()?;
    listing["plugins"]
        .as_array()?
        .iter()
        .find(|p| p["source"].as_str().is_some_and(|s| s.ends_with(file_name)))
        .and_then(|p| p["content_hash"].as_str().map(str::to_owned))
}

/// What one plugin's reloads did to the host, MiB.
struct Row {
    steady: f64,
    peak: f64,
    after: Vec<f64>,
    end: f64,
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
struct Args {
    kubewasm: PathBuf,
    /// Every plugin given, in order: each `--plugin` file, and each directory's `*.wasm` by name.
    plugins: Vec<PathBuf>,
    reloads: u32,
}

const USAGE: &str = "usage: reload_memory --kubewasm BIN --plugin FILE_OR_DIR... [--reloads N]";

fn parse(mut args: impl Iterator<Item = String>) -> anyhow::Result<Args> {
    let mut kubewasm = None;
    let mut plugins = Vec::new();
    let mut reloads = 10u32;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--kubewasm" => kubewasm = Some(PathBuf::from(args.next().context(USAGE)?)),
            "--plugin" => plugins.extend(components(Path::new(&args.next().context(USAGE)?))?),
            "--reloads" => {
                let n = args.next().context(USAGE)?;
                reloads = n.parse().with_context(|| format!("--reloads {n}"))?;
            }
            other => bail!("unknown argument {other}; {USAGE}"),
        }
    }
    let kubewasm = kubewasm.context(USAGE)?;
    ensure!(!plugins.is_empty(), "no plugin given; {USAGE}");
    Ok(Args {
        kubewasm,
        plugins,
        reloads,
    })
}

fn main() -> anyhow::Result<()> {
    let Args {
        kubewasm,
        plugins,
        reloads,
    } = parse(std::env::args().skip(1))?;
    // The plugins are named first, so a table that lacks one of them shows it.
    println!(
        "Binary {}; {reloads} reloads of each of {} plugins ({}), MiB:",
        kubewasm.display(),
        plugins.len(),
        plugins
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!();
    println!(
        "| plugin | steady | peak | peak - steady | resident after each reload | end | end / steady |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut failed = Vec::new();
    for plugin in &plugins {
        let name = plugin.file_name().unwrap_or_default().to_string_lossy();
        match reload(&kubewasm, plugin, reloads) {
            Ok(row) => println!(
                "| {name} | {:.0} | {:.0} | {:.0} | {} | {:.0} | {:.2} |",
                row.steady,
                row.peak,
                row.peak - row.steady,
                row.after
                    .iter()
                    .map(|m| format!("{m:.0}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                row.end,
                row.end / row.steady
            ),
            Err(e) => {
                println!("| {name} | failed: {e:#} | | | | | |");
                failed.push(name.into_owned());
            }
        }
    }
    ensure!(failed.is_empty(), "failed: {}", failed.join(", "));
    Ok(())
}

/// `path` itself, or every `*.wasm` directly in it when it is a directory, by name.
fn components(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
        let file = entry?.path();
        if file.extension().is_some_and(|e| e == "wasm") {
            found.push(file);
        }
    }
    found.sort();
    Ok(found)
}

/// Starts a host from a warm cache with `plugin` alone and hands it `reloads` new versions.
fn reload(kubewasm: &Path, plugin: &Path, reloads: u32) -> anyhow::Result<Row> {
    let work = tempfile::tempdir()?;
    let plugins = work.path().join("plugins");
    let cache = work.path().join("cache");
    std::fs::create_dir(&plugins)?;
    let file_name = plugin
        .file_name()
        .context("a plugin file name")?
        .to_string_lossy()
        .into_owned();
    let original =
        std::fs::read(plugin).with_context(|| format!("reading {}", plugin.display()))?;
    std::fs::write(plugins.join(&file_name), &original)?;

    let compiled = Command::new(kubewasm)
        .arg("compile")
        .arg(&plugins)
        .arg("--cache-dir")
        .arg(&cache)
        .stdout(Stdio::null())
        .status()?;
    ensure!(compiled.success(), "kubewasm compile failed");

    let port = free_port();
    let log = work.path().join("host.log");
    let host = Host(
        kubewasm_tests::dev_host_command(kubewasm, &plugins, work.path(), &cache, port)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()?,
    );
    let pid = host.0.id();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let patience = Duration::from_secs(600);
    let first = hex(&Sha256::digest(&original));
    wait_for("the first version", patience, || {
        (loaded_hash(port, &file_name).as_deref() == Some(first.as_str())).then_some(())
    })
    .with_context(log_text)?;
    let steady = settled_rss(pid)?;

    let mut after = Vec::new();
    for n in 1..=reloads {
        let bytes = variant(&original, n);
        let hash = hex(&Sha256::digest(&bytes));
        let staged = work.path().join("staged.wasm");
        std::fs::write(&staged, &bytes)?;
        std::fs::rename(&staged, plugins.join(&file_name))?;
        wait_for(&format!("version {n}"), patience, || {
            (loaded_hash(port, &file_name).as_deref() == Some(hash.as_str())).then_some(())
        })
        .with_context(log_text)?;
        after.push(memory_mib(pid)?.0);
    }
    let end = settled_rss(pid)?;
    let (_, peak) = memory_mib(pid)?;
    Ok(Row {
        steady,
        peak,
        after,
        end,
    })
}

/// The resident set once it has stopped moving: two readings 2 s apart within 2 MiB (the
/// reloader's unload of an old version, and the allocator's return of freed memory, finish
/// after a load is listed).
fn settled_rss(pid: u32) -> anyhow::Result<f64> {
    let mut last = memory_mib(pid)?.0;
    wait_for("a settled resident set", Duration::from_secs(120), || {
        std::thread::sleep(Duration::from_secs(2));
        let now = memory_mib(pid).ok()?.0;
        let settled = (now - last).abs() < 2.0;
        last = now;
        settled.then_some(now)
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> anyhow::Result<Args> {
        parse(list.iter().map(|a| a.to_string()))
    }

    #[test]
    fn every_plugin_given_is_measured_in_order() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for name in ["b.wasm", "a.wasm", "notes.txt"] {
            std::fs::write(dir.path().join(name), b"").expect("a file");
        }
        let dir_arg = dir.path().to_str().expect("a UTF-8 path");
        let parsed = args(&[
            "--plugin",
            "/x/first.wasm",
            "--kubewasm",
            "/bin/kubewasm",
            "--plugin",
            dir_arg,
            "--plugin",
            "/x/last.wasm",
            "--reloads",
            "3",
        ])
        .expect("valid arguments");
        assert_eq!(
            parsed,
            Args {
                kubewasm: PathBuf::from("/bin/kubewasm"),
                plugins: vec![
                    PathBuf::from("/x/first.wasm"),
                    dir.path().join("a.wasm"),
                    dir.path().join("b.wasm"),
                    PathBuf::from("/x/last.wasm"),
                ],
                reloads: 3,
            }
        );
    }

    #[test]
    fn arguments_missing_or_unknown_are_refused() {
        for (list, says) in [
            (&["--plugin", "/x/a.wasm"][..], "usage"),
            (&["--kubewasm", "/bin/kubewasm"][..], "no plugin given"),
            (&["--kubewasm", "/bin/k", "--plugin"][..], "usage"),
            (
                &[
                    "--kubewasm",
                    "/bin/k",
                    "--plugin",
                    "/x/a.wasm",
                    "--reloads",
                    "ten",
                ][..],
                "--reloads ten",
            ),
            (
                &["--kubewasm", "/bin/k", "--plugins", "/x"][..],
                "unknown argument --plugins",
            ),
        ] {
            let error = format!("{:#}", args(list).expect_err("refused"));
            assert!(error.contains(says), "{list:?}: {error}");
        }
    }
}
