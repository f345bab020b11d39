//! The table's index: each kept value's node, found by its key.
//!
//! Written by hand rather than with `hashbrown`'s table: that table keeps its control bytes
//! apart from its slots, so that placing a new key and taking out an evicted one each read
//! two lines of memory. Under a flood at the budget both happen on every first execution, in
//! an index the cache has let go. Here an entry holds the hash it was placed by beside its
//! node, in open addressing with linear probing: placing and taking out read one line each,
//! and taking out shifts the entries after it back instead of leaving a tombstone.

use std::hash::BuildHasher;

use crate::key::{IntentKey, KeyHasher};

/// An entry: the hash's low 32 bits, then the node's place plus one; zero is empty.
type IndexCell = u64;

/// Entries start at this many and double whenever they would be more than half full.
const FIRST_CAPACITY: usize = 64;

pub(super) struct Index {
    entries: Box<[IndexCell]>,
    len: usize,
    /// Seeded per process, so that no one can aim keys at one run of entries.
    hasher: KeyHasher,
}

impl Index {
    pub(super) fn new() -> Self {
        Self {
            entries: vec![0; FIRST_CAPACITY].into_boxed_slice(),
            len: 0,
            hasher: KeyHasher::new(),
        }
    }

    /// The hash `key` is placed by: of its first eight bytes (a SHA-256 digest is uniform),
    /// seeded, since a client chooses what the digest is of.
    pub(super) fn hash(&self, key: &IntentKey) -> u32 {
        self.hasher.hash_one(key) as u32
    }

    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    /// The node placed by `hash` that `is` accepts.
    pub(super) fn find(&self, hash: u32, is: impl Fn(u32) -> bool) -> Option<u32> {
        self.position(hash, is).map(|at| node_of(self.entries[at]))
    }

    /// Where the entry placed by `hash` whose node `is` accepts lies.
    fn position(&self, hash: u32, is: impl Fn(u32) -> bool) -> Option<usize> {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            let entry = self.entries[at];
            if entry == 0 {
                return None;
            }
            if hash_of(entry) == hash && is(node_of(entry)) {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// Places `node` by `hash`; no entry of that node may be present.
    pub(super) fn insert(&mut self, hash: u32, node: u32) {
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        put(&mut self.entries, entry(hash, node));
        self.len += 1;
    }

    /// Takes out the entry of `node`, placed by `hash`, if there is one.
    pub(super) fn remove(&mut self, hash: u32, node: u32) {
        let Some(mut hole) = self.position(hash, |placed| placed == node) else {
            return;
        };
        let mask = self.mask();
        // Shifted back: each entry after the hole that may move into it (its home is not
        // between the hole and itself) moves, so that every run stays unbroken.
        let mut next = (hole + 1) & mask;
        loop {
            let entry = self.entries[next];
            if entry == 0 {
                break;
            }
            let home = hash_of(entry) as usize & mask;
            let distance_to_home = next.wrapping_sub(home) & mask;
            let distance_to_hole = next.wrapping_sub(hole) & mask;
            if distance_to_home >= distance_to_hole {
                self.entries[hole] = entry;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.entries[hole] = 0;
        self.len -= 1;
    }

    /// Doubles the entries, placing each again by the hash it holds.
    fn grow(&mut self) {
        let doubled = vec![0; self.entries.len() * 2].into_boxed_slice();
        let old = std::mem::replace(&mut self.entries, doubled);
        for entry in old.iter().copied().filter(|&entry| entry != 0) {
            put(&mut self.entries, entry);
        }
    }
}

/// The entry of `node`, placed by `hash`.
fn entry(hash: u32, node: u32) -> IndexCell {
    (u64::from(hash) << 32) | (u64::from(node) + 1)
}

/// The hash an entry was placed by.
fn hash_of(entry: IndexCell) -> u32 {
    (entry >> 32) as u32
}

/// The node an entry names; not of the empty entry.
fn node_of(entry: IndexCell) -> u32 {
    entry as u32 - 1
}

/// Writes `entry` in the first empty place from its home on; there must be one.
fn put(entries: &mut [IndexCell], entry: IndexCell) {
    let mask = entries.len() - 1;
    let mut at = hash_of(entry) as usize & mask;
    while entries[at] != 0 {
        at = (at + 1) & mask;
    }
    entries[at] = entry;
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever is placed and taken out, by hashes that collide a lot, the index finds
        /// exactly the nodes placed and not taken out, and no other.
        #[test]
        fn the_index_finds_what_was_placed_and_not_taken_out(
            steps in prop::collection::vec((any::<bool>(), 0..300u32, 0..40u32), 1..2000),
        ) {
            let mut index = Index::new();
            // Node n is placed by hash `hashes[n]`: hashes that share their low bits, so that
            // runs form, meet and wrap around the end.
            let mut hashes: HashMap<u32, u32> = HashMap::new();
            let mut taken_out: HashMap<u32, u32> = HashMap::new();
            for (place, node, hash) in steps {
                let hash = hash * 64 + 60 + hash % 8;
                match (place, hashes.get(&node).copied()) {
                    (true, None) => {
                        index.insert(hash, node);
                        hashes.insert(node, hash);
                        taken_out.remove(&node);
                    }
                    (false, Some(placed)) => {
                        index.remove(placed, node);
                        hashes.remove(&node);
                        taken_out.insert(node, placed);
                    }
                    _ => {}
                }
                prop_assert_eq!(index.len, hashes.len());
            }
            for (&node, &hash) in &hashes {
                prop_assert_eq!(index.find(hash, |n| n == node), Some(node));
            }
            for (&node, &hash) in &taken_out {
                prop_assert_eq!(index.find(hash, |n| n == node), None);
            }
        }
    }

    #[test]
    fn an_entry_is_found_by_its_hash_and_its_node() {
        let mut index = Index::new();
        index.insert(7, 1);
        index.insert(7, 2);
        assert_eq!(index.find(7, |n| n == 2), Some(2));
        assert_eq!(index.find(8, |_| true), None);
        index.remove(7, 1);
        assert_eq!(
            index.find(7, |n| n == 2),
            Some(2),
            "shifted back, still found"
        );
        assert_eq!(index.find(7, |n| n == 1), None);
    }
}
