//! JavaScript guests: `componentize-js` embeds the module (and the modules it imports) into a
//! SpiderMonkey (StarlingMonkey) component.

use std::path::Path;
use std::process::Command;

use crate::component::Target;
use crate::toolchain::{self, Toolchains};

/// Builds the ES module `module` for the target world; `scratch` (emptied first) holds the
/// output; returns the component.
pub fn build(
    tools: &Toolchains,
    target: &Target,
    module: &Path,
    scratch: &Path,
) -> anyhow::Result<Vec<u8>> {
    let componentize_js = tools.componentize_js()?;
    let scratch = toolchain::scratch_dir(scratch)?;
    let component = scratch.join("component.wasm");
    toolchain::run(
        Command::new(componentize_js)
            .arg(module)
            .arg("--wit")
            .arg(&target.wit_dir)
            .arg("--world-name")
            .arg(&target.world)
            // Without these the runtime's fetch support imports wasi:http, which the host (no
            // sockets for plugins) does not provide.
            .args(["--disable", "http", "fetch-event"])
            .arg("-o")
            .arg(&component),
    )?;
    Ok(std::fs::read(&component)?)
}
