//! The wit-bindgen bindings of `wit/controller.wit` (world `controller`); the SDK's modules wrap
//! them, guests should not need them.

wit_bindgen::generate!({
    path: "wit",
    world: "controller",
    pub_export_macro: true,
    export_macro_name: "export",
    default_bindings_module: "::kubewasm_guest::bindings",
    runtime_path: "::kubewasm_guest::runtime::wit_bindgen_rt",
});
