//! `kubewasm check`: loads plugin files as the host would and reports what each declares.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::CheckArgs;
use crate::{app, inspect};

/// Prints a report per file; fails when any file would not load.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let (config, config_file) = app::load_project_config(args.config.as_deref(), Path::new("."))?;
    match &config_file {
        Some(file) => eprintln!("kubewasm: grants from {}", file.display()),
        None => eprintln!(
            "kubewasm: no grants (no {} here, no --config)",
            app::PROJECT_CONFIG
        ),
    }
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
