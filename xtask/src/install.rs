//! Installing what a chore needs on a fresh machine: Debian packages and rustup targets. Each
//! check is cheap, so every command can call these first.

use std::process::Command;

use anyhow::{Context, bail};

use crate::cmd;

/// Installs the Debian `packages` with apt-get unless `present` says they are there already.
/// `why` names the chore in the message a non-root user gets instead.
pub fn apt(packages: &[&str], present: impl Fn() -> bool, why: &str) -> anyhow::Result<()> {
    if present() {
        return Ok(());
    }
    if !is_root() {
        bail!(
            "{why} needs the Debian packages {}: install them (as root: apt-get install {})",
            packages.join(" "),
            packages.join(" ")
        );
    }
    eprintln!("xtask: installing {} with apt-get", packages.join(" "));
    let install = || {
        let mut command = Command::new("apt-get");
        command
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive");
        cmd::run(&mut command)
    };
    if install().is_err() {
        // A fresh machine may have no package lists yet.
        cmd::run(Command::new("apt-get").arg("update"))?;
        install()?;
    }
    Ok(())
}

/// Installs a Rust target's standard library through rustup when it is missing. Without rustup
/// (a toolchain installed otherwise) nothing is done and cargo reports what is missing.
pub fn rustup_target(target: &str) -> anyhow::Result<()> {
    let Ok(installed) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return Ok(());
    };
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|line| line.trim() == target)
    {
        return Ok(());
    }
    let cwd = std::env::current_dir()?;
    cmd::run(cmd::command("rustup", &cwd).args(["target", "add", target]))
        .with_context(|| format!("installing the {target} target"))
}

/// Whether this process runs as root (apt-get works, chroot works): the guest builder's check.
pub use kubewasm_build::toolchain::is_root;
