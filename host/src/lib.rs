//! kubewasm: shared informers feeding controllers written as WebAssembly components.

pub mod plugin;
