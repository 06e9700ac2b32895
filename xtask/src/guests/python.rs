//! The Python guests (`examples-guests/python/`: the 0.1 example and the 0.2.2 sample-controller),
//! built by `kubewasm_build::python` (componentize-py).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example (`configmap-counter-python.wasm`).
pub const NAME: &str = "configmap-counter-python";

/// The 0.2.2 sample-controller (`examples-guests/python/sample-controller/`).
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
            Contract::V0_2_2,
            &example.join("sample-controller"),
        )?,
    ])
}

/// Bundles `source/app.py` (and the modules beside it) into `out_dir/NAME.wasm`.
fn build_one(ctx: &Ctx, name: &str, contract: Contract, source: &Path) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    contract.prepare(ctx)?;
    let bytes = kubewasm_build::python::build(
        &toolchain::toolchains(ctx),
        &contract.target(ctx),
        source,
        "app",
        &toolchain::scratch(ctx, &format!("python/{name}")),
    )?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}
