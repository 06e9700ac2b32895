//! What the repository's polyglot guests share on top of the guest build (`kubewasm-build`): the
//! contract versions they target, the toolchains (installed into `target/toolchains/` when
//! missing), scratch directories and writing a checked component into place.

use std::path::PathBuf;
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
}

impl Contract {
    /// The directory of the version's WIT package.
    pub fn wit_dir(self, ctx: &Ctx) -> PathBuf {
        match self {
            Contract::V0_1 => ctx.wit_dir.clone(),
            Contract::V0_2 => ctx.wit_dir.join("0.2"),
        }
    }

    /// The version's `controller` world, what every example guest builds.
    pub fn target(self, ctx: &Ctx) -> Target {
        Target::controller(self.wit_dir(ctx))
    }
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
