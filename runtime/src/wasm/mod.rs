//! WebAssembly: the one engine, compiling components within a memory budget, the precompiled
//! format, and the data of one store.

pub(crate) mod compile_work;
pub(crate) mod component;
pub(crate) mod engine;
pub(crate) mod origin;
pub mod precompiled;
pub(crate) mod state;
