//! A component without the controller's `handler` exports, which the host must refuse.

wit_bindgen::generate!({
    path: "wit",
    world: "no-handler",
});

struct NoHandler;

impl Guest for NoHandler {
    fn run() -> u32 {
        42
    }
}

export!(NoHandler);
