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

/// The example's own scenario (`examples-guests/rust/sample-controller/scenario.yaml`) with the
/// example config, as its README says to run it.
#[test]
fn the_rust_sample_controller_passes_its_example_scenario() {
    let root = kubewasm_tests::workspace_root();
    let dir = tempfile::tempdir().expect("temp dir");
    let plugin = dir.path().join("sample-controller.wasm");
    std::fs::copy(guest_path("sample-controller"), &plugin).expect("copying the guest");
    let output = Command::new(BIN)
        .current_dir(dir.path())
        .args(["--log", "warn", "test"])
        .arg(&plugin)
        .arg("--scenario")
        .arg(root.join("examples-guests/rust/sample-controller/scenario.yaml"))
        .arg("--config")
        .arg(root.join("examples/kubewasm-dev.toml"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .output()
        .expect("kubewasm runs");
    let text = stdout(&output);
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(text.matches("  ok   ").count(), 3, "{text}");
}
