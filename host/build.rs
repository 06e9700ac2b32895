//! The static (musl) build's mimalloc option numbers (`src/allocator.rs`), taken from the
//! header libmimalloc-sys compiles, so an upgrade of it cannot make the host set the wrong
//! option.

use std::path::Path;

#[path = "build/mimalloc_options.rs"]
mod mimalloc_options;

/// The options `src/allocator.rs` sets, and the constants it reads them as.
const OPTIONS: [(&str, &str); 2] = [
    ("mi_option_purge_delay", "MI_OPTION_PURGE_DELAY"),
    (
        "mi_option_arena_eager_commit",
        "MI_OPTION_ARENA_EAGER_COMMIT",
    ),
];

fn main() {
    println!("cargo::rerun-if-changed=build/mimalloc_options.rs");
    println!("cargo::rerun-if-env-changed=DEP_MIMALLOC_INCLUDE_DIR");
    // Set only where libmimalloc-sys is a dependency: the musl build.
    let Some(include) = std::env::var_os("DEP_MIMALLOC_INCLUDE_DIR") else {
        return;
    };
    let header = Path::new(&include).join("mimalloc.h");
    println!("cargo::rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
    let options =
        mimalloc_options::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", header.display()));
    let mut out = String::new();
    for (name, constant) in OPTIONS {
        let number = mimalloc_options::number(&options, name)
            .unwrap_or_else(|e| panic!("{}: {e}", header.display()));
        out.push_str(&format!(
            "pub const {constant}: libmimalloc_sys::mi_option_t = {number};\n"
        ));
    }
    let path = Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("mimalloc_options.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
