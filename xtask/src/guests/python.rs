//! The Python guests (`examples-guests/python/`: the 0.1 example and the 0.2 sample-controller):
//! `componentize-py` from PyPI bundles CPython, the generated bindings and `app.py` into one
//! component.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example (`configmap-counter-python.wasm`).
pub const NAME: &str = "configmap-counter-python";

/// The 0.2 sample-controller (`examples-guests/python/sample-controller/`).
pub const SAMPLE_CONTROLLER: &str = "sample-controller-python";

/// Builds `examples-guests/python/` into `out_dir/configmap-counter-python.wasm` and
/// `examples-guests/python/sample-controller/` into `out_dir/sample-controller-python.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let example = ctx.root.join("examples-guests/python");
    Ok(vec![
        build_one(ctx, NAME, Contract::V0_1, &example)?,
        build_one(
            ctx,
            SAMPLE_CONTROLLER,
            Contract::V0_2,
            &example.join("sample-controller"),
        )?,
    ])
}

/// Bundles `source/app.py` (and the modules beside it) with the bindings of the `controller`
/// world of `contract` into `out_dir/NAME.wasm`.
fn build_one(ctx: &Ctx, name: &str, contract: Contract, source: &Path) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    let componentize_py = toolchain::componentize_py(ctx)?;
    let scratch = toolchain::scratch_dir(ctx, &format!("python/{name}"))?;
    let component = scratch.join(format!("{name}.wasm"));
    toolchain::run(
        Command::new(componentize_py)
            .arg("-d")
            .arg(contract.wit_dir(ctx))
            .args(["-w", "controller", "componentize", "-p"])
            .arg(source)
            .arg("app")
            .arg("-o")
            .arg(&component),
    )?;
    let bytes = std::fs::read(&component)?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}
