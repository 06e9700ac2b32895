//! What the initial-sync benchmarks share: their settings from the environment, the reference
//! figures' ConfigMap, medians and the resident memory of this process.

use serde_json::json;

/// A count from the environment (`BENCH_OBJECTS`, `BENCH_RUNS`), else `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A ConfigMap as the reference figures used: one label, one annotation, a 1000-character value.
pub fn config_map(i: usize) -> serde_json::Value {
    let value: String = (0..1000)
        .map(|k| (b'a' + ((i + k) % 26) as u8) as char)
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("bench-{i:06}"),
            "namespace": "default",
            "labels": {"app.kubernetes.io/name": "bench"},
            "annotations": {"bench.kubewasm.io/note": format!("object number {i}")},
        },
        "data": {"value": value},
    })
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Resident set size in bytes, from /proc/self/status.
pub fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}
