//! `kubewasm check`: loads plugin files as the host would and reports what each declares.

use std::process::ExitCode;

use crate::cli::CheckArgs;
use crate::{app, inspect};

/// Prints a report per file; fails when any file would not load.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let config = app::load_config(args.config.as_deref())?;
    let mut failed = false;
    for file in &args.files {
        match inspect::inspect_file(file, &config).await {
            Ok(report) => print!("{report}"),
            Err(err) => {
                failed = true;
                println!("{}: FAILED: {err:#}\n", file.display());
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
