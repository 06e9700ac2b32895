//! `kubewasm compile`: fills the compile cache ahead of a start (in an image build or an init
//! container), so the host's first start loads every plugin from the cache instead of
//! compiling it, in a fraction of the memory and time; or, with `--out`, writes precompiled
//! artifacts (`NAME.cwasm`: header naming engine, target and component, then the code) to
//! ship in the plugin's OCI artifact (`kubewasm push --precompiled`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;

use crate::app;
use crate::cli::CompileArgs;
use kubewasm_runtime::{EngineOptions, Origin, PluginEngine};

/// Compiles each plugin file (a directory: its `*.wasm` files) into the cache (or `--out`),
/// the smallest first, and prints one line per file; fails when any file would not load
/// (unless `--keep-going`).
pub async fn run(args: CompileArgs) -> anyhow::Result<ExitCode> {
    let mut files = Vec::new();
    for path in &args.plugins {
        files.extend(plugin_files(path).map_err(app::UsageError)?);
    }
    if let Some(out) = &args.out {
        return precompile(files, out, args.keep_going).await;
    }
    let cache_dir = args.cache_dir.unwrap_or_else(app::default_cache_dir);
    let mut sized: Vec<(u64, PathBuf)> = files
        .into_iter()
        .map(|f| (std::fs::metadata(&f).map_or(0, |m| m.len()), f))
        .collect();
    sized.sort();
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(cache_dir.clone()),
    })?;
    let mut failed = false;
    for (size, file) in sized {
        let started = Instant::now();
        let compiled = match std::fs::read(&file) {
            Ok(bytes) => engine
                .compile(&file, bytes)
                .await
                .map_err(anyhow::Error::from),
            Err(err) => Err(anyhow::Error::from(err).context("cannot read it")),
        };
        match compiled {
            Ok(compiled) => {
                let what = match compiled.origin() {
                    Origin::DiskCache => "already in the cache",
                    Origin::Precompiled => "precompiled code in the cache",
                    Origin::Compiled | Origin::Memory => "compiled",
                };
                println!(
                    "{}: {what} ({size} bytes, sha256 {}, {} ms)",
                    file.display(),
                    compiled.content_hash(),
                    started.elapsed().as_millis()
                );
            }
            Err(err) => {
                failed = true;
                println!("{}: FAILED: {err:#}", file.display());
            }
        }
    }
    println!("cache: {}", cache_dir.display());
    Ok(if failed && !args.keep_going {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes each file's precompiled artifact to `out/STEM.cwasm`, one at a time, and prints
/// one line per file with the engine it is for.
async fn precompile(files: Vec<PathBuf>, out: &Path, keep_going: bool) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let engine = PluginEngine::new(EngineOptions::default())?;
    let stamp = engine.stamp();
    let mut failed = false;
    for file in files {
        let started = Instant::now();
        let stem = file.file_stem().unwrap_or_default().to_string_lossy();
        let target = out.join(format!("{stem}.cwasm"));
        let written = async {
            let bytes = std::fs::read(&file).context("cannot read it")?;
            let artifact = engine.precompile(&file, bytes).await?;
            std::fs::write(&target, &artifact)
                .with_context(|| format!("cannot write {}", target.display()))?;
            anyhow::Ok(artifact.len())
        }
        .await;
        match written {
            Ok(size) => println!(
                "{}: {} ({size} bytes, {} ms)",
                file.display(),
                target.display(),
                started.elapsed().as_millis()
            ),
            Err(err) => {
                failed = true;
                println!("{}: FAILED: {err:#}", file.display());
            }
        }
    }
    println!(
        "precompiled for wasmtime {}, target {}, engine settings {}: loads only into a host \
         with the same three",
        stamp.wasmtime, stamp.target, stamp.engine
    );
    Ok(if failed && !keep_going {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `path` itself, or the `*.wasm` files of a directory, in name order.
fn plugin_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))?
    {
        let file = entry
            .with_context(|| format!("cannot read {}", path.display()))?
            .path();
        if file.extension().is_some_and(|e| e == "wasm") {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}
