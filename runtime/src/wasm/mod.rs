//! WebAssembly: the one engine, compiling components within a memory budget, and the data of
//! one store.

pub(crate) mod compile_work;
pub(crate) mod component;
pub(crate) mod engine;
pub(crate) mod state;
