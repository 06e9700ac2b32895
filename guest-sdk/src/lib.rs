//! Write kubewasm plugins in Rust.
