//! The pure parts of the density benchmark (`host/benches/density.rs`): reading a process's CPU
//! time and resident memory from /proc text, summing a metric of the API server's Prometheus
//! text, percentiles, and telling the line a handler logs for the probe update from the others.

/// The ConfigMap the density benchmark updates to measure update-to-handler latency.
pub const PROBE_OBJECT: &str = "bench-000000";

/// User + system CPU time in milliseconds from the text of `/proc/<pid>/stat`, whose clock
/// ticks are 10 ms on Linux (`CLK_TCK` = 100); `None` when the text is not a stat line.
pub fn stat_cpu_ms(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces and parentheses: fields are counted after the
    // last `)`, where field 3 (state) is the first.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10.0)
}

/// `VmRSS` in bytes from the text of `/proc/<pid>/status`.
pub fn status_rss_bytes(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The sum of every sample of metric `name` in Prometheus text whose labels include each of
/// `labels` (`key="value"`), e.g. the API server's open watches:
/// `apiserver_longrunning_requests` with `verb="WATCH"`. `None` when no sample matched.
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut sum = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (label_text, value) = match rest.strip_prefix('{') {
            Some(after) => match after.split_once('}') {
                Some((inside, value)) => (inside, value),
                None => continue,
            },
            // Another metric whose name starts with `name` (`name_total`), or a bare sample.
            None if rest.starts_with(' ') => ("", rest),
            None => continue,
        };
        let wanted = labels
            .iter()
            .all(|(k, v)| label_text.split(',').any(|l| l == format!("{k}=\"{v}\"")));
        if !wanted {
            continue;
        }
        let Some(value) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        *sum.get_or_insert(0.0) += value;
    }
    sum
}

/// The value at percentile `p` (0-100) of `values` by nearest rank; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Whether a logged line is a handler's report of an update to [`PROBE_OBJECT`], in any of the
/// benchmark's controllers: pod-diff (`ConfigMap default/bench-000000 changed: ...`), the Python
/// configmap-counter (`event=update ns=default name=bench-000000 ...`) and the kube-rs and
/// client-go baselines (`density-update default/bench-000000`). The initial list's adds are not.
pub fn is_probe_update(line: &str) -> bool {
    let object = format!("/{PROBE_OBJECT} changed:");
    let counter = format!("event=update ns=default name={PROBE_OBJECT} ");
    let baseline = format!("density-update default/{PROBE_OBJECT}");
    line.contains(&object) || line.contains(&counter) || line.contains(&baseline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_counts_fields_after_the_command_name() {
        let stat =
            "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 9 0 0 0 150 25 0 0 20 0 9 0";
        assert_eq!(stat_cpu_ms(stat), Some(1750.0));
        assert_eq!(stat_cpu_ms("garbage"), None);
        assert_eq!(stat_cpu_ms("1 (x) S 1 2"), None);
    }

    #[test]
    fn rss_is_read_in_kib_and_returned_in_bytes() {
        let status = "Name:\tkubewasm\nVmPeak:\t  9000 kB\nVmRSS:\t  2048 kB\n";
        assert_eq!(status_rss_bytes(status), Some(2048 * 1024));
        assert_eq!(status_rss_bytes("Name:\tzombie\n"), None);
    }

    #[test]
    fn metric_sum_adds_the_samples_whose_labels_match() {
        let text = "\
# HELP apiserver_longrunning_requests Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component=\"apiserver\",resource=\"configmaps\",scope=\"cluster\",verb=\"WATCH\"} 7
apiserver_longrunning_requests{component=\"apiserver\",resource=\"pods\",scope=\"cluster\",verb=\"WATCH\"} 5
apiserver_longrunning_requests{component=\"apiserver\",resource=\"pods\",scope=\"namespace\",verb=\"CONNECT\"} 1
apiserver_longrunning_requests_other{verb=\"WATCH\"} 100
apiserver_registered_watchers 3
";
        let watch = [("verb", "WATCH")];
        assert_eq!(
            metric_sum(text, "apiserver_longrunning_requests", &watch),
            Some(12.0)
        );
        let config_maps = [("verb", "WATCH"), ("resource", "configmaps")];
        assert_eq!(
            metric_sum(text, "apiserver_longrunning_requests", &config_maps),
            Some(7.0)
        );
        assert_eq!(
            metric_sum(text, "apiserver_registered_watchers", &[]),
            Some(3.0)
        );
        assert_eq!(metric_sum(text, "etcd_requests", &[]), None);
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values, 100.0), Some(100.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn only_updates_of_the_probe_object_are_probe_lines() {
        assert!(is_probe_update(
            "INFO kubewasm::guest: ConfigMap default/bench-000000 changed: \
             metadata.annotations.density.kubewasm.io/seq: \"1\" -> \"2\" plugin=p0001"
        ));
        assert!(is_probe_update(
            "event=update ns=default name=bench-000000 ns_count=1001 app=- app_peers=0"
        ));
        assert!(is_probe_update("density-update default/bench-000000 seq=3"));
        assert!(!is_probe_update(
            "ConfigMap default/bench-000000 added (initial list)"
        ));
        assert!(!is_probe_update(
            "event=add ns=default name=bench-000000 ns_count=1 app=- app_peers=0"
        ));
        assert!(!is_probe_update(
            "ConfigMap default/bench-0000001 changed: data.value"
        ));
    }
}
