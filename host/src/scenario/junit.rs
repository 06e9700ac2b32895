//! The JUnit XML report of a scenario run (`--junit FILE`): one test suite per scenario, one
//! test case per step, the failure's diff as its message.

use std::fmt::Write as _;

use super::runner::Outcome;

/// The JUnit XML of `outcomes` (one per scenario file).
pub fn junit_xml(outcomes: &[Outcome]) -> String {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for outcome in outcomes {
        let failures = outcome.steps.iter().filter(|s| s.failure.is_some()).count();
        let seconds: f64 = outcome.steps.iter().map(|s| s.elapsed.as_secs_f64()).sum();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{seconds:.3}\">",
            escape(&outcome.name),
            outcome.steps.len()
        );
        for step in &outcome.steps {
            let _ = write!(
                xml,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                escape(&outcome.name),
                escape(&step.name),
                step.elapsed.as_secs_f64()
            );
            match (&step.failure, step.skipped) {
                (Some(failure), _) => {
                    let first = failure.lines().next().unwrap_or("failed");
                    let _ = writeln!(
                        xml,
                        ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>",
                        escape(first),
                        escape(failure)
                    );
                }
                (None, true) => {
                    let _ = writeln!(xml, ">\n      <skipped/>\n    </testcase>");
                }
                (None, false) => {
                    let _ = writeln!(xml, "/>");
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::runner::StepResult;
    use super::*;

    #[test]
    fn a_failed_step_carries_its_diff_and_later_steps_are_skipped() {
        let outcome = Outcome {
            name: "mirror <1>".into(),
            steps: vec![
                StepResult {
                    name: "ok".into(),
                    elapsed: Duration::from_millis(1500),
                    failure: None,
                    skipped: false,
                },
                StepResult {
                    name: "copy".into(),
                    elapsed: Duration::ZERO,
                    failure: Some(
                        "v1 ConfigMap default/a:\n  .data.k: expected \"v\", got \"w\"".into(),
                    ),
                    skipped: false,
                },
                StepResult {
                    name: "later".into(),
                    elapsed: Duration::ZERO,
                    failure: None,
                    skipped: true,
                },
            ],
        };
        let xml = junit_xml(&[outcome]);
        assert!(
            xml.contains(
                "<testsuite name=\"mirror &lt;1&gt;\" tests=\"3\" failures=\"1\" time=\"1.500\">"
            ),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"v1 ConfigMap default/a:\">"),
            "{xml}"
        );
        assert!(
            xml.contains(".data.k: expected &quot;v&quot;, got &quot;w&quot;</failure>"),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"later\" time=\"0.000\">\n      <skipped/>"),
            "{xml}"
        );
    }
}
