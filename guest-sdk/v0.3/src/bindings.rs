//! The wit-bindgen bindings the SDK wraps: the world `kubewasm:controller/admission-policy@0.3.0`
//! (`wit/0.3/`): 0.2.0's `cache`, `client`, `queue` and `log` imports, 0.2.0's `plugin` export
//! and 0.3's `admission` export.
//!
//! Generated once by `cargo xtask bindings` (what `wit_bindgen::generate!` would expand to, with
//! the same options) and committed, as the 0.2 SDK's are. A test fails when this file differs
//! from what the WIT gives.

include!("bindings/admission.rs");
