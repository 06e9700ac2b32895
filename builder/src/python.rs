//! Python guests: `componentize-py` bundles CPython, the generated bindings and the app module
//! (with the modules beside it) into one component.

use std::path::Path;
use std::process::Command;

use crate::component::Target;
use crate::toolchain::{self, Toolchains};

/// Bundles `source/MODULE.py` (and the modules beside it, then those in each of `libraries`)
/// with the target world's bindings; `scratch` (emptied first) holds the output; returns the
/// component.
pub fn build(
    tools: &Toolchains,
    target: &Target,
    source: &Path,
    libraries: &[&Path],
    module: &str,
    scratch: &Path,
) -> anyhow::Result<Vec<u8>> {
    let componentize_py = tools.componentize_py()?;
    let scratch = toolchain::scratch_dir(scratch)?;
    let component = scratch.join("component.wasm");
    let mut command = Command::new(componentize_py);
    command
        .arg("-d")
        .arg(&target.wit_dir)
        .arg("-w")
        .arg(&target.world)
        .args(["componentize", "-p"])
        .arg(source);
    for library in libraries {
        command.arg("-p").arg(library);
    }
    toolchain::run(command.arg(module).arg("-o").arg(&component))?;
    Ok(std::fs::read(&component)?)
}
