//! The stage times of `cargo xtask test`, printed as a table at the end of every run, so what a
//! change to the suite costs shows in every run.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// How a stage ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    /// Not run; the run said why when it left the stage out.
    Skipped,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One stage: its name, how long it took, the stage it ran inside (its time then counted in
/// that one's) and how it ended.
struct Stage {
    name: &'static str,
    took: Duration,
    within: Option<&'static str>,
    outcome: Outcome,
}

/// The stages of one run, in the order they ran.
pub struct Stages {
    started: Instant,
    stages: Vec<Stage>,
}

impl Stages {
    /// Starts the clock of the whole run.
    pub fn new() -> Self {
        Stages {
            started: Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Runs `stage` and records its time under `name`; returns its result.
    pub fn time<T>(
        &mut self,
        name: &'static str,
        stage: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let started = Instant::now();
        let result = stage();
        let outcome = if result.is_ok() {
            Outcome::Passed
        } else {
            Outcome::Failed
        };
        self.record(name, started.elapsed(), outcome);
        result
    }

    /// Records a stage that did not run.
    pub fn skipped(&mut self, name: &'static str) {
        self.record(name, Duration::ZERO, Outcome::Skipped);
    }

    /// Records a stage that ran inside the stage named `outer` (its time is part of that one's).
    pub fn within(&mut self, name: &'static str, outer: &'static str, passed: bool) {
        let outcome = if passed {
            Outcome::Passed
        } else {
            Outcome::Failed
        };
        self.stages.push(Stage {
            name,
            took: Duration::ZERO,
            within: Some(outer),
            outcome,
        });
    }

    fn record(&mut self, name: &'static str, took: Duration, outcome: Outcome) {
        self.stages.push(Stage {
            name,
            took,
            within: None,
            outcome,
        });
    }

    /// The table: a row per stage, then the whole run (which includes the untimed steps
    /// between stages, such as installing tools).
    pub fn table(&self) -> String {
        table(&self.stages, self.started.elapsed())
    }
}

fn table(stages: &[Stage], total: Duration) -> String {
    let width = stages
        .iter()
        .map(|s| s.name.len())
        .chain(["stage".len(), "total".len()])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let mut row = |name: &str, took: &str, outcome: &str| {
        let line = format!("xtask:   {name:<width$}  {took:>9}  {outcome}");
        let _ = writeln!(out, "{}", line.trim_end());
    };
    row("stage", "time", "result");
    for stage in stages {
        let took = if stage.outcome == Outcome::Skipped || stage.within.is_some() {
            "-".to_owned()
        } else {
            minutes_seconds(stage.took)
        };
        match stage.within {
            Some(outer) => row(
                stage.name,
                &took,
                &format!("{} (inside {outer})", stage.outcome.as_str()),
            ),
            None => row(stage.name, &took, stage.outcome.as_str()),
        }
    }
    row("total", &minutes_seconds(total), "");
    out
}

/// `m:ss.s`, the precision a suite's stages are compared at.
fn minutes_seconds(took: Duration) -> String {
    let tenths = took.as_millis() / 100;
    format!("{}:{:02}.{}", tenths / 600, tenths / 10 % 60, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_stage_in_order_then_the_total() {
        let stage = |name, millis, outcome| Stage {
            name,
            took: Duration::from_millis(millis),
            within: None,
            outcome,
        };
        let stages = [
            stage("fmt", 420, Outcome::Passed),
            stage("image", 0, Outcome::Skipped),
            stage("nextest", 754_260, Outcome::Failed),
            Stage {
                within: Some("nextest"),
                ..stage("real tier", 0, Outcome::Passed)
            },
        ];
        let text = table(&stages, Duration::from_secs(3_725));
        assert_eq!(
            text,
            "xtask:   stage           time  result\n\
             xtask:   fmt           0:00.4  ok\n\
             xtask:   image              -  skipped\n\
             xtask:   nextest      12:34.2  FAILED\n\
             xtask:   real tier          -  ok (inside nextest)\n\
             xtask:   total        62:05.0\n"
        );
    }

    #[test]
    fn time_records_how_the_stage_ended() {
        let mut stages = Stages::new();
        assert_eq!(stages.time("a", || Ok(7)).unwrap(), 7);
        assert!(stages.time::<()>("b", || anyhow::bail!("no")).is_err());
        stages.skipped("c");
        stages.within("d", "a", false);
        let outcomes: Vec<_> = stages.stages.iter().map(|s| (s.name, s.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                ("a", Outcome::Passed),
                ("b", Outcome::Failed),
                ("c", Outcome::Skipped),
                ("d", Outcome::Failed)
            ]
        );
    }
}
