//! The guest build of kubewasm: turns a plugin's sources (Rust, Go, Python, JavaScript or C)
//! into a WebAssembly component and checks it against the contract it claims.
//!
//! Two callers share it: `cargo xtask build-guests` (the examples and test guests of this
//! repository, installing missing toolchains) and `kubewasm build` (a plugin author's project,
//! naming a missing toolchain with the command that installs it). Each language module takes
//! its inputs as paths and returns the component's bytes, so neither caller's layout leaks into
//! the other.

pub mod c;
pub mod component;
pub mod go;
mod go_runtime;
pub mod js;
pub mod project;
pub mod python;
pub mod rust;
pub mod toolchain;

pub use component::Target;
pub use project::{Built, Language, Profile, Project};
pub use toolchain::{MissingToolchain, Toolchains};
