//! The wit-bindgen bindings the SDK wraps: the world `kubewasm:controller/reconciler@0.2.2`
//! (`wit/0.2.2/`: 0.2.0's imports and `reconcile`, and 0.2.2's `plugin`, whose queue rules carry
//! predicates), and in [`batch`] the `batch-handler` 0.2.1 adds (`wit/0.2.1/`). Together they
//! are the world `batch-controller@0.2.2`: a plugin built with the SDK takes its events in
//! batches, and needs a host that knows 0.2.2.

wit_bindgen::generate!({
    path: ["wit/0.2", "wit/0.2.1", "wit/0.2.2"],
    world: "kubewasm:controller/reconciler@0.2.2",
    generate_all,
    pub_export_macro: true,
    export_macro_name: "export",
    default_bindings_module: "::kubewasm_guest_v0_2::bindings",
    runtime_path: "::kubewasm_guest_v0_2::wit_bindgen_rt",
});

/// `batch-handler` (0.2.1).
pub mod batch {
    wit_bindgen::generate!({
        path: ["wit/0.2", "wit/0.2.1"],
        inline: "package kubewasm:sdk; world batch { export kubewasm:controller/batch-handler@0.2.1; }",
        pub_export_macro: true,
        export_macro_name: "export_batch",
        default_bindings_module: "::kubewasm_guest_v0_2::bindings::batch",
        runtime_path: "::kubewasm_guest_v0_2::wit_bindgen_rt",
    });
}
