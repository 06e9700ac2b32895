//! Running child processes: echo the command, fail with its exit status.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::Path;
use std::process::{Command, Stdio};

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

/// Runs `command` like [`run`], echoing its standard error line by line as it comes, and
/// returns with its result the last of those lines that `keep` picks (a test runner's summary),
/// so it can be repeated as the run's last line.
pub fn run_keeping_line(
    command: &mut Command,
    keep: impl Fn(&str) -> bool,
) -> (anyhow::Result<()>, Option<String>) {
    eprintln!("xtask: running {}", describe(command));
    let mut child = match command.stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(err) => {
            let err =
                anyhow::Error::new(err).context(format!("cannot start {}", describe(command)));
            return (Err(err), None);
        }
    };
    let mut kept = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line);
            eprintln!("{line}");
            if keep(&line) {
                kept = Some(line.into_owned());
            }
        }
    }
    let result = match child.wait() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(anyhow::anyhow!("{} failed: {status}", describe(command))),
        Err(err) => {
            Err(anyhow::Error::new(err).context(format!("waiting for {}", describe(command))))
        }
    };
    (result, kept)
}

/// `--color=always` when this process writes to a terminal: a child whose output is piped
/// through [`run_keeping_line`] would otherwise drop its colours.
pub fn color_arg() -> &'static str {
    if std::io::stderr().is_terminal() {
        "--color=always"
    } else {
        "--color=auto"
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_line_is_the_last_one_picked_and_a_failure_still_reports_it() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "echo '  Summary one' >&2; echo 'Summary [1.0s] 2 tests run' >&2; echo after >&2; \
             printf '\\377\\n' >&2; exit 3",
        ]);
        let (result, kept) =
            run_keeping_line(&mut command, |l| l.trim_start().starts_with("Summary"));
        assert!(result.unwrap_err().to_string().contains("exit status: 3"));
        assert_eq!(kept.as_deref(), Some("Summary [1.0s] 2 tests run"));
    }
}
