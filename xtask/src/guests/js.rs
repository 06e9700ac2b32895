//! The JavaScript guest (`examples-guests/js/`): `componentize-js` from npm embeds
//! `controller.js` into a SpiderMonkey (StarlingMonkey) component.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use super::{Ctx, toolchain};

/// The component this module writes (`configmap-counter-js.wasm`).
pub const NAME: &str = "configmap-counter-js";

/// Builds `examples-guests/js/` into `out_dir/configmap-counter-js.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let started = Instant::now();
    let componentize_js = toolchain::componentize_js(ctx)?;
    let scratch = toolchain::scratch_dir(ctx, "js")?;
    let component = scratch.join(format!("{NAME}.wasm"));
    toolchain::run(
        Command::new(componentize_js)
            .arg(ctx.root.join("examples-guests/js/controller.js"))
            .arg("--wit")
            .arg(&ctx.wit_dir)
            .args(["--world-name", "controller"])
            // Without these the runtime's fetch support imports wasi:http, which the host (no
            // sockets for plugins) does not provide.
            .args(["--disable", "http", "fetch-event"])
            .arg("-o")
            .arg(&component),
    )?;
    let bytes = std::fs::read(&component)?;
    Ok(vec![toolchain::write_component(
        ctx, NAME, &bytes, started,
    )?])
}
