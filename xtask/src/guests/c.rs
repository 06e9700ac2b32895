//! The C guests (`examples-guests/c/`), built by `kubewasm_build::c` (wit-bindgen's C generator,
//! clang-19 with wasi-libc, the preview1 reactor adapter).

use std::path::PathBuf;
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example this module writes (`configmap-counter-c.wasm`).
pub const NAME: &str = "configmap-counter-c";
/// The 0.2 example this module writes (`configmap-propagator-c.wasm`), from
/// `examples-guests/c/propagator/`.
pub const PROPAGATOR: &str = "configmap-propagator-c";

/// Builds `examples-guests/c/` into `out_dir/configmap-counter-c.wasm` and its `propagator/`
/// into `out_dir/configmap-propagator-c.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let source = ctx.root.join("examples-guests/c");
    let counter = build_one(
        ctx,
        Contract::V0_1,
        NAME,
        &[
            source.join("controller_main.c"),
            source.join("json.c"),
            source.join("counts.c"),
        ],
    )?;
    let propagator_dir = source.join("propagator");
    let propagator = build_one(
        ctx,
        Contract::V0_2,
        PROPAGATOR,
        &[
            propagator_dir.join("propagator.c"),
            propagator_dir.join("kube.c"),
            source.join("json.c"),
        ],
    )?;
    Ok(vec![counter, propagator])
}

/// Compiles `sources` (`examples-guests/c/` on the include path) with `kubewasm_build::c` into the component `NAME.wasm`.
fn build_one(
    ctx: &Ctx,
    contract: Contract,
    name: &str,
    sources: &[PathBuf],
) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    let include = [ctx.root.join("examples-guests/c")];
    let bytes = kubewasm_build::c::build(
        &toolchain::toolchains(ctx),
        &contract.target(ctx),
        sources,
        &include,
        &toolchain::scratch(ctx, &format!("c-{name}")),
    )?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Compiles `test` with `sources` from `examples-guests/c/` natively (the host's cc) and
    /// runs it.
    fn run_native_test(test: &str, sources: &[&str]) {
        run_native_test_with(test, sources, &[]);
    }

    /// As [`run_native_test`], with more directories on the include path.
    fn run_native_test_with(test: &str, sources: &[&str], include: &[std::path::PathBuf]) {
        let source = crate::workspace::root().join("examples-guests/c");
        let out = std::env::temp_dir().join(format!(
            "kubewasm-{}-{}",
            test.replace('/', "-"),
            std::process::id()
        ));
        let status = Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-I"])
            .arg(&source)
            .args(
                include
                    .iter()
                    .flat_map(|dir| [std::ffi::OsStr::new("-I"), dir.as_os_str()]),
            )
            .arg("-o")
            .arg(&out)
            .arg(source.join(test))
            .args(sources.iter().map(|s| source.join(s)))
            .status()
            .unwrap_or_else(|e| panic!("running cc (gcc or clang) to compile {test}: {e}"));
        assert!(status.success(), "compiling {test}: {status}");
        let run = Command::new(&out).output().expect("running the test");
        let _ = std::fs::remove_file(&out);
        assert!(
            run.status.success(),
            "{test} failed:\n{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }

    /// The example's JSON reader (`examples-guests/c/json.c`) against `json_test.c`.
    #[test]
    fn the_c_examples_json_reader_passes_its_native_tests() {
        run_native_test("json_test.c", &["json.c"]);
    }

    /// The propagator's object helpers (`examples-guests/c/propagator/kube.c`) against
    /// `propagator/kube_test.c`.
    #[test]
    fn the_c_propagators_object_helpers_pass_their_native_tests() {
        run_native_test("propagator/kube_test.c", &["propagator/kube.c", "json.c"]);
    }

    /// kube.c's queue rules with predicates (`propagator/kube_predicates_test.c`), compiled
    /// with the generated bindings of 0.2.2's `reconciler` world on the include path: the
    /// section of kube.h that only a 0.2.2 build has.
    #[test]
    fn the_c_helpers_queue_rules_with_predicates_pass_their_native_tests() {
        let scratch =
            std::env::temp_dir().join(format!("kubewasm-c-predicates-{}", std::process::id()));
        let (wit, bindings) = (scratch.join("wit"), scratch.join("bindings"));
        crate::guests::toolchain::assemble_v0_2_2(&crate::workspace::root().join("wit"), &wit)
            .expect("assembling 0.2.2's WIT");
        std::fs::create_dir_all(&bindings).expect("a bindings directory");
        let target = kubewasm_build::Target {
            wit_dir: wit,
            world: "reconciler".to_owned(),
        };
        kubewasm_build::c::bindings(&target, &bindings).expect("generating the C bindings");
        run_native_test_with(
            "propagator/kube_predicates_test.c",
            &["propagator/kube.c", "json.c"],
            &[bindings],
        );
        let _ = std::fs::remove_dir_all(&scratch);
    }

    /// The admission helpers of C policies (`admission/admission.c`) against
    /// `admission/admission_test.c`, compiled with the generated bindings of 0.3's
    /// `admission-policy` world on the include path.
    #[test]
    fn the_c_admission_helpers_pass_their_native_tests() {
        let scratch =
            std::env::temp_dir().join(format!("kubewasm-c-admission-{}", std::process::id()));
        let (wit, bindings) = (scratch.join("wit"), scratch.join("bindings"));
        crate::guests::toolchain::assemble_v0_3(&crate::workspace::root().join("wit"), &wit)
            .expect("assembling 0.3's WIT");
        std::fs::create_dir_all(&bindings).expect("a bindings directory");
        let target = kubewasm_build::Target {
            wit_dir: wit,
            world: "admission-policy".to_owned(),
        };
        kubewasm_build::c::bindings(&target, &bindings).expect("generating the C bindings");
        run_native_test_with(
            "admission/admission_test.c",
            &["admission/admission.c"],
            &[bindings],
        );
        let _ = std::fs::remove_dir_all(&scratch);
    }

    /// The example's counts table (`examples-guests/c/counts.c`) against `counts_test.c`.
    #[test]
    fn the_c_examples_counts_pass_their_native_tests() {
        run_native_test("counts_test.c", &["counts.c"]);
    }
}
