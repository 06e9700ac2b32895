//! The subcommands of the `kubewasm` binary, one module each. The library modules they call
//! (`app`, `inspect`, `rbac`, `oci`, ...) never import a command.

mod build;
mod check;
mod compile;
mod dev;
mod new;
mod oci;
mod rbac;
mod run;
mod test;
mod webhooks;
mod wit;

use std::process::ExitCode;

use crate::cli::Command;

/// Runs one subcommand to its end; the exit code says how it went.
pub async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Dev(args) => dev::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Check(args) => check::run(args).await,
        Command::Compile(args) => compile::run(args).await,
        Command::Rbac(args) => rbac::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Webhooks(args) => webhooks::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Push(args) => oci::push(args).await.map(|()| ExitCode::SUCCESS),
        Command::Pull(args) => oci::pull(args).await.map(|()| ExitCode::SUCCESS),
        Command::Build(args) => build::run(args).await,
        Command::Test(args) => test::run(args).await,
        Command::New(args) => new::run(args).map(|()| ExitCode::SUCCESS),
        Command::Wit(args) => wit::run(args).map(|()| ExitCode::SUCCESS),
    }
}
