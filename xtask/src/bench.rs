//! `cargo xtask bench`: runs every benchmark in release and writes BENCHMARKS.md.
//!
//! Each benchmark prints a Markdown section on stdout (progress goes to stderr); this gathers
//! them under one header naming the machine, the toolchain and the date, so the figures that
//! are compared side by side were measured in one run on one machine.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context as _;

use crate::{cmd, guests, image};

/// (bench target, title), in the order of the data flow: API server, informer, plugins.
const BENCHES: [(&str, &str); 12] = [
    (
        "watch_fanout",
        "Development API server: watch fan-out and lists",
    ),
    (
        "initial_sync",
        "Informer: initial sync and memory, against kube-runtime",
    ),
    (
        "initial_sync_real",
        "Informer: protobuf against JSON on a real kube-apiserver (issue 37)",
    ),
    ("dispatch", "Informer: event dispatch"),
    (
        "plugin_runtime",
        "Plugins: wasm guests against native handlers",
    ),
    ("reload", "Plugins: hot reload"),
    (
        "propagator",
        "Controllers: the ConfigMap propagators (JavaScript, C)",
    ),
    (
        "controller_languages",
        "Controllers: the sample-controller in each language",
    ),
    ("admission", "Admission: reviews per second and latency"),
    (
        "admission_apiserver",
        "Admission: latency seen by kube-apiserver",
    ),
    (
        "journey",
        "Plugin authors: from `kubewasm new` to a green test, per language",
    ),
    (
        "density",
        "Density: N plugins in one host against N controllers (issue 37)",
    ),
];

/// Benches that load the example components of `target/plugins/` (built first).
const NEEDS_EXAMPLES: [&str; 5] = [
    "propagator",
    "controller_languages",
    "admission",
    "admission_apiserver",
    "density",
];

/// Every benchmark is built and run with all bench packages selected, so shared dependencies
/// get one feature set and are compiled once, not once per package.
const PACKAGES: [&str; 6] = [
    "-p",
    "kubewasm-devserver",
    "-p",
    "kubewasm-informer",
    "-p",
    "kubewasm",
];

pub fn run(ctx: &guests::Ctx, only: &[String]) -> anyhow::Result<()> {
    let mut sections = Vec::new();
    let packages = PACKAGES.join(" ");
    for (bench, title) in BENCHES {
        if !only.is_empty() && !only.iter().any(|o| o == bench) {
            continue;
        }
        if NEEDS_EXAMPLES.contains(&bench) {
            guests::build_all(ctx)?;
        }
        let command = format!("cargo bench {packages} --bench {bench}");
        eprintln!("xtask: {command}");
        let load_before = load_average();
        let output = cmd::command("cargo", &ctx.root)
            .arg("bench")
            .args(PACKAGES)
            .args(["--bench", bench])
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running bench {bench}"))?;
        anyhow::ensure!(
            output.status.success(),
            "bench {bench} failed: {}",
            output.status
        );
        let body = String::from_utf8_lossy(&output.stdout);
        sections.push(format!(
            "## {title}\n\n`{command}`\n\nRun {}. {}\n\n{}",
            shell("date -u '+%Y-%m-%d %H:%M UTC'"),
            load_note(&load_before, &load_average()),
            demote_headings(body.trim())
        ));
    }
    if only.is_empty() || only.iter().any(|o| o == "image") {
        let built = image::build(&ctx.root, image::Profile::Release)?;
        sections.push(format!(
            "## Container image\n\n`cargo xtask image`\n\n\
             | what | size |\n|---|---|\n\
             | `target/image/kubewasm.oci.tar` (one gzip layer, from scratch) | {:.1} MiB |\n\
             | `kubewasm`, static (`x86_64-unknown-linux-musl`, release, symbols kept) | {:.1} MiB |",
            image::mib(&built.archive),
            image::mib(&built.binary)
        ));
    }
    let path = ctx.root.join("BENCHMARKS.md");
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let header = format!(
        "# Benchmarks\n\n\
         Written by `cargo xtask bench` (in release, one after the other on one machine; \
         `cargo xtask bench NAME...` reruns some and replaces only their sections, each of which \
         says when it ran). Regenerate after a change that touches a hot path.\n\n\
         - last written: {}\n- machine: {}\n- toolchain: {}",
        shell("date -u '+%Y-%m-%d %H:%M UTC'"),
        machine(),
        shell("rustc --version"),
    );
    let doc = splice(&existing, &header, &sections);
    std::fs::write(&path, doc).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

/// The file with `header` in place of its first section (the text before the first `## `), each
/// of `sections` in place of the section with its heading, and sections not rerun (another
/// bench's, or one measured by hand) kept as they were; new sections are appended.
fn splice(existing: &str, header: &str, sections: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in existing.lines() {
        if line.starts_with("## ") || parts.is_empty() {
            parts.push(String::new());
        }
        if let Some(part) = parts.last_mut() {
            part.push_str(line);
            part.push('\n');
        }
    }
    let heading = |text: &str| text.lines().next().unwrap_or_default().to_owned();
    let mut body: Vec<String> = parts
        .into_iter()
        .filter(|p| p.starts_with("## "))
        .map(|p| p.trim_end().to_owned())
        .collect();
    for section in sections {
        let section = section.trim_end().to_owned();
        match body.iter_mut().find(|p| heading(p) == heading(&section)) {
            Some(old) => *old = section,
            None => body.push(section),
        }
    }
    let mut doc = header.trim_end().to_owned();
    for part in body {
        doc.push_str("\n\n");
        doc.push_str(&part);
    }
    doc.push('\n');
    doc
}

/// A benchmark's own headings sit below the section heading this file gives it; its plain lines
/// are separate paragraphs.
fn demote_headings(text: &str) -> String {
    let mut out = String::new();
    let mut previous: Option<&str> = None;
    for line in text.lines() {
        let table = |l: &str| l.starts_with('|');
        let list = |l: &str| l.starts_with("- ");
        if let Some(prev) = previous
            && !prev.is_empty()
            && !line.is_empty()
            && (table(prev) != table(line) || (!table(line) && (!list(prev) || !list(line))))
        {
            out.push('\n');
        }
        match line.strip_prefix('#') {
            Some(heading) => {
                out.push_str("###");
                out.push_str(heading.trim_start_matches('#'));
            }
            None => out.push_str(line),
        }
        out.push('\n');
        previous = Some(line);
    }
    out
}

/// The 1-minute load average, from /proc/loadavg.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Says whether other work shared the machine while a benchmark ran: wall times then run long,
/// and the CPU-time figures are the ones to compare.
fn load_note(before: &Option<f64>, after: &Option<f64>) -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    match (before, after) {
        (Some(b), Some(a)) if b.max(*a) > 0.5 * cores => format!(
            "Machine shared: 1-minute load average {b:.1} before, {a:.1} after, on {cores} \
             cores (other builds were running); wall times are inflated, prefer the CPU-time \
             figures."
        ),
        (Some(b), Some(a)) => {
            format!("1-minute load average {b:.1} before, {a:.1} after, on {cores} cores.")
        }
        _ => "Load average unknown.".into(),
    }
}

fn shell(script: &str) -> String {
    std::process::Command::new("sh")
        .args(["-c", script])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb >> 20);
    let os = if Path::new("/etc/debian_version").exists() {
        format!("Debian {}", shell("cat /etc/debian_version"))
    } else {
        "Linux".into()
    };
    format!("{cores} cores ({cpu}), {mem} GiB, {os}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_partial_run_replaces_only_its_sections() {
        let existing = "# Benchmarks\n\nold header\n\n## A\n\nold a\n\n## B\n\nby hand\n";
        let doc = super::splice(
            existing,
            "# Benchmarks\n\nnew header",
            &["## A\n\nnew a\n".into(), "## C\n\nnew c".into()],
        );
        assert_eq!(
            doc,
            "# Benchmarks\n\nnew header\n\n## A\n\nnew a\n\n## B\n\nby hand\n\n## C\n\nnew c\n"
        );
    }

    #[test]
    fn bench_output_becomes_markdown_below_the_section_heading() {
        let text = "# Title\nfirst\nsecond\n| a |\n|---|\n| 1 |\nafter\n- x\n- y";
        assert_eq!(
            super::demote_headings(text),
            "### Title\n\nfirst\n\nsecond\n\n| a |\n|---|\n| 1 |\n\nafter\n\n- x\n- y\n"
        );
    }
}
