//! `kubewasm test` driven as a user would: the binary runs a test guest through scenario files
//! on its embedded API server. A scenario that holds exits 0 (and writes JUnit XML); a wrong
//! expectation exits 1 with a diff naming the object and the field; a plugin that writes on
//! every reconcile fails `converged` with the writes listed.

use std::path::Path;
use std::process::{Command, Output};

use kubewasm_tests::guest_path;

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");

/// The mirror test guest (`tests/guests/mirror-v0-2`) as `mirror.wasm`, allowed to write
/// ConfigMaps, with `scenario` beside it; runs `kubewasm test` on them.
fn run_scenario(guest: &str, writes: &str, scenario: &str) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let plugin = dir.path().join("plugin.wasm");
    std::fs::copy(guest_path(guest), &plugin).expect("copying the guest");
    std::fs::write(
        dir.path().join("kubewasm.toml"),
        format!("[plugins.plugin]\nwrites = {writes}\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("scenario.yaml"), scenario).unwrap();
    let output = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "--log",
            "warn",
            "test",
            "plugin.wasm",
            "--scenario",
            "scenario.yaml",
        ])
        .args(["--config", "kubewasm.toml", "--junit", "junit.xml"])
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .expect("kubewasm runs");
    (output, dir)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const MIRROR: &str = r#"
name: mirror
objects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: app, namespace: default, labels: {kubewasm.io/mirror: "true"}}
    data: {greeting: hello}
steps:
  - name: the mirror appears
    assert:
      exist:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: app-mirror, namespace: default, ownerReferences: [{kind: ConfigMap, name: app, controller: true}]}
          data: {greeting: hello}
      writes: [{plugin: mirror, exactly: 1}]
      converged: true
  - name: the next update conflicts
    fault: {verb: update, code: 409}
  - name: a change is copied through the conflict
    patch:
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}
      patch: {data: {greeting: GREETING}}
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: EXPECTED}}
      converged: true
  - name: watches drop
    fault: {dropWatches: true}
  - name: an unlabelled ConfigMap gets no mirror
    apply:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: plain}, data: {a: b}}
    assert:
      absent:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: plain-mirror}}
      writes: [{plugin: mirror, exactly: 0}]
      converged: true
  - name: deleting the source
    delete: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app}}]
    assert:
      absent:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}
"#;

fn mirror(patched: &str, expected: &str, timeout: &str) -> String {
    MIRROR
        .replace("GREETING", patched)
        .replace("EXPECTED", expected)
        .replace(
            "  - name: a change is copied through the conflict\n",
            &format!("  - name: a change is copied through the conflict\n    timeout: {timeout}\n"),
        )
}

#[test]
fn a_scenario_that_holds_passes_every_step_and_writes_junit() {
    let (output, dir) = run_scenario("mirror-v0-2", "[\"ConfigMap\"]", &mirror("hi", "hi", "30s"));
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.matches("  ok   ").count(), 6, "{text}");
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert!(junit.contains("tests=\"6\" failures=\"0\""), "{junit}");
}

#[test]
fn a_wrong_expectation_fails_with_a_diff_naming_the_object_and_field() {
    let (output, dir) = run_scenario("mirror-v0-2", "[\"ConfigMap\"]", &mirror("hi", "hey", "5s"));
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL a change is copied through the conflict"),
        "{text}"
    );
    assert!(
        text.contains("v1 ConfigMap default/app-mirror: differs"),
        "{text}"
    );
    assert!(
        text.contains(".data.greeting: expected \"hey\", got \"hi\""),
        "{text}"
    );
    assert!(text.contains("skip watches drop"), "{text}");
    let junit = std::fs::read_to_string(Path::new(dir.path()).join("junit.xml")).unwrap();
    assert!(junit.contains("failures=\"1\""), "{junit}");
}

#[test]
fn a_plugin_that_writes_on_every_reconcile_is_not_converged() {
    let scenario = r#"
objects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default}}
steps:
  - name: stamped
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {stamped: "yes"}}}
      events:
        - {reason: Stamped, involvedObject: {kind: ConfigMap, name: a}}
      converged: true
"#;
    let (output, _dir) = run_scenario("sdk-v0-2-stamp", "[\"ConfigMap\", \"Event\"]", scenario);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("not converged"), "{text}");
    assert!(text.contains("PATCH configmaps default/a"), "{text}");
}

/// Every assert operator, holding: the mirror's uid is a UUID, its owner reference has some
/// uid, it has no field the source lacks, one ConfigMap of the namespace has one owner, and a
/// change to the source changes the copy's value. `FAILING` is replaced by a step that must
/// fail.
const OPERATORS: &str = r#"
name: operators
objects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: app, namespace: default, labels: {kubewasm.io/mirror: "true"}}
    data: {greeting: hello}
steps:
  - name: the mirror appears, owned by its source
    assert:
      exist:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: app-mirror
            namespace: default
            uid: {$matches: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$"}
            ownerReferences: [{name: app, uid: {$any: true}}]
          data: {greeting: hello, other: {$absent: true}}
      count:
        - object: {apiVersion: v1, kind: ConfigMap, metadata: {namespace: default, ownerReferences: {$count: 1}}}
          exactly: 1
  - name: a change to the source changes the copy
    patch:
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}
      patch: {data: {greeting: hi}}
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: {$changed: true}}}
FAILING"#;

#[test]
fn assert_operators_hold_and_each_fails_saying_what_it_expected() {
    let (output, _dir) = run_scenario(
        "mirror-v0-2",
        "[\"ConfigMap\"]",
        &OPERATORS.replace("FAILING", ""),
    );
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.matches("  ok   ").count(), 2, "{text}");

    let failing = [
        (
            r#"exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: {$changed: true}}}]"#,
            r#".data.greeting: expected a change from "hi", got "hi""#,
        ),
        (
            r#"exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {missing: {$any: true}}}]"#,
            ".data.missing: expected any value, missing",
        ),
        (
            r#"exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: {$absent: true}}}]"#,
            r#".data.greeting: expected no value, got "hi""#,
        ),
        (
            r#"exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: {$matches: "^hello$"}}}]"#,
            r#".data.greeting: expected a string matching /^hello$/, got "hi""#,
        ),
        (
            r#"exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror, ownerReferences: {$count: 2}}}]"#,
            ".metadata.ownerReferences: expected 2 items, got 1",
        ),
        (
            r#"count: [{object: {apiVersion: v1, kind: ConfigMap, metadata: {labels: {kubewasm.io/mirror: "true"}}}, min: 2}]"#,
            "v1 ConfigMap (any name): 1 match, expected at least 2",
        ),
    ];
    for (assert, message) in failing {
        let step =
            format!("  - name: nothing changes\n    timeout: 1s\n    assert:\n      {assert}\n");
        let (output, _dir) = run_scenario(
            "mirror-v0-2",
            "[\"ConfigMap\"]",
            &OPERATORS.replace("FAILING", &step),
        );
        let text = stdout(&output);
        assert_eq!(output.status.code(), Some(1), "{assert}: {text}");
        assert!(text.contains("FAIL nothing changes"), "{assert}: {text}");
        assert!(text.contains(message), "{assert}: {text}");
    }
}

/// A mistake in an operator is refused before anything runs, saying where it is.
#[test]
fn a_misspelt_operator_is_refused_before_the_run() {
    let scenario = OPERATORS
        .replace("{$changed: true}", "{$chnaged: true}")
        .replace("FAILING", "");
    let (output, _dir) = run_scenario("mirror-v0-2", "[\"ConfigMap\"]", &scenario);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("step 2 (a change to the source changes the copy): exist v1 ConfigMap app-mirror: .data.greeting: `$chnaged` is not an assert operator"),
        "{stderr}"
    );
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
}

/// A fault on one resource hits that resource only: 500s on updates of Secrets leave the
/// mirror's ConfigMap update alone (one write), 500s on updates of ConfigMaps make it retry.
/// The mirror logs each copy, which `logged` asserts; a line it never logs fails the step
/// with the lines it did log.
const ONE_RESOURCE: &str = r#"
name: faults on one resource
objects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: app, namespace: default, labels: {kubewasm.io/mirror: "true"}}
    data: {greeting: hello}
steps:
  - name: the mirror appears
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: hello}}
      converged: true
  - name: updates of Secrets fail
    fault: {verb: update, resource: secrets, code: 500, count: 5}
  - name: a ConfigMap update is not hit
    patch:
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}
      patch: {data: {greeting: hi}}
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: hi}}
      writes: [{plugin: mirror, exactly: 1}]
      converged: true
  - name: updates of ConfigMaps fail twice
    fault: {verb: update, resource: configmaps, code: 500, count: 2}
  - name: the copy goes through after two failed updates
    patch:
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: app}}
      patch: {data: {greeting: hey}}
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}, data: {greeting: hey}}
      writes: [{plugin: mirror, min: 3}]
      LOGGED
      converged: true
"#;

#[test]
fn a_fault_on_one_resource_hits_only_that_resource() {
    let scenario = ONE_RESOURCE.replace("LOGGED", "");
    let (output, _dir) = run_scenario("mirror-v0-2", "[\"ConfigMap\"]", &scenario);
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.matches("  ok   ").count(), 5, "{text}");
}

#[test]
fn a_logged_assert_passes_on_a_line_the_plugin_logged_and_fails_showing_its_lines() {
    let logged = |contains: &str| {
        ONE_RESOURCE.replace(
            "LOGGED",
            &format!("logged: [{{plugin: mirror, contains: {contains:?}}}]"),
        )
    };
    let probe = r#"
objects:
  - {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: default, labels: {kubewasm.io/mirror: "true"}}}
steps:
  - timeout: 5s
    assert:
      logged: [{plugin: mirror, contains: "never logged"}]
"#;
    let (output, _dir) = run_scenario("mirror-v0-2", "[\"ConfigMap\"]", probe);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("plugin mirror logged no line containing \"never logged\" in this step"),
        "{text}"
    );
    // What it did log is shown: the line the passing assert below names.
    let shown = text
        .split_once("its lines in this step:")
        .unwrap_or_else(|| panic!("the failure lists the plugin's lines: {text}"))
        .1;
    assert!(shown.contains("RECONCILED default/app"), "{text}");

    let (output, _dir) = run_scenario(
        "mirror-v0-2",
        "[\"ConfigMap\"]",
        &logged("RECONCILED default/app"),
    );
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs every example's scenario as its file's header says a user runs it (each line
/// `#   kubewasm test ...`, from the repository root, with the example config): the examples
/// are found by listing `examples-guests/**/scenario.yaml`, so a new example with a scenario
/// is covered without editing this test.
/// Two scenarios against the admission-probe test guest (a ConfigMap named `deny...` is
/// denied with 422 `denied NAME`, any other gets the label `admitted-by`): the first holds
/// until a step expects a denial the policy does not give, the second meets a denial it did
/// not expect.
const ADMISSION: &str = r#"
name: admission
steps:
  - name: a denial is expected
    apply:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: deny-me, namespace: default}}
    expect: {denied: "denied deny-me", code: 422}
    assert:
      absent:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: deny-me, namespace: default}}
  - name: an allowed ConfigMap is mutated on its way in
    apply:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: fine, namespace: default}}
    assert:
      exist:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: fine, namespace: default, labels: {admitted-by: admission-probe-v0}}}
  - name: a denial is expected of what the policy allows
    apply:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: allowed-one, namespace: default}}
    expect: {denied: "denied"}
"#;

const UNEXPECTED_DENIAL: &str = r#"
name: unexpected-denial
steps:
  - name: nothing expects this denial
    timeout: 500ms
    apply:
      - {apiVersion: v1, kind: ConfigMap, metadata: {name: deny-two, namespace: default}}
"#;

/// `kubewasm test` serves a loaded policy's webhooks and configures the embedded API server
/// with no flag: a denial and a mutation happen as the scenario says; a step expecting a
/// denial of an allowed object fails naming the object and saying it was allowed; a denial no
/// step expects fails with the API server's message once the step's timeout has passed.
#[test]
fn admission_denials_are_asserted_and_an_allowed_write_fails_an_expected_denial() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(guest_path("admission-probe"), dir.path().join("probe.wasm"))
        .expect("copying the guest");
    std::fs::write(dir.path().join("a.yaml"), ADMISSION).unwrap();
    std::fs::write(dir.path().join("b.yaml"), UNEXPECTED_DENIAL).unwrap();
    // Its mutating webhook on ConfigMaps needs the grant to patch them.
    std::fs::write(
        dir.path().join("kubewasm.toml"),
        "[plugins.probe]\nwrites = [\"ConfigMap:patch\"]\n",
    )
    .unwrap();
    let output = Command::new(BIN)
        .current_dir(dir.path())
        .args([
            "--log",
            "warn",
            "test",
            "probe.wasm",
            "--config",
            "kubewasm.toml",
        ])
        .args(["--scenario", "a.yaml", "--scenario", "b.yaml"])
        .env("XDG_CACHE_HOME", crate::fixture::shared_cache_home())
        .output()
        .expect("kubewasm runs");
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("  ok   a denial is expected ("), "{out}");
    assert!(
        out.contains("  ok   an allowed ConfigMap is mutated on its way in"),
        "{out}"
    );
    assert!(
        out.contains("  FAIL a denial is expected of what the policy allows"),
        "{out}"
    );
    assert!(
        out.contains(
            "v1 ConfigMap default/allowed-one: expected the apply to be denied with a message \
             containing \"denied\", but the API server allowed it (created)"
        ),
        "{out}"
    );
    assert!(out.contains("  FAIL nothing expects this denial"), "{out}");
    assert!(
        out.contains(
            "v1 ConfigMap default/deny-two: the apply was refused by the API server (denied on \
             every try until the step's timeout): 422"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            // The webhook is named for the plugin's file (`probe.wasm`), not the name the
            // guest declares (`admission-probe`).
            r#"admission webhook "probe.kubewasm.dev" denied the request: denied deny-two"#
        ),
        "{out}"
    );
    assert!(out.contains("2 of 2 scenarios failed"), "{out}");
}

#[test]
fn every_example_scenario_passes_as_its_header_runs_it() {
    let root = kubewasm_tests::workspace_root();
    let mut files = Vec::new();
    let mut dirs = vec![root.join("examples-guests")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("listing examples-guests") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "scenario.yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 5, "example scenarios: {files:?}");
    // The suite's compile cache: the other tests compile the same examples.
    let cache_home = crate::fixture::shared_cache_home();
    let mut failures = Vec::new();
    let mut runs = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("reading the scenario");
        let commands: Vec<Vec<String>> = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| {
                l.trim_start_matches('#')
                    .trim()
                    .strip_prefix("kubewasm test ")
            })
            .map(|args| args.split_whitespace().map(str::to_owned).collect())
            .collect();
        assert!(
            !commands.is_empty(),
            "{} says in no `#   kubewasm test ...` line how to run it",
            file.display()
        );
        for args in commands {
            for plugin in args.iter().filter(|a| a.ends_with(".wasm")) {
                assert!(
                    root.join(plugin).exists(),
                    "{plugin} (in {}) is missing{}",
                    file.display(),
                    kubewasm_tests::MISSING_GUESTS
                );
            }
            runs += 1;
            let output = Command::new(BIN)
                .current_dir(&root)
                .args(["--log", "warn", "test"])
                .args(&args)
                .env("XDG_CACHE_HOME", &cache_home)
                .output()
                .expect("kubewasm runs");
            if !output.status.success() {
                failures.push(format!(
                    "kubewasm test {} failed:\n{}\n{}",
                    args.join(" "),
                    stdout(&output),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(runs >= files.len());
}

const QUIET: &str = r#"
name: quiet
objects:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: app, namespace: default, labels: {kubewasm.io/mirror: "true"}}
steps:
  - name: the mirror appears
    assert:
      exist: [{apiVersion: v1, kind: ConfigMap, metadata: {name: app-mirror}}]
      converged: true
"#;

/// `kubewasm test` with the given extra arguments on the mirror and [`QUIET`], logging at the
/// default level (info).
fn run_quiet(extra: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(guest_path("mirror-v0-2"), dir.path().join("mirror.wasm")).unwrap();
    std::fs::write(
        dir.path().join("kubewasm.toml"),
        "[plugins.mirror]\nwrites = [\"ConfigMap\"]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("scenario.yaml"), QUIET).unwrap();
    // The compile cache is filled first, so the run loads the plugin at once: its output, which
    // these tests compare whole, cannot gain the slow-load notice of a compile past 2 s on a
    // loaded machine (`a_slow_load_is_reported_before_the_steps` tests that notice).
    let compiled = Command::new(BIN)
        .current_dir(dir.path())
        .args(["compile", "mirror.wasm"])
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .output()
        .expect("kubewasm compile runs");
    assert!(
        compiled.status.success(),
        "{}",
        String::from_utf8_lossy(&compiled.stderr)
    );
    let output = Command::new(BIN)
        .current_dir(dir.path())
        .args(["test", "mirror.wasm", "--scenario", "scenario.yaml"])
        .args(["--config", "kubewasm.toml"])
        .args(extra)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env_remove("RUST_LOG")
        .output()
        .expect("kubewasm runs");
    (output, dir)
}

/// A green run prints its results and nothing else: the host's and plugins' lines (INFO and
/// up) go to the log file, which holds no complaint about the API server going away at the
/// end (the informers stop before it); `--verbose` puts them on stderr instead.
#[test]
fn a_green_run_prints_only_results_and_logs_to_a_file() {
    let (output, dir) = run_quiet(&[]);
    let text = stdout(&output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}\n{stderr}");
    assert_eq!(
        text,
        "scenario quiet\n  ok   the mirror appears (TIME)\n1 scenarios passed\n".replace(
            "TIME",
            text.split_once("appears (")
                .and_then(|(_, rest)| rest.split_once(')'))
                .map_or("?", |(time, _)| time)
        ),
        "{text}"
    );
    assert!(stderr.is_empty(), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("state/kubewasm/test.log"))
        .expect("the log is in the XDG state directory");
    assert!(log.contains("RECONCILED default/app"), "{log}");
    assert!(log.contains("plugin loaded"), "{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "{log}");

    let named = tempfile::tempdir().unwrap();
    let file = named.path().join("logs/run.log");
    let (output, _dir) = run_quiet(&["--log-file", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stdout(&output));
    let log = std::fs::read_to_string(&file).expect("the log is where --log-file says");
    assert!(log.contains("RECONCILED default/app"), "{log}");

    let (output, dir) = run_quiet(&["-v"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("RECONCILED default/app"), "{stderr}");
    assert!(!stderr.contains("list/watch failed"), "{stderr}");
    assert!(!dir.path().join("state/kubewasm/test.log").exists());
}

/// A failed run says where the log is.
#[test]
fn a_failed_run_says_where_the_log_is() {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = QUIET.replace("app-mirror}", "app-mirror}, data: {never: there}");
    std::fs::write(
        dir.path().join("failing.yaml"),
        scenario.replace("converged: true", ""),
    )
    .unwrap();
    let failing = dir.path().join("failing.yaml");
    let (output, run_dir) =
        run_quiet(&["--scenario", failing.to_str().unwrap(), "--timeout", "1s"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let log = run_dir.path().join("state/kubewasm/test.log");
    assert!(
        text.contains(&format!("the plugins' and host's log: {}", log.display())),
        "{text}"
    );
}

/// A plugin still loading after `slow_load` (here: at once, as a large plugin compiling for
/// tens of seconds would) is reported once, before the steps, so a long first load is not a
/// silent wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_load_is_reported_before_the_steps() {
    use kubewasm::scenario::{self, Progress, RunOptions, Scenario};

    let dir = tempfile::tempdir().expect("temp dir");
    let plugin = dir.path().join("mirror.wasm");
    std::fs::copy(guest_path("mirror-v0-2"), &plugin).unwrap();
    let parsed = Scenario::parse("steps: [{name: loaded}]").unwrap();
    let options = RunOptions {
        plugins: vec![plugin.clone()],
        config: kubewasm::config::Config::default(),
        // No cache: the component is compiled, which is never instant.
        cache_dir: None,
        default_timeout: std::time::Duration::from_secs(30),
        slow_load: std::time::Duration::ZERO,
    };
    let mut seen = Vec::new();
    let outcome = scenario::run(&parsed, "slow", &options, |progress| {
        seen.push(match progress {
            Progress::SlowLoad { plugin } => format!("loading {}", plugin.display()),
            Progress::Step(step) => format!("step {}", step.name),
        })
    })
    .await
    .expect("the run happens");
    assert!(outcome.passed(), "{outcome:?}");
    assert_eq!(
        seen,
        [
            format!("loading {}", plugin.display()),
            "step loaded".to_owned()
        ]
    );
}

/// `check` and `test` read the current directory's kubewasm.toml when `--config` names none,
/// as `kubewasm new` lays a project out: the mirror's ConfigMap writes are granted by it;
/// without the file, `check` says no grant was read and shows none.
#[test]
fn check_and_test_read_the_project_config_without_a_flag() {
    let (output, dir) = run_quiet(&[]);
    assert!(output.status.success(), "{}", stdout(&output));
    let run = |args: &[&str]| {
        Command::new(BIN)
            .current_dir(dir.path())
            .args(args)
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env_remove("KUBEWASM_CONFIG")
            .output()
            .expect("kubewasm runs")
    };
    let test = run(&["test", "mirror.wasm", "--scenario", "scenario.yaml"]);
    assert!(test.status.success(), "{}", stdout(&test));
    let check = run(&["check", "mirror.wasm"]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
    assert!(stderr.contains("grants from ./kubewasm.toml"), "{stderr}");
    assert!(
        stdout(&check).contains("writes:  core configmaps"),
        "{}",
        stdout(&check)
    );

    std::fs::remove_file(dir.path().join("kubewasm.toml")).unwrap();
    let check = run(&["check", "mirror.wasm"]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(
        stderr.contains("no grants (no kubewasm.toml here, no --config)"),
        "{stderr}"
    );
    assert!(
        stdout(&check).contains("writes:  none granted"),
        "{}",
        stdout(&check)
    );
}
