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

/// Where a stage's time sits among the others'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A span of the run of its own.
    Alone,
    /// Part of the named stage's span (its time is not shown: it is in that one's).
    Inside(&'static str),
    /// At the same time as the named stage: its time overlaps that one's.
    Beside(&'static str),
}

/// One stage: its name, how long it took, where that time sits and how it ended.
struct Stage {
    name: &'static str,
    took: Duration,
    place: Place,
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
        self.record(name, started.elapsed(), Place::Alone, result.is_ok());
        result
    }

    /// Runs `first` on this thread and `second` on another at the same time, and records each
    /// one's time (the second's row says it ran beside the first); returns both results. For
    /// stages that need nothing from each other and leave cores idle when run alone.
    pub fn time_together<A, B: Send>(
        &mut self,
        (first_name, first): (&'static str, impl FnOnce() -> anyhow::Result<A>),
        (second_name, second): (&'static str, impl FnOnce() -> anyhow::Result<B> + Send),
    ) -> (anyhow::Result<A>, anyhow::Result<B>) {
        let ((first, first_took), (second, second_took)) = std::thread::scope(|scope| {
            let other = scope.spawn(|| {
                let started = Instant::now();
                (second(), started.elapsed())
            });
            let started = Instant::now();
            let first = (first(), started.elapsed());
            let second = other.join().unwrap_or_else(|_| {
                let err = anyhow::anyhow!("the {second_name} stage panicked");
                (Err(err), Duration::ZERO)
            });
            (first, second)
        });
        self.record(first_name, first_took, Place::Alone, first.is_ok());
        self.record(
            second_name,
            second_took,
            Place::Beside(first_name),
            second.is_ok(),
        );
        (first, second)
    }

    /// Records a stage that did not run.
    pub fn skipped(&mut self, name: &'static str) {
        self.push(name, Duration::ZERO, Place::Alone, Outcome::Skipped);
    }

    /// Records a stage that ran inside the stage named `outer` (its time is part of that one's).
    pub fn within(&mut self, name: &'static str, outer: &'static str, passed: bool) {
        self.record(name, Duration::ZERO, Place::Inside(outer), passed);
    }

    fn record(&mut self, name: &'static str, took: Duration, place: Place, passed: bool) {
        let outcome = if passed {
            Outcome::Passed
        } else {
            Outcome::Failed
        };
        self.push(name, took, place, outcome);
    }

    fn push(&mut self, name: &'static str, took: Duration, place: Place, outcome: Outcome) {
        self.stages.push(Stage {
            name,
            took,
            place,
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
        let took = match stage.place {
            Place::Inside(_) => "-".to_owned(),
            _ if stage.outcome == Outcome::Skipped => "-".to_owned(),
            _ => minutes_seconds(stage.took),
        };
        let outcome = stage.outcome.as_str();
        match stage.place {
            Place::Alone => row(stage.name, &took, outcome),
            Place::Inside(outer) => row(stage.name, &took, &format!("{outcome} (inside {outer})")),
            Place::Beside(other) => row(stage.name, &took, &format!("{outcome} (beside {other})")),
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
            place: Place::Alone,
            outcome,
        };
        let stages = [
            stage("fmt", 420, Outcome::Passed),
            stage("build", 301_000, Outcome::Passed),
            Stage {
                place: Place::Beside("build"),
                ..stage("guests", 95_500, Outcome::Passed)
            },
            stage("image", 0, Outcome::Skipped),
            stage("nextest", 754_260, Outcome::Failed),
            Stage {
                place: Place::Inside("nextest"),
                ..stage("real tier", 0, Outcome::Passed)
            },
        ];
        let text = table(&stages, Duration::from_secs(3_725));
        assert_eq!(
            text,
            "xtask:   stage           time  result\n\
             xtask:   fmt           0:00.4  ok\n\
             xtask:   build         5:01.0  ok\n\
             xtask:   guests        1:35.5  ok (beside build)\n\
             xtask:   image              -  skipped\n\
             xtask:   nextest      12:34.2  FAILED\n\
             xtask:   real tier          -  ok (inside nextest)\n\
             xtask:   total        62:05.0\n"
        );
    }

    #[test]
    fn time_together_runs_both_stages_at_once() {
        use std::sync::mpsc::channel;
        let wait = Duration::from_secs(60);
        let (to_second, from_first) = channel();
        let (to_first, from_second) = channel();
        let mut stages = Stages::new();
        let (first, second) = stages.time_together(
            ("first", || {
                to_second.send(())?;
                Ok(from_second.recv_timeout(wait)?)
            }),
            ("second", move || {
                from_first.recv_timeout(wait)?;
                Ok(to_first.send(())?)
            }),
        );
        first.unwrap();
        second.unwrap();
        assert_eq!(stages.stages[1].place, Place::Beside("first"));
    }

    #[test]
    fn time_records_how_the_stage_ended() {
        let mut stages = Stages::new();
        assert_eq!(stages.time("a", || Ok(7)).unwrap(), 7);
        assert!(stages.time::<()>("b", || anyhow::bail!("no")).is_err());
        stages.skipped("c");
        stages.within("d", "a", false);
        let (e, f) = stages.time_together(
            ("e", || Ok(1)),
            ("f", || -> anyhow::Result<()> { anyhow::bail!("no") }),
        );
        assert_eq!((e.unwrap(), f.is_err()), (1, true));
        let outcomes: Vec<_> = stages.stages.iter().map(|s| (s.name, s.outcome)).collect();
        assert_eq!(
            outcomes,
            [
                ("a", Outcome::Passed),
                ("b", Outcome::Failed),
                ("c", Outcome::Skipped),
                ("d", Outcome::Failed),
                ("e", Outcome::Passed),
                ("f", Outcome::Failed)
            ]
        );
    }
}
