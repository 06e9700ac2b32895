//! Running child processes: echo the command, fail with its exit status.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};

/// A `Command` for `program` started in `dir`.
pub fn command(program: impl AsRef<OsStr>, dir: &Path) -> Command {
    let mut command = Command::new(program);
    command.current_dir(dir);
    command
}

/// Runs `command` to completion with inherited stdio; an error when it cannot start or fails.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: running {}", describe(command));
    let status = command
        .status()
        .with_context(|| format!("cannot start {}", describe(command)))?;
    if !status.success() {
        bail!("{} failed: {status}", describe(command));
    }
    Ok(())
}

/// Whether `program args..` starts and exits successfully (output discarded): tool detection.
pub fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

/// `program arg arg ..` for messages.
fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}
