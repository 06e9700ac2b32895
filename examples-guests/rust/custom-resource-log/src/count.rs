//! Objects per namespace, counted from the events.

use std::collections::HashMap;

/// How many objects each namespace holds, from the events seen so far: O(1) per event.
///
/// Correct from the first event because the host replays its whole cache as adds to a freshly
/// loaded (or restarted) instance before any live event; a delete noticed on a relist
/// (`final_state_unknown`) is still a delete. A namespace whose count falls to zero is dropped,
/// so memory follows the namespaces that hold objects.
#[derive(Debug, Default)]
pub struct Counts(HashMap<String, u64>);

impl Counts {
    /// Applies `delta` (+1 added, 0 changed, -1 deleted) to `namespace` and returns its count.
    pub fn add(&mut self, namespace: &str, delta: i64) -> u64 {
        let count = match self.0.get_mut(namespace) {
            Some(count) => count,
            None if delta > 0 => self.0.entry(namespace.to_owned()).or_default(),
            None => return 0,
        };
        *count = count.saturating_add_signed(delta);
        let now = *count;
        if now == 0 {
            self.0.remove(namespace);
        }
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_adds_and_deletes_per_namespace() {
        let mut counts = Counts::default();
        assert_eq!(counts.add("shop", 1), 1);
        assert_eq!(counts.add("shop", 1), 2);
        assert_eq!(counts.add("tools", 1), 1);
        assert_eq!(counts.add("shop", 0), 2);
        assert_eq!(counts.add("shop", -1), 1);
        assert_eq!(counts.add("shop", -1), 0);
        assert!(
            !counts.0.contains_key("shop"),
            "empty namespaces are dropped"
        );
        assert_eq!(
            counts.add("never-seen", -1),
            0,
            "a stray delete never underflows"
        );
        assert_eq!(counts.add("tools", 0), 1);
    }
}
