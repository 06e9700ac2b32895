//! What the repository's polyglot guests share on top of the guest build (`kubewasm-build`): the
//! contract versions they target, the toolchains (installed into `target/toolchains/` when
//! missing), scratch directories and writing a checked component into place.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use kubewasm_build::{Target, Toolchains, component};

use super::Ctx;

/// A version of the plugin contract a guest is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `kubewasm:controller@0.1.0` (`wit/`): event handlers only.
    V0_1,
    /// `kubewasm:controller@0.2.0` (`wit/0.2/`): handlers, the write client and reconcile.
    V0_2,
    /// `kubewasm:controller@0.2.2` (`wit/0.2.2/`, on 0.2.0 and 0.2.1): world `reconciler`, the
    /// 0.2.0 imports and `reconcile` with a declaration whose queue rules carry predicates.
    V0_2_2,
    /// `kubewasm:controller@0.3.0` (`wit/0.3/`, on 0.2.0 and 0.2.1): world `admission-policy`,
    /// the 0.2.0 imports and `plugin`, and the `admission` export.
    V0_3,
}

impl Contract {
    /// The directory of the version's WIT package, the packages it uses under `deps/`.
    pub fn wit_dir(self, ctx: &Ctx) -> PathBuf {
        match self {
            Contract::V0_1 => ctx.wit_dir.clone(),
            Contract::V0_2 => ctx.wit_dir.join("0.2"),
            Contract::V0_2_2 => ctx.root.join("target/guests-build/wit/0.2.2"),
            Contract::V0_3 => ctx.root.join("target/guests-build/wit/0.3"),
        }
    }

    /// The world every example guest of the version builds: `controller`, for 0.2.2 (which has
    /// none) `reconciler`, for 0.3 `admission-policy`.
    pub fn target(self, ctx: &Ctx) -> Target {
        let target = Target::controller(self.wit_dir(ctx));
        match self {
            Contract::V0_1 | Contract::V0_2 => target,
            Contract::V0_2_2 => Target {
                world: "reconciler".to_owned(),
                ..target
            },
            Contract::V0_3 => Target {
                world: "admission-policy".to_owned(),
                ..target
            },
        }
    }

    /// Makes [`Contract::wit_dir`] hold the version's WIT. 0.2.2's and 0.3's packages live in
    /// `wit/0.2.2/` and `wit/0.3/`, the packages they build on beside them (`wit/0.2/`,
    /// `wit/0.2.1/`); the guest toolchains (wit-parser, componentize-py, componentize-js) read one
    /// directory with the packages it uses under `deps/`, the layout `kubewasm wit` writes, so
    /// theirs is assembled there from `wit/`.
    pub fn prepare(self, ctx: &Ctx) -> anyhow::Result<()> {
        match self {
            Contract::V0_2_2 => assemble_v0_2_2(&ctx.wit_dir, &self.wit_dir(ctx)),
            Contract::V0_3 => assemble_v0_3(&ctx.wit_dir, &self.wit_dir(ctx)),
            Contract::V0_1 | Contract::V0_2 => Ok(()),
        }
    }
}

/// Writes 0.2.2's WIT into `dir` (emptied first) from the repository's `wit`: its package at the
/// top, 0.2.0's and 0.2.1's under `deps/`.
pub fn assemble_v0_2_2(wit: &Path, dir: &Path) -> anyhow::Result<()> {
    assemble(wit, dir, "0.2.2/predicates.wit")
}

/// Writes 0.3's WIT into `dir` (emptied first) from the repository's `wit`: its package at the
/// top, 0.2.0's and 0.2.1's under `deps/`.
pub fn assemble_v0_3(wit: &Path, dir: &Path) -> anyhow::Result<()> {
    assemble(wit, dir, "0.3/admission.wit")
}

/// Writes the package in `wit/PACKAGE` into `dir` (emptied first), with 0.2.0's and 0.2.1's
/// packages under `deps/`.
fn assemble(wit: &Path, dir: &Path, package: &str) -> anyhow::Result<()> {
    let dir = kubewasm_build::toolchain::scratch_dir(dir)?;
    let copy = |from: &str, to: &str| -> anyhow::Result<()> {
        let to = dir.join(to);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(wit.join(from), &to).with_context(|| format!("copying wit/{from}"))?;
        Ok(())
    };
    let top = Path::new(package)
        .file_name()
        .context("a package file name")?
        .to_string_lossy();
    copy(package, &top)?;
    copy(
        "0.2/controller.wit",
        "deps/kubewasm-controller-0.2.0/controller.wit",
    )?;
    copy(
        "0.2.1/batch.wit",
        "deps/kubewasm-controller-0.2.1/batch.wit",
    )
}

/// The toolchains, installed into `target/toolchains/` when missing.
pub fn toolchains(ctx: &Ctx) -> Toolchains {
    Toolchains::installing(&ctx.tools_dir)
}

/// Where a guest keeps its intermediate files (`target/guests-build/NAME/`).
pub fn scratch(ctx: &Ctx, name: &str) -> PathBuf {
    ctx.root.join("target/guests-build").join(name)
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
    component::check(bytes, &contract.target(ctx)).with_context(|| format!("checking {name}"))?;
    let path = ctx.out_dir.join(format!("{name}.wasm"));
    component::write_atomically(&path, bytes)?;
    eprintln!(
        "xtask: {name}: built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(path)
}
