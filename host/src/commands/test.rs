//! `kubewasm test`: runs plugins through scenario files on the embedded API server and reports
//! each step; a failed step shows which object differs and how.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::app::{self, UsageError};
use crate::cli::TestArgs;
use crate::scenario::{self, Outcome, Progress, RunOptions, Scenario, StepResult};

/// Runs every scenario; exit code 1 when a step failed. `--junit` writes the report as JUnit XML.
pub async fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    let (config, _) = app::load_project_config(args.config.as_deref(), Path::new("."))?;
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
        slow_load: scenario::SLOW_LOAD,
    };
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (name, scenario) in &scenarios {
        println!("scenario {name}");
        let outcome = scenario::run(scenario, name, &options, |progress| match progress {
            Progress::SlowLoad { plugin } => println!(
                "  ...  loading {}: compiling it (a large plugin takes a while; the compile is \
                 cached for the next run)",
                plugin.display()
            ),
            Progress::Step(step) => print_step(step),
        })
        .await;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(err) => {
                let hint = log_hint(&args);
                if !hint.is_empty() {
                    eprintln!("{hint}");
                }
                return Err(err.context(format!("scenario {name}")));
            }
        };
        outcomes.push(outcome);
    }
    if let Some(junit) = &args.junit {
        std::fs::write(junit, scenario::junit_xml(&outcomes))
            .with_context(|| format!("cannot write {}", junit.display()))?;
    }
    let failed = outcomes.iter().filter(|o| !o.passed()).count();
    if failed > 0 {
        println!("{failed} of {} scenarios failed", outcomes.len());
        let hint = log_hint(&args);
        if !hint.is_empty() {
            println!("{hint}");
        }
        return Ok(ExitCode::FAILURE);
    }
    println!("{} scenarios passed", outcomes.len());
    Ok(ExitCode::SUCCESS)
}

fn print_step(step: &StepResult) {
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
}

/// Where the host's log of the run is, when it is not on the terminal (`--verbose` puts it
/// there): said when something failed.
fn log_hint(args: &TestArgs) -> String {
    match args.log_file() {
        Some(path) => format!(
            "the plugins' and host's log: {} (--verbose shows it here)",
            path.display()
        ),
        None => String::new(),
    }
}
