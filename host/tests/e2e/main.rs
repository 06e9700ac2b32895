//! The end-to-end tests: one test binary (as wasmtime's `tests/all` and ripgrep's
//! `tests/tests.rs`), so wasmtime, cranelift, kube and axum are linked into one test executable
//! instead of one per topic. A module per topic; [`fixture`] holds what several of them build.
//!
//! The guests they load are the components `cargo xtask build-guests` wrote (see
//! [`kubewasm_tests::guest_path`]); no test builds one. Real-server tests live in modules named
//! `real` (`cargo xtask test` selects them with `test(/::real::/)`).

mod admission;
mod api_client;
mod author_journey;
mod batch_handler;
mod bounds_v0_2;
mod cli;
mod controller_loop;
mod differential;
mod envtest;
mod examples_manifests;
mod examples_polyglot;
mod examples_rust;
mod fixture;
mod handler_faults;
mod help_text;
mod idle_cpu;
mod image;
mod oci;
mod plugins;
mod propagate_controller;
mod readiness;
mod reconcile_v0_2;
mod reload;
mod reload_memory;
mod sample_controller;
mod scenario;
mod status_page;

/// Not a test: the keeper of the real API server the run's real-server tests share, run only
/// when such a test starts this binary as one (see `kubewasm_tests::envtest::shared`).
#[test]
#[ignore = "run only as the keeper of the shared real API server"]
fn envtest_keeper() {
    kubewasm_tests::envtest::shared::keep();
}
