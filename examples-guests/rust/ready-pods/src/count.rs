//! Counting ready pods: a pod is ready when its `Ready` condition is `True`.

use std::fmt;
use std::ops::AddAssign;

use crate::objects::Pod;

/// How many of a set of pods are ready.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    pub ready: usize,
    pub total: usize,
}

impl Readiness {
    /// Counts `pods`, leaving out those being deleted.
    pub fn of(pods: &[Pod]) -> Self {
        let live = pods
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none());
        let (mut ready, mut total) = (0, 0);
        for pod in live {
            total += 1;
            if is_ready(pod) {
                ready += 1;
            }
        }
        Readiness { ready, total }
    }
}

impl AddAssign for Readiness {
    fn add_assign(&mut self, other: Self) {
        self.ready += other.ready;
        self.total += other.total;
    }
}

/// `2/3 pods ready`.
impl fmt::Display for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} pods ready", self.ready, self.total)
    }
}

fn is_ready(pod: &Pod) -> bool {
    pod.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|condition| condition.type_ == "Ready" && condition.status == "True")
    })
}

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::{self, json};

    use super::*;

    fn pod(ready: Option<&str>, deleting: bool) -> Pod {
        let mut value = json!({"metadata": {"name": "p"}, "status": {"conditions": []}});
        if let Some(status) = ready {
            value["status"]["conditions"] = json!([
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": status}
            ]);
        }
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-11-29T12:00:00Z");
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_pods_with_a_true_ready_condition_count_as_ready() {
        let pods = [
            pod(Some("True"), false),
            pod(Some("False"), false),
            pod(None, false),
        ];
        assert_eq!(Readiness::of(&pods), Readiness { ready: 1, total: 3 });
        assert_eq!(Readiness::of(&pods).to_string(), "1/3 pods ready");
    }

    #[test]
    fn pods_being_deleted_are_left_out() {
        let pods = [pod(Some("True"), true), pod(Some("True"), false)];
        assert_eq!(Readiness::of(&pods), Readiness { ready: 1, total: 1 });
    }

    #[test]
    fn readiness_adds_up_across_replica_sets() {
        let mut sum = Readiness { ready: 1, total: 2 };
        sum += Readiness { ready: 2, total: 2 };
        assert_eq!(sum, Readiness { ready: 3, total: 4 });
    }
}
