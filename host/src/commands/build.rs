//! `kubewasm build [--release]`: builds the plugin project in a directory with its language's
//! toolchain (Rust: cargo's `dev` profile for the edit loop, `release` with `--release`), checks
//! the component as `kubewasm check` does and prints its path.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use kubewasm_build::{MissingToolchain, Profile, Project, Toolchains};

use crate::app::{self, UsageError};
use crate::cli::BuildArgs;
use crate::inspect;

/// Builds, checks, prints the component's path on stdout (the check's report on stderr). A
/// missing toolchain fails with the command that installs it.
pub async fn run(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let (config, config_file) = app::load_project_config(args.config.as_deref(), &dir)?;
    let project = Project::detect(&dir).map_err(UsageError)?;
    eprintln!(
        "kubewasm: building {} ({} project, {})",
        project.name,
        project.language.name(),
        dir.display()
    );
    let tools = Toolchains::for_project(&dir, app::default_cache_dir().join("toolchains"));
    let profile = if args.release {
        Profile::Release
    } else {
        Profile::Dev
    };
    let built = tokio::task::spawn_blocking(move || project.build(&tools, profile))
        .await
        .context("the build task failed")?;
    let built = match built {
        Ok(built) => built,
        Err(err) if err.downcast_ref::<MissingToolchain>().is_some() => {
            eprintln!("kubewasm: {err}");
            return Ok(ExitCode::FAILURE);
        }
        Err(err) => return Err(err),
    };
    let report = inspect::inspect_file(&built.path, &config)
        .await
        .with_context(|| format!("{} was built but would not load", built.path.display()))?;
    match &config_file {
        Some(file) => eprintln!("kubewasm: checked with the grants in {}", file.display()),
        None => eprintln!(
            "kubewasm: checked with no grants (no {} in the project, no --config)",
            app::PROJECT_CONFIG
        ),
    }
    eprint!("{report}");
    eprintln!("kubewasm: built for {}", built.contract);
    println!("{}", built.path.display());
    Ok(ExitCode::SUCCESS)
}
