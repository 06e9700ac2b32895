//! Host bindings generated from `wit/controller.wit`, the one place `bindgen!` runs.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "controller",
    exports: { default: async },
});
