//! The `kubewasm` binary: parses the command line and runs a subcommand.

use std::process::ExitCode;

use clap::Parser as _;
use kubewasm::app::UsageError;
use kubewasm::cli::Cli;
use kubewasm::logging::LogFormat;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };
    let log_file = cli.command.log_file();
    let logged = match &log_file {
        Some(path) => kubewasm::logging::init_file(cli.log_format, &cli.log, path),
        None => kubewasm::logging::init(cli.log_format, &cli.log),
    };
    // The error is printed on stderr below; it is logged too only where the log is not that
    // same stream as text (a file, or JSON lines for a collector), so no one reads it twice.
    let log_the_error = log_file.is_some() || cli.log_format == LogFormat::Json;
    if let Err(err) = logged {
        eprintln!("kubewasm: {err:#}");
        return ExitCode::from(2);
    }
    kubewasm::allocator::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("kubewasm: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(kubewasm::commands::run(cli.command)) {
        Ok(code) => code,
        Err(err) => {
            let usage = err.downcast_ref::<UsageError>().is_some();
            if log_the_error {
                tracing::error!("{err:#}");
            }
            eprintln!("kubewasm: {err:#}");
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}
