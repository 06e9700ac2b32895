//! `cargo xtask dev`: build the guests, then run `kubewasm dev` on them and the example manifests.

use crate::{cmd, guests};

/// Builds every guest, then runs the host's `dev` command with `extra` appended to its arguments.
pub fn run(ctx: &guests::Ctx, extra: &[String]) -> anyhow::Result<()> {
    let built = guests::build_all(ctx)?;
    guests::print_summary(&built);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    cmd::run(
        cmd::command(cargo, &ctx.root)
            .args(["run", "-p", "kubewasm", "--", "dev", "--plugins"])
            .arg(&ctx.out_dir)
            .arg("--manifests")
            .arg(ctx.root.join("examples/manifests"))
            .args(extra),
    )
}
