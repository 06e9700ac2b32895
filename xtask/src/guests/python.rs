//! The Python guests (`examples-guests/python/`: the 0.1 example, the 0.2.2 sample-controller and
//! the 0.3 admission policy allowed-registries), built by `kubewasm_build::python` (componentize-py).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example (`configmap-counter-python.wasm`).
pub const NAME: &str = "configmap-counter-python";

/// The 0.2.2 sample-controller (`examples-guests/python/sample-controller/`).
pub const SAMPLE_CONTROLLER: &str = "sample-controller-python";

/// The 0.3 validating policy (`examples-guests/python/allowed-registries/`).
pub const ALLOWED_REGISTRIES: &str = "allowed-registries";

/// Builds `examples-guests/python/` into `out_dir/configmap-counter-python.wasm`,
/// `examples-guests/python/sample-controller/` into `out_dir/sample-controller-python.wasm` and
/// `examples-guests/python/allowed-registries/` into `out_dir/allowed-registries.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let example = ctx.root.join("examples-guests/python");
    Ok(vec![
        build_one(ctx, NAME, Contract::V0_1, &example, false)?,
        build_one(
            ctx,
            SAMPLE_CONTROLLER,
            Contract::V0_2_2,
            &example.join("sample-controller"),
            false,
        )?,
        build_one(
            ctx,
            ALLOWED_REGISTRIES,
            Contract::V0_3,
            &example.join("allowed-registries"),
            true,
        )?,
    ])
}

/// Bundles `source/app.py` (and the modules beside it) into `out_dir/NAME.wasm`; with
/// `with_kube`, the helper `kube.py` too (it lives in `sample-controller/`, the one copy
/// `kubewasm new` embeds; it is copied alone into a directory of its own, so no other module of
/// that example can shadow the guest's).
fn build_one(
    ctx: &Ctx,
    name: &str,
    contract: Contract,
    source: &Path,
    with_kube: bool,
) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    contract.prepare(ctx)?;
    let scratch = toolchain::scratch(ctx, &format!("python/{name}"));
    let library = toolchain::scratch(ctx, &format!("python/{name}-kube"));
    if with_kube {
        let dir = kubewasm_build::toolchain::scratch_dir(&library)?;
        std::fs::copy(
            ctx.root
                .join("examples-guests/python/sample-controller/kube.py"),
            dir.join("kube.py"),
        )?;
    }
    let libraries: &[&Path] = if with_kube { &[&library] } else { &[] };
    let bytes = kubewasm_build::python::build(
        &toolchain::toolchains(ctx),
        &contract.target(ctx),
        source,
        libraries,
        "app",
        &scratch,
    )?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Runs the unittest module `module` in `examples-guests/python/DIR` under the system's
    /// python3.
    fn unittest(dir: &str, module: &str) {
        let dir = crate::workspace::root()
            .join("examples-guests/python")
            .join(dir);
        let run = Command::new("python3")
            .current_dir(&dir)
            .args(["-B", "-m", "unittest", module])
            .output()
            .unwrap_or_else(|e| panic!("running python3 (the Python tests need it): {e}"));
        assert!(
            run.status.success(),
            "{module}.py failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }

    /// allowed-registries' image-name and allow-list rules (`registries.py`, plain Python)
    /// against `registries_test.py`.
    #[test]
    fn the_registry_rules_pass_their_python_tests() {
        unittest("allowed-registries", "registries_test");
    }

    /// The helper `kube.py` (the one `kubewasm new` writes into Python projects) against
    /// `kube_test.py`: its writes, patches, paged reads, index declarations, queue calls and
    /// error classes, over stand-ins for the generated bindings.
    #[test]
    fn the_python_kube_helpers_pass_their_python_tests() {
        unittest("sample-controller", "kube_test");
    }
}
