//! C guests: wit-bindgen's C generator, Debian's clang-19 and wasi-libc (preview1 only, so the
//! module is a preview1 reactor), then a component through the preview1 reactor adapter.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use wit_bindgen_core::Files;

use crate::component::{self, Target};
use crate::toolchain::{self, Toolchains};

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
    let (mut resolve, world) = target.resolve()?;
    let mut files = Files::default();
    // Besides WORLD.c and WORLD.h this writes WORLD_component_type.o, which carries the world's
    // type information into the module.
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)?;
    let mut generated = Vec::new();
    for (file, contents) in files.iter() {
        let path = scratch.join(file);
        std::fs::write(&path, contents).with_context(|| format!("writing generated {file}"))?;
        if file.ends_with(".c") || file.ends_with(".o") {
            generated.push(path);
        }
    }
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
