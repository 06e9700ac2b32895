//! The JavaScript guests (`examples-guests/js/`): `componentize-js` from npm embeds each example's
//! module (and the modules it imports) into a SpiderMonkey (StarlingMonkey) component.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example this module writes (`configmap-counter-js.wasm`).
pub const NAME: &str = "configmap-counter-js";
/// The 0.2 example this module writes (`configmap-propagator-js.wasm`), from
/// `examples-guests/js/propagator/`.
pub const PROPAGATOR: &str = "configmap-propagator-js";

/// Builds `examples-guests/js/controller.js` into `out_dir/configmap-counter-js.wasm` and
/// `propagator/propagator.js` into `out_dir/configmap-propagator-js.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let source = ctx.root.join("examples-guests/js");
    Ok(vec![
        build_one(ctx, Contract::V0_1, NAME, &source.join("controller.js"))?,
        build_one(
            ctx,
            Contract::V0_2,
            PROPAGATOR,
            &source.join("propagator/propagator.js"),
        )?,
    ])
}

fn build_one(ctx: &Ctx, contract: Contract, name: &str, module: &Path) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    let componentize_js = toolchain::componentize_js(ctx)?;
    let scratch = toolchain::scratch_dir(ctx, &format!("js-{name}"))?;
    let component = scratch.join(format!("{name}.wasm"));
    toolchain::run(
        Command::new(componentize_js)
            .arg(module)
            .arg("--wit")
            .arg(toolchain::contract_wit_dir(ctx, contract))
            .args(["--world-name", "controller"])
            // Without these the runtime's fetch support imports wasi:http, which the host (no
            // sockets for plugins) does not provide.
            .args(["--disable", "http", "fetch-event"])
            .arg("-o")
            .arg(&component),
    )?;
    let bytes = std::fs::read(&component)?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}
