//! The wit-bindgen bindings the SDK wraps: the world `kubewasm:controller/reconciler@0.2.2`
//! (`wit/0.2.2/`: 0.2.0's imports and `reconcile`, and 0.2.2's `plugin`, whose queue rules carry
//! predicates), and in [`batch`] the `batch-handler` 0.2.1 adds (`wit/0.2.1/`). Together they
//! are the world `batch-controller@0.2.2`: a plugin built with the SDK takes its events in
//! batches, and needs a host that knows 0.2.2.
//!
//! Generated once by `cargo xtask bindings` (what `wit_bindgen::generate!` would expand to, with
//! the same options) and committed: a plugin's build then compiles wit-bindgen's small runtime
//! only, not the macro's WIT parser and component encoder, which were most of a fresh plugin's
//! first build. A test fails when these files differ from what the WIT gives.

include!("bindings/reconciler.rs");

/// `batch-handler` (0.2.1).
pub mod batch {
    include!("bindings/batch.rs");
}
