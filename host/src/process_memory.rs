//! The host process's memory and the limit it runs under, read when scraped: what the
//! "memory near the limit" alert compares (a pod past its limit is killed, every plugin with it).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// Where the memory limit of the process's cgroup is: cgroup v2 first (a pod's namespaced
/// cgroup is mounted at the root), then v1.
const LIMIT_FILES: [&str; 2] = [
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
];

/// cgroup v1 writes "no limit" as a number near `i64::MAX`; anything this large is none.
const NO_LIMIT: u64 = 1 << 60;

/// The process's resident set in bytes (`/proc/self/statm`), `None` off Linux.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// The memory limit of the process's cgroup in bytes; `None` when there is none.
pub fn limit_bytes() -> Option<u64> {
    LIMIT_FILES
        .iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .and_then(|text| parse_limit(&text))
}

fn parse_limit(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (limit < NO_LIMIT).then_some(limit)
}

/// The two gauges, read on each scrape.
#[derive(Debug)]
pub struct ProcessMemory;

impl Collector for ProcessMemory {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gauges: [(&str, &str, Option<u64>); 2] = [
            (
                "process_resident_memory_bytes",
                "Resident memory of the host process, plugins and caches included",
                resident_bytes(),
            ),
            (
                "process_memory_limit_bytes",
                "The memory limit of the host's cgroup (a pod's limit); absent without one",
                limit_bytes(),
            ),
        ];
        for (name, help, value) in gauges {
            let encoder = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            if let Some(value) = value {
                ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(encoder)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_read_and_no_limit_is_none() {
        assert_eq!(parse_limit("1073741824\n"), Some(1 << 30));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }
}
