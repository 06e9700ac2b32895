//! The hasher of the maps and sets keyed by object keys (the store, its indexes, the FIFO).
//!
//! foldhash, as hashbrown uses by default: std's SipHash was a fifth of the CPU of an initial
//! sync. Each map draws its own seed, so object names chosen to collide (anyone who may create
//! objects chooses their names) cannot be precomputed.

use std::collections::{HashMap, HashSet};

/// Builds the hashers of [`KeyMap`] and [`KeySet`].
pub(crate) type BuildKeyHasher = foldhash::fast::RandomState;
/// A map keyed by object keys.
pub(crate) type KeyMap<K, V> = HashMap<K, V, BuildKeyHasher>;
/// A set of object keys.
pub(crate) type KeySet<K> = HashSet<K, BuildKeyHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Object keys differ in a few trailing characters: they must still spread over
    /// hashbrown's buckets (low bits) and its tags (top 7 bits), or lookups degrade to scans.
    #[test]
    fn similar_keys_spread_over_buckets_and_tags() {
        let build = BuildKeyHasher::default();
        let hashes: Vec<u64> = (0..10_000)
            .map(|i| build.hash_one(format!("default/bench-{i:06}")))
            .collect();
        let distinct: KeySet<u64> = hashes.iter().copied().collect();
        assert_eq!(distinct.len(), hashes.len());
        let low: KeySet<u64> = hashes.iter().map(|h| h & 0x3fff).collect();
        let top: KeySet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 5_000, "low bits: {}", low.len());
        assert_eq!(top.len(), 128);
        assert_ne!(build.hash_one("ab"), build.hash_one("ab\0"));
    }
}
