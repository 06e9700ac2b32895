//! Checks shared by the example tests of every language.

use std::path::PathBuf;
use std::time::Instant;

use kubewasm::plugin::{EngineOptions, PluginEngine};

/// Compiles each `(name, path, bytes)` component with a fresh engine and on-disk compile cache,
/// then loads it again: the first load must compile, the second come from the cache with the
/// same content hash. Prints the sizes and times (reported, never asserted).
pub async fn compiles_then_loads_from_the_cache(examples: Vec<(String, PathBuf, Vec<u8>)>) {
    let cache = tempfile::tempdir().expect("compile cache dir");
    let engine = PluginEngine::new(EngineOptions {
        cache_dir: Some(cache.path().to_path_buf()),
    })
    .expect("engine");
    for (name, path, bytes) in examples {
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
        println!(
            "{name}: {} KB, compile {:.0} ms, load from cache {:.1} ms",
            size / 1024,
            compile_time.as_secs_f64() * 1e3,
            cached_time.as_secs_f64() * 1e3
        );
    }
}
