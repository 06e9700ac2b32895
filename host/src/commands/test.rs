//! `kubewasm test`: runs plugins through scenario files on the embedded API server and reports
//! each step; a failed step shows which object differs and how.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::app::{self, UsageError};
use crate::cli::TestArgs;
use crate::scenario::{self, Outcome, RunOptions, Scenario};

/// Runs every scenario; exit code 1 when a step failed. `--junit` writes the report as JUnit XML.
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    let config = app::load_config(args.config.as_deref())?;
    let mut scenarios = Vec::new();
    for path in &args.scenario {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))
            .map_err(UsageError)?;
        let parsed = Scenario::parse(&text)
            .with_context(|| format!("{}", path.display()))
            .map_err(UsageError)?;
        let name = parsed.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        scenarios.push((name, parsed));
    }
    let options = RunOptions {
        plugins: args.plugins.clone(),
        config,
        cache_dir: Some(app::default_cache_dir()),
        default_timeout: args.timeout,
    };
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (name, scenario) in &scenarios {
        println!("scenario {name}");
        let outcome = scenario::run(scenario, name, &options, |step| {
            let seconds = step.elapsed.as_secs_f64();
            match (&step.failure, step.skipped) {
                (Some(failure), _) => {
                    println!("  FAIL {} ({seconds:.1}s)", step.name);
                    for line in failure.lines() {
                        println!("    {line}");
                    }
                }
                (None, true) => println!("  skip {}", step.name),
                (None, false) => println!("  ok   {} ({seconds:.1}s)", step.name),
            }
        })
        .await
        .with_context(|| format!("scenario {name}"))?;
        outcomes.push(outcome);
    }
    if let Some(junit) = &args.junit {
        std::fs::write(junit, scenario::junit_xml(&outcomes))
            .with_context(|| format!("cannot write {}", junit.display()))?;
    }
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    if failed > 0 {
        println!("{failed} of {} scenarios failed", outcomes.len());
        return Ok(ExitCode::FAILURE);
    }
    println!("{} scenarios passed", outcomes.len());
    Ok(ExitCode::SUCCESS)
}
