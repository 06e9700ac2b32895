//! The wit-bindgen bindings of `wit/0.2/controller.wit` (world `controller`); the SDK's modules
//! wrap them.

wit_bindgen::generate!({
    path: "../../wit/0.2",
    world: "controller",
    pub_export_macro: true,
    export_macro_name: "export",
    default_bindings_module: "::kubewasm_guest_v0_2::bindings",
    runtime_path: "::kubewasm_guest_v0_2::wit_bindgen_rt",
});
