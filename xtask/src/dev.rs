//! `cargo xtask dev`: build the guests, then run `kubewasm dev` on them, the example manifests
//! and the example config (`examples/kubewasm-dev.toml`: the config strings of the examples that
//! need one).

use crate::{cmd, guests};

/// Builds every guest, then runs the host's `dev` command with `extra` appended to its arguments
/// (a `--config` among them replaces the example config).
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
            .args(example_config(ctx, extra))
            .args(extra),
    )
}

/// `--config examples/kubewasm-dev.toml`, unless `extra` or `KUBEWASM_CONFIG` names a config of
/// its own.
fn example_config(ctx: &guests::Ctx, extra: &[String]) -> Vec<std::ffi::OsString> {
    let own = std::env::var_os("KUBEWASM_CONFIG").is_some()
        || extra
            .iter()
            .any(|arg| arg == "--config" || arg.starts_with("--config="));
    if own {
        return Vec::new();
    }
    vec![
        "--config".into(),
        ctx.root.join("examples/kubewasm-dev.toml").into_os_string(),
    ]
}
