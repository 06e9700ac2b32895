//! A component of another world (`example:other/other`), which the host must refuse with a
//! clear error.

wit_bindgen::generate!({
    path: "wit",
    world: "other",
});

struct Other;

impl Guest for Other {
    fn run() -> u64 {
        example::other::clock::now() + 1
    }
}

export!(Other);
