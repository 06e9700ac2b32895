//! The Python guest (`examples-guests/python/`): `componentize-py` from PyPI bundles CPython, the
//! generated bindings and `app.py` into one component.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use super::{Ctx, toolchain};

/// The component this module writes (`configmap-counter-python.wasm`).
pub const NAME: &str = "configmap-counter-python";

/// Builds `examples-guests/python/` into `out_dir/configmap-counter-python.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let started = Instant::now();
    let componentize_py = toolchain::componentize_py(ctx)?;
    let scratch = toolchain::scratch_dir(ctx, "python")?;
    let component = scratch.join(format!("{NAME}.wasm"));
    toolchain::run(
        Command::new(componentize_py)
            .arg("-d")
            .arg(&ctx.wit_dir)
            .args(["-w", "controller", "componentize", "-p"])
            .arg(ctx.root.join("examples-guests/python"))
            .arg("app")
            .arg("-o")
            .arg(&component),
    )?;
    let bytes = std::fs::read(&component)?;
    Ok(vec![toolchain::write_component(
        ctx, NAME, &bytes, started,
    )?])
}
