//! The Rust example guests (`examples-guests/rust/`), built from source for wasm32-wasip2: each
//! loads into the host's engine, and run as a plugin against the development API server it does
//! what its README says (asserted on its log lines).

use std::time::Instant;

use kubewasm::plugin::{EngineOptions, PluginEngine};
use kubewasm_tests::build_guest;

/// The Rust examples, by package (= component) name.
const EXAMPLES: [&str; 2] = ["pod-diff", "ready-pods"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rust_example_compiles_and_loads_from_the_compile_cache() {
    let cache_dir =
        std::env::temp_dir().join(format!("kubewasm-rust-examples-{}", std::process::id()));
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(cache_dir.clone()),
    })
    .expect("engine");
    for name in EXAMPLES {
        let path = build_guest(name);
        let bytes = std::fs::read(&path).expect("reading the built guest");
        let size = bytes.len();

        let started = Instant::now();
        let compiled = engine
            .compile(&path, bytes.clone())
            .await
            .unwrap_or_else(|e| panic!("{name} does not load: {e}"));
        let compile_time = started.elapsed();
        assert!(!compiled.from_cache(), "{name}: the first load compiles");

        let started = Instant::now();
        let cached = engine
            .compile(&path, bytes)
            .await
            .unwrap_or_else(|e| panic!("{name} does not load from the compile cache: {e}"));
        let cached_time = started.elapsed();
        assert!(
            cached.from_cache(),
            "{name}: the second load comes from the compile cache"
        );
        assert_eq!(compiled.content_hash(), cached.content_hash());

        // Reported, never asserted: the figures for the closing note and BENCHMARKS.md.
        println!(
            "{name}: {} KB, compile {:.0} ms, load from cache {:.1} ms",
            size / 1024,
            compile_time.as_secs_f64() * 1e3,
            cached_time.as_secs_f64() * 1e3
        );
    }
    let _ = std::fs::remove_dir_all(cache_dir);
}
