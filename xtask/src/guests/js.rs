//! The JavaScript guests (`examples-guests/js/`), built by `kubewasm_build::js`
//! (componentize-js).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Ctx;
use super::toolchain::{self, Contract};

/// The 0.1 example this module writes (`configmap-counter-js.wasm`).
pub const NAME: &str = "configmap-counter-js";
/// The 0.2 example this module writes (`configmap-propagator-js.wasm`), from
/// `examples-guests/js/propagator/`.
pub const PROPAGATOR: &str = "configmap-propagator-js";
/// The 0.3 mutating policy (`default-requests-js.wasm`), from `examples-guests/js/default-requests/`.
pub const DEFAULT_REQUESTS: &str = "default-requests-js";

/// Builds `examples-guests/js/controller.js` into `out_dir/configmap-counter-js.wasm`,
/// `propagator/propagator.js` into `out_dir/configmap-propagator-js.wasm` and
/// `default-requests/default-requests.js` into `out_dir/default-requests-js.wasm`.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let source = ctx.root.join("examples-guests/js");
    Ok(vec![
        build_one(ctx, Contract::V0_1, NAME, &source.join("controller.js"))?,
        build_one(
            ctx,
            Contract::V0_2,
            PROPAGATOR,
            &source.join("propagator/propagator.js"),
        )?,
        build_one(
            ctx,
            Contract::V0_3,
            DEFAULT_REQUESTS,
            &source.join("default-requests/default-requests.js"),
        )?,
    ])
}

fn build_one(ctx: &Ctx, contract: Contract, name: &str, module: &Path) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    contract.prepare(ctx)?;
    let bytes = kubewasm_build::js::build(
        &toolchain::toolchains(ctx),
        &contract.target(ctx),
        module,
        &toolchain::scratch(ctx, &format!("js-{name}")),
    )?;
    toolchain::write_component(ctx, contract, name, &bytes, started)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The helpers `kube.js` re-exports, the queue rules and index sources (`rules.js`), the
    /// patch bodies and delays (`patch.js`) and the admission records and checked review
    /// (`admission.js`), against `rules_test.js`, `patch_test.js` and `admission_test.js`, and
    /// `kube.js`'s `Resource` over a stand-in host (`kube_test.js`, its imports resolved by
    /// `test_host.js`), under node's test runner (the modules are ES modules in a directory
    /// without a package.json).
    #[test]
    fn the_js_kube_helpers_pass_their_node_tests() {
        let dir = crate::workspace::root().join("examples-guests/js/propagator");
        let run = Command::new("node")
            .current_dir(&dir)
            .args([
                "--experimental-default-type=module",
                "--test",
                "rules_test.js",
                "patch_test.js",
                "admission_test.js",
                "kube_test.js",
            ])
            .output()
            .unwrap_or_else(|e| panic!("running node (the JavaScript tests need it): {e}"));
        assert!(
            run.status.success(),
            "the node tests of kube.js and its modules failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}
