//! Building guests: one module per language, each turning sources in `examples-guests/` (and the
//! test guests) into components in `target/plugins/` (test guests: `target/test-plugins/`).

mod rust;

mod c;
mod ctx;
mod go;
mod js;
mod python;
mod toolchain;

use std::path::PathBuf;

pub use ctx::Ctx;

/// Builds every guest of every language; returns the components written.
pub fn build_all(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(&ctx.out_dir)?;
    std::fs::create_dir_all(&ctx.test_out_dir)?;
    let mut built = Vec::new();
    built.extend(rust::build(ctx)?);
    built.extend(unless_unchanged(ctx, "c", c::build)?);
    built.extend(unless_unchanged(ctx, "python", python::build)?);
    built.extend(unless_unchanged(ctx, "js", js::build)?);
    built.extend(unless_unchanged(ctx, "go", go::build)?);
    Ok(built)
}

/// Runs a language's build unless nothing it reads changed since its components were written:
/// the example's sources, the WIT, and the sources of the build steps (`builder/`). Python,
/// JavaScript and Go builds are not byte-for-byte reproducible, so rebuilding unchanged sources
/// would hand a running `kubewasm dev` a "new" version of each to compile and reload.
fn unless_unchanged(
    ctx: &Ctx,
    language: &str,
    build: fn(&Ctx) -> anyhow::Result<Vec<PathBuf>>,
) -> anyhow::Result<Vec<PathBuf>> {
    let stamp_path = ctx.tools_dir.join("stamps").join(language);
    let stamp = inputs_hash(ctx, language)?;
    if let Ok(previous) = std::fs::read_to_string(&stamp_path) {
        let mut lines = previous.lines();
        let outputs: Vec<PathBuf> = lines.clone().skip(1).map(PathBuf::from).collect();
        if lines.next() == Some(stamp.as_str()) && outputs.iter().all(|p| p.is_file()) {
            eprintln!("xtask: {language} examples unchanged, not rebuilt");
            return Ok(outputs);
        }
    }
    let built = build(ctx)?;
    let mut record = stamp;
    for path in &built {
        record.push('\n');
        record.push_str(&path.to_string_lossy());
    }
    if let Some(dir) = stamp_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&stamp_path, record)?;
    Ok(built)
}

/// A hash of every file under `examples-guests/LANGUAGE/` and `wit/`, and of the running xtask.
fn inputs_hash(ctx: &Ctx, language: &str) -> anyhow::Result<String> {
    use std::hash::{Hash, Hasher};
    let mut files = Vec::new();
    // The build steps are hashed as sources, not as this binary: `cargo xtask test` rebuilds
    // the xtask binary under clippy while it runs, which leaves nothing at `current_exe`.
    for dir in [
        ctx.root.join("examples-guests").join(language),
        ctx.wit_dir.clone(),
        ctx.root.join("builder/src"),
        ctx.root.join("xtask/src/guests"),
    ] {
        collect_files(&dir, &mut files)?;
    }
    files.sort();
    let mut hasher = std::hash::DefaultHasher::new();
    for file in &files {
        file.hash(&mut hasher);
        std::fs::read(file)?.hash(&mut hasher);
    }
    Ok(format!("{:016x}", hasher.finish()))
}

fn collect_files(dir: &std::path::Path, into: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if matches!(name.as_deref(), Some("node_modules" | "__pycache__")) {
            continue;
        }
        if path.is_dir() {
            collect_files(&path, into)?;
        } else {
            into.push(path);
        }
    }
    Ok(())
}

/// Prints one line per component: its path and size.
pub fn print_summary(built: &[PathBuf]) {
    for path in built {
        let size = std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
        eprintln!(
            "xtask: built {} ({} KiB)",
            path.display(),
            size.div_ceil(1024)
        );
    }
}
