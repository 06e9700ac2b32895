//! kubewasm: shared informers feeding controllers written as WebAssembly components.

pub mod admission;
pub mod allocator;
pub mod api_client;
pub mod app;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contracts;
pub mod health;
pub mod inspect;
pub mod leader;
pub mod logging;
pub mod manifest_yaml;
pub mod metrics;
pub mod oci;
pub mod process_memory;
pub mod rbac;
pub mod reload;
pub mod scaffold;
pub mod scenario;
pub mod server;
pub mod status_page;
