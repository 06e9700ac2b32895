//! Peak memory of compiling one component, per wasmtime/Cranelift setting, each compile in a
//! fresh process of its own (so no compile sees another's freed memory):
//!
//! ```sh
//! cargo run -p kubewasm --example compile_memory -- target/plugins/*.wasm
//! cargo run -p kubewasm --example compile_memory -- --settings host,before target/plugins
//! ```
//!
//! Each compile starts from the host's engine configuration ([`engine_config`]) with one
//! setting changed, calls `Engine::precompile_component` (what the host's compile does), and
//! reports the process's peak resident set (`VmHWM` of `/proc/self/status`) above its resident
//! set just before compiling. The dev profile builds Cranelift, regalloc2 and wasmtime at
//! opt-level 2-3, so the memory is as in a release build; times are not (and the machine is
//! shared). Prints a Markdown table; `--one FILE SETTING` is the child's mode.
//!
//! `--write FILE SETTING OUT` writes the compiled code (an ELF object, with its functions'
//! symbols) to OUT instead, for reading the functions' stack frames with `objdump -d` (the
//! `sub $N,%rsp` of each prologue).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, bail, ensure};
use kubewasm_runtime::{CompileWork, EngineOptions, Origin, PluginEngine, engine_config};
use wasmtime::{Config, Engine, OptLevel, RegallocAlgorithm};

/// Every setting the tool knows, in table order: the host's configuration, then one change each.
const SETTINGS: &[(&str, &str)] = &[
    (
        "host",
        "what the host does: its engine configuration, and one function at a time and no address map where the component's plan says so (`CompileWork::plan`)",
    ),
    (
        "before",
        "wasmtime's defaults with epoch interruption (the host's configuration before issue 33)",
    ),
    ("serial", "parallel compilation off"),
    ("parallel", "parallel compilation on"),
    ("opt-none", "Cranelift opt level none"),
    ("opt-speed", "Cranelift opt level speed"),
    ("opt-speed-and-size", "Cranelift opt level speed_and_size"),
    ("no-address-map", "no address map"),
    ("debug-info", "DWARF debug info on"),
    (
        "symbols",
        "ELF symbols for the functions (`debug_symbols`, wasmtime's default; off in the host)",
    ),
    (
        "unwind-info",
        "native unwind info (`native_unwind_info`, wasmtime's default; off in the host)",
    ),
    ("single-pass", "regalloc2's single-pass allocator"),
    (
        "load",
        "what the host's load of a new file does: the file read after the baseline, then `PluginEngine::compile` with a compile cache (the plan's compile, the cache entry written and mapped, the component linked)",
    ),
];

/// The host's configuration with `setting` applied: one of [`SETTINGS`], or several joined
/// with `+` (applied left to right).
fn configure(setting: &str) -> anyhow::Result<Config> {
    let mut config = engine_config();
    for part in setting.split('+') {
        apply(&mut config, part)?;
    }
    Ok(config)
}

fn apply(config: &mut Config, setting: &str) -> anyhow::Result<()> {
    match setting {
        "host" | "load" => {}
        "before" => {
            *config = Config::new();
            config.epoch_interruption(true);
        }
        "serial" => {
            config.parallel_compilation(false);
        }
        "parallel" => {
            config.parallel_compilation(true);
        }
        "opt-none" => {
            config.cranelift_opt_level(OptLevel::None);
        }
        "opt-speed" => {
            config.cranelift_opt_level(OptLevel::Speed);
        }
        "opt-speed-and-size" => {
            config.cranelift_opt_level(OptLevel::SpeedAndSize);
        }
        "no-address-map" => {
            config.generate_address_map(false);
        }
        "debug-info" => {
            config.debug_info(true);
        }
        "symbols" => {
            config.debug_symbols(true);
        }
        "unwind-info" => {
            config.native_unwind_info(true);
        }
        "single-pass" => {
            config.cranelift_regalloc_algorithm(RegallocAlgorithm::SinglePass);
        }
        other => bail!("unknown setting {other}"),
    }
    Ok(())
}

/// `VmHWM` and `VmRSS` of this process, KiB.
fn memory_kib() -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .with_context(|| format!("no {name} in /proc/self/status"))
    };
    Ok((field("VmHWM:")?, field("VmRSS:")?))
}

/// The child: compiles `file` with `setting`, prints `before_kib peak_kib millis`.
fn one(file: &Path, setting: &str) -> anyhow::Result<()> {
    if setting == "load" {
        return load(file);
    }
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    // As the host does when it starts (`allocator::install`; `before` is the host before
    // issue 33, except in the musl build, where mimalloc's options are set before `main` in
    // every setting).
    if setting != "before" {
        kubewasm::allocator::limit_retained_memory();
    }
    let mut config = configure(setting)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if setting.split('+').any(|part| part == "host") {
        CompileWork::of(file, &bytes)?
            .plan(threads)
            .configure(&mut config);
    }
    let engine = Engine::new(&config)?;
    let (_, before) = memory_kib()?;
    let started = Instant::now();

    let compiled = engine
        .precompile_component(&bytes)
        .map_err(|e| anyhow::anyhow!("compiling {}: {e:#}", file.display()))?;
    let millis = started.elapsed().as_millis();
    let (peak, _) = memory_kib()?;
    drop(compiled);
    kubewasm::allocator::return_freed_memory();
    let (_, retained) = memory_kib()?;
    drop(engine);
    kubewasm::allocator::return_freed_memory();
    let (_, without_engine) = memory_kib()?;
    eprintln!(
        "resident before {before} KiB, peak {peak} KiB; after the compile and the allocator's \
         return {retained} KiB, and without the engine {without_engine} KiB"
    );
    println!("{before} {peak} {millis}");
    Ok(())
}

/// The child for `load`: the host's engine and allocator set-up, then what a reload of `file`
/// costs the host beyond its steady state, the file's bytes included (the reloader reads them
/// only once it sees a new version). Prints as [`one`].
fn load(file: &Path) -> anyhow::Result<()> {
    kubewasm::allocator::install();
    let cache = tempfile::tempdir()?;
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(cache.path().to_owned()),
    })?;
    let runtime = tokio::runtime::Runtime::new()?;
    let (_, before) = memory_kib()?;
    let started = Instant::now();
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let compiled = runtime
        .block_on(engine.compile(file, bytes))
        .with_context(|| format!("loading {}", file.display()))?;
    let millis = started.elapsed().as_millis();
    let (peak, retained) = memory_kib()?;
    ensure!(
        compiled.origin() == Origin::Compiled,
        "{} was not compiled: {:?}",
        file.display(),
        compiled.origin()
    );
    eprintln!(
        "resident before {before} KiB, peak {peak} KiB, resident with the component loaded {retained} KiB"
    );
    println!("{before} {peak} {millis}");
    Ok(())
}

/// The ten function bodies of `file` with the most locals x control blocks (`block`, `loop`,
/// `if`), which drive the register allocator's work more than bytes do: bytes, locals,
/// operators, blocks, branch targets (`br_table`), and the function's name where the component keeps a
/// name section (a guest built without `strip`).
fn functions(file: &Path) -> anyhow::Result<()> {
    use std::collections::HashMap;
    use wasmparser::{KnownCustom, Name, Operator, Parser, Payload, TypeRef};
    let bytes = std::fs::read(file)?;
    let mut rows = Vec::new();
    // Per core module (numbered in the order they start): imported functions, the next code
    // entry, and the names of its functions by index.
    let mut module = 0usize;
    let (mut imported, mut next) = (0u32, 0u32);
    let mut names: HashMap<(usize, u32), String> = HashMap::new();
    for payload in Parser::new(0).parse_all(&bytes) {
        match payload? {
            Payload::Version { .. } => {
                module += 1;
                (imported, next) = (0, 0);
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if matches!(import?.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::CustomSection(section) => {
                if let KnownCustom::Name(reader) = section.as_known() {
                    for name in reader {
                        if let Ok(Name::Function(map)) = name {
                            for naming in map.into_iter().flatten() {
                                names.insert((module, naming.index), naming.name.to_owned());
                            }
                        }
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let index = (module, imported + next);
                next += 1;
                let mut locals = 0u64;
                for local in body.get_locals_reader()? {
                    locals += u64::from(local?.0);
                }
                let (mut ops, mut blocks, mut targets) = (0u64, 0u64, 0u64);
                let mut reader = body.get_operators_reader()?;
                while !reader.eof() {
                    match reader.read()? {
                        Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => {
                            blocks += 1
                        }
                        Operator::BrTable { targets: t } => targets += u64::from(t.len()),
                        _ => {}
                    }
                    ops += 1;
                }
                rows.push((body.range().len(), locals, ops, blocks, targets, index));
            }
            _ => {}
        }
    }
    rows.sort_by_key(|&(len, locals, _, blocks, ..)| std::cmp::Reverse((locals * blocks, len)));
    println!(
        "| body bytes | locals | operators | blocks | br_table targets | locals x blocks | name |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (len, locals, ops, blocks, targets, index) in rows.iter().take(10) {
        let name = names.get(index).map_or("", String::as_str);
        println!(
            "| {len} | {locals} | {ops} | {blocks} | {targets} | {} | {name} |",
            locals * blocks
        );
    }
    Ok(())
}

/// Runs [`one`] in a fresh process; (resident before, peak above it) in MiB, and milliseconds.
fn measure(file: &Path, setting: &str) -> anyhow::Result<(f64, f64, u64)> {
    let out = Command::new(std::env::current_exe()?)
        .arg("--one")
        .arg(file)
        .arg(setting)
        .output()
        .context("running the child")?;
    if !out.status.success() {
        bail!(
            "{} with {setting}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("child printed {text:?}"))?;
    let [before, peak, millis] = fields[..] else {
        bail!("child printed {text:?}");
    };
    Ok((
        before as f64 / 1024.0,
        peak.saturating_sub(before) as f64 / 1024.0,
        millis,
    ))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--functions") {
        let [_, file] = &args[..] else {
            bail!("usage: --functions FILE");
        };
        return functions(Path::new(file));
    }
    if args.first().map(String::as_str) == Some("--write") {
        let [_, file, setting, out] = &args[..] else {
            bail!("usage: --write FILE SETTING OUT");
        };
        let bytes = std::fs::read(file).with_context(|| format!("reading {file}"))?;
        let mut config = configure(setting)?;
        // The functions' symbols, which the host leaves out, are what `objdump` names them by.
        config.debug_symbols(true);
        let compiled = Engine::new(&config)?
            .precompile_component(&bytes)
            .map_err(|e| anyhow::anyhow!("compiling {file}: {e:#}"))?;
        return std::fs::write(out, compiled).with_context(|| format!("writing {out}"));
    }
    if args.first().map(String::as_str) == Some("--one") {
        let [_, file, setting] = &args[..] else {
            bail!("usage: --one FILE SETTING");
        };
        return one(Path::new(file), setting);
    }
    let mut settings: Vec<&str> = SETTINGS.iter().map(|(name, _)| *name).collect();
    let mut files = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--settings" {
            let list = rest.next().context("--settings needs a list")?;
            settings = list.split(',').filter(|s| !s.is_empty()).collect();
            for s in &settings {
                configure(s)?;
            }
        } else {
            let path = PathBuf::from(arg);
            if path.is_dir() {
                let mut found: Vec<PathBuf> = std::fs::read_dir(&path)?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                    .collect();
                found.sort();
                files.extend(found);
            } else {
                files.push(path);
            }
        }
    }
    if settings.is_empty() {
        for file in &files {
            let work = CompileWork::of(file, &std::fs::read(file)?)?;
            println!("{}: {work:?}", file.display());
        }
        return Ok(());
    }
    if files.is_empty() {
        bail!("usage: compile_memory [--settings a,b] FILE_OR_DIR...");
    }

    println!("Settings:");
    for (name, what) in SETTINGS
        .iter()
        .filter(|(n, _)| settings.iter().any(|s| s.split('+').any(|p| p == *n)))
    {
        println!("- `{name}`: {what}");
    }
    println!();
    println!("Compile peak above the resident set before compiling, MiB (compile time, ms):");
    println!();
    print!(
        "| component | size | functions | body bytes | largest function | locals x blocks | host's estimate (MiB) |"
    );
    for s in &settings {
        print!(" `{s}` |");
    }
    println!();
    print!("|---|---|---|---|---|---|---|");
    for _ in &settings {
        print!("---|");
    }
    println!();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    for file in &files {
        let bytes = std::fs::read(file)?;
        let work = CompileWork::of(file, &bytes)?;
        print!(
            "| {} | {:.2} MiB | {} | {} | {} | {} | {} |",
            file.file_name().unwrap_or_default().to_string_lossy(),
            bytes.len() as f64 / (1024.0 * 1024.0),
            work.functions,
            work.body_bytes,
            work.largest_body,
            work.largest_locals_by_blocks,
            work.plan(threads).estimate_mib
        );
        for setting in &settings {
            let (_, peak, millis) = measure(file, setting)?;
            print!(" {peak:.0} ({millis}) |");
        }
        println!();
    }
    Ok(())
}
