//! C guests: wit-bindgen's C generator, Debian's clang-19 and wasi-libc (preview1 only, so the
//! module is a preview1 reactor), then a component through the preview1 reactor adapter.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use wit_bindgen_core::Files;

use crate::component::{self, Target};
use crate::toolchain::{self, Toolchains};

/// Writes the target world's bindings into `dir`: WORLD.h, WORLD.c and WORLD_component_type.o,
/// which carries the world's type information into the module; returns their paths.
pub fn bindings(target: &Target, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let (mut resolve, world) = target.resolve()?;
    let mut files = Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)?;
    let mut written = Vec::new();
    for (file, contents) in files.iter() {
        let path = dir.join(file);
        std::fs::write(&path, contents).with_context(|| format!("writing generated {file}"))?;
        written.push(path);
    }
    Ok(written)
}

/// Compiles `sources` with the target world's generated bindings (in `scratch`, emptied first)
/// and `include` on the include path; returns the component.
pub fn build(
    tools: &Toolchains,
    target: &Target,
    sources: &[PathBuf],
    include: &[PathBuf],
    scratch: &Path,
) -> anyhow::Result<Vec<u8>> {
    let clang = tools.clang()?;
    let scratch = toolchain::scratch_dir(scratch)?;
    let generated: Vec<PathBuf> = bindings(target, &scratch)?
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "c" || ext == "o"))
        .collect();
    let module = scratch.join("module.wasm");
    let mut command = Command::new(&clang);
    command
        .args([
            "--target=wasm32-wasi",
            "-mexec-model=reactor",
            "-Os",
            "-std=c11",
        ])
        .args(["-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"])
        .arg("-fuse-ld=lld")
        .arg("-Wl,--strip-all")
        .arg("-I")
        .arg(&scratch);
    for dir in include {
        command.arg("-I").arg(dir);
    }
    command
        .args(sources)
        .args(&generated)
        .arg("-o")
        .arg(&module);
    toolchain::run(&mut command)?;
    let module = std::fs::read(&module)?;
    component::componentize_reactor(&module)
}
