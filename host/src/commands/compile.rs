//! `kubewasm compile`: fills the compile cache ahead of a start (in an image build or an init
//! container), so the host's first start loads every plugin from the cache instead of
//! compiling it, in a fraction of the memory and time; or, with `--out`, writes precompiled
//! artifacts (`NAME.cwasm`: header naming engine, target and component, then the code) to
//! ship in the plugin's OCI artifact (`kubewasm push --precompiled`). With `--precompiled DIR`,
//! installs such artifacts into the cache instead of compiling (the deployment's init container).

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use sha2::{Digest as _, Sha256};

use crate::app;
use crate::cli::CompileArgs;
use crate::oci::MAX_PRECOMPILED_BYTES;
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
    let mut count = Counts::default();
    for (size, file) in sized {
        let started = Instant::now();
        let compiled = match std::fs::read(&file) {
            Ok(bytes) => {
                if let Some(dir) = &args.precompiled {
                    install(&engine, dir, &file, &bytes);
                }
                engine
                    .compile(&file, bytes)
                    .await
                    .map_err(anyhow::Error::from)
            }
            Err(err) => Err(anyhow::Error::from(err).context("cannot read it")),
        };
        match compiled {
            Ok(compiled) => {
                let what = match compiled.origin() {
                    Origin::DiskCache => {
                        count.cached += 1;
                        "already in the cache"
                    }
                    Origin::Precompiled => {
                        count.precompiled += 1;
                        "precompiled code in the cache"
                    }
                    Origin::Compiled | Origin::Memory => {
                        count.compiled += 1;
                        "compiled"
                    }
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
    println!(
        "cache: {} ({} compiled, {} from precompiled code, {} already there)",
        cache_dir.display(),
        count.compiled,
        count.precompiled,
        count.cached
    );
    Ok(if failed && !args.keep_going {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// How the files of one run got into the cache.
#[derive(Default)]
struct Counts {
    compiled: usize,
    precompiled: usize,
    cached: usize,
}

/// Installs `dir/STEM.cwasm`, when there is one, as the precompiled code of `file` (whose
/// bytes are `bytes`), so that loading `file` needs no compile. A missing artifact is silent;
/// one that cannot be read or is refused is printed with the reason, and the file is compiled.
fn install(engine: &PluginEngine, dir: &Path, file: &Path, bytes: &[u8]) {
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    let artifact = dir.join(format!("{stem}.cwasm"));
    let code = match read_bounded(&artifact, MAX_PRECOMPILED_BYTES) {
        Ok(Some(code)) => code,
        Ok(None) => return,
        Err(err) => {
            println!(
                "{}: precompiled code {} not used, compiling instead: {err:#}",
                file.display(),
                artifact.display()
            );
            return;
        }
    };
    let sha256: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if let Err(err) = engine.install_precompiled(&code, &sha256) {
        println!(
            "{}: precompiled code {} refused ({}), compiling instead: {err}",
            file.display(),
            artifact.display(),
            err.kind()
        );
    }
}

/// The contents of `path`, `None` when there is no such file, an error when it is larger than
/// `limit` bytes or cannot be read.
fn read_bounded(path: &Path, limit: usize) -> anyhow::Result<Option<Vec<u8>>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(anyhow::Error::from(err).context("cannot open it")),
    };
    let mut code = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut code)
        .context("cannot read it")?;
    if code.len() > limit {
        anyhow::bail!("it is over the limit of {limit} bytes");
    }
    Ok(Some(code))
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
