//! client-go's SharedInformerFactory in Rust.
