//! A fast hasher for the object keys the store, indexes and FIFO are keyed by.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hashing over 8-byte words, with a final mix so hashbrown's top-bit tags vary.
///
/// Keys come from the API server, not from untrusted clients, so flooding resistance (std's
/// SipHash) is not worth its cost here: SipHash was a fifth of the CPU of an initial sync.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    fn finish(&self) -> u64 {
        let h = self.0;
        (h ^ (h >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (h >> 29)
    }
}

/// Builds [`KeyHasher`]s.
pub(crate) type BuildKeyHasher = BuildHasherDefault<KeyHasher>;
/// A map with [`KeyHasher`].
pub(crate) type KeyMap<K, V> = HashMap<K, V, BuildKeyHasher>;
/// A set with [`KeyHasher`].
pub(crate) type KeySet<K> = HashSet<K, BuildKeyHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn similar_keys_spread_over_buckets_and_tags() {
        let build = BuildKeyHasher::default();
        let hashes: Vec<u64> = (0..10_000)
            .map(|i| build.hash_one(format!("default/bench-{i:06}")))
            .collect();
        let distinct: KeySet<u64> = hashes.iter().copied().collect();
        assert_eq!(distinct.len(), hashes.len());
        // hashbrown uses the low bits for the bucket and the top 7 bits as a tag.
        let low: KeySet<u64> = hashes.iter().map(|h| h & 0x3fff).collect();
        let top: KeySet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(low.len() > 5_000, "low bits: {}", low.len());
        assert_eq!(top.len(), 128);
        assert_ne!(build.hash_one("ab"), build.hash_one("ab\0"));
    }
}
