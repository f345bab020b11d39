//! Each scope's share of the memory store's byte budget.
//!
//! Under one global LRU, a caller that floods new intents evicts everybody's kept records, and
//! every evicted record lets a repeat run again. So each share (the principal where one is
//! configured, since sessions are the client's to mint; else the scope) may hold at most a
//! part of the budget, and past it that share's own oldest records go first.
//!
//! Written by hand rather than as a second cache: the records live in the store's moka
//! cache, and this only keeps, per share, the keys in the order they were kept and their
//! weights, so that it can name which of a share's records to drop.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use crate::key::{IntentKey, KeyHasher, ScopeHash};

/// The bytes each share holds, and its records oldest first.
pub(super) struct Shares {
    limit: u64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    shares: HashMap<ScopeHash, Share>,
    /// Which share each kept record counts against, its weight, and the generation of its
    /// place in that share's order.
    owners: HashMap<IntentKey, Owner, KeyHasher>,
    generation: u64,
}

#[derive(Clone, Copy)]
struct Owner {
    share: ScopeHash,
    weight: u64,
    generation: u64,
}

#[derive(Default)]
struct Share {
    bytes: u64,
    /// Values that count against it now.
    live: usize,
    /// Keys in the order they were kept, with the generation they were kept under; a place
    /// whose generation no longer matches its owner entry is stale and skipped.
    order: VecDeque<(IntentKey, u64)>,
}

impl Shares {
    pub(super) fn new(limit: u64) -> Self {
        Self {
            limit,
            state: Mutex::new(State {
                shares: HashMap::new(),
                owners: HashMap::with_hasher(KeyHasher::new()),
                generation: 0,
            }),
        }
    }

    /// Counts a kept value against `share`, and returns the share's oldest values to drop so
    /// that it stays within its part of the budget (never the value just kept).
    pub(super) fn kept(&self, key: IntentKey, share: ScopeHash, weight: u64) -> Vec<IntentKey> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.generation += 1;
        let generation = state.generation;
        let State { shares, owners, .. } = &mut *state;
        let owner = Owner {
            share,
            weight,
            generation,
        };
        if let Some(old) = owners.insert(key, owner) {
            if let Some(old_share) = shares.get_mut(&old.share) {
                old_share.bytes = old_share.bytes.saturating_sub(old.weight);
                old_share.live = old_share.live.saturating_sub(1);
            }
        }
        let held = shares.entry(share).or_default();
        held.bytes += weight;
        held.live += 1;
        held.order.push_back((key, generation));
        let mut dropped = Vec::new();
        while held.bytes > self.limit {
            let Some((oldest, placed)) = held.order.pop_front() else {
                break;
            };
            if placed == generation {
                // Only the newest value is left: it stays, alone over the part.
                held.order.push_front((oldest, placed));
                break;
            }
            let live = owners.get(&oldest).copied();
            if let Some(owner) = live.filter(|o| o.generation == placed && o.share == share) {
                owners.remove(&oldest);
                held.bytes = held.bytes.saturating_sub(owner.weight);
                held.live = held.live.saturating_sub(1);
                dropped.push(oldest);
            }
        }
        dropped
    }

    /// A value left the store (expired, evicted, replaced): it no longer counts.
    pub(super) fn left(&self, key: &IntentKey) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { shares, owners, .. } = &mut *state;
        let Some(owner) = owners.remove(key) else {
            return;
        };
        if let Some(held) = shares.get_mut(&owner.share) {
            held.bytes = held.bytes.saturating_sub(owner.weight);
            held.live = held.live.saturating_sub(1);
            if held.live == 0 {
                shares.remove(&owner.share);
            } else if held.order.len() > 64 && held.order.len() > 2 * held.live {
                // Places of values gone by other ways pile up: drop them now and then.
                let live =
                    |(k, g): &(IntentKey, u64)| owners.get(k).is_some_and(|o| o.generation == *g);
                held.order.retain(live);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> IntentKey {
        IntentKey::from_bytes([n; 32])
    }

    #[test]
    fn past_its_part_a_share_drops_its_own_oldest_records_only() {
        let shares = Shares::new(300);
        let (a, b) = (ScopeHash::of(b"a"), ScopeHash::of(b"b"));
        assert!(shares.kept(key(1), a, 100).is_empty());
        assert!(shares.kept(key(2), b, 100).is_empty());
        assert!(shares.kept(key(3), b, 100).is_empty());
        assert!(shares.kept(key(4), b, 100).is_empty());
        assert_eq!(shares.kept(key(5), b, 100), vec![key(2)]);
        assert_eq!(shares.kept(key(6), b, 150), vec![key(3), key(4)]);
        // A record that left by itself no longer counts, and is never named again.
        shares.left(&key(5));
        assert!(shares.kept(key(7), b, 100).is_empty());
        assert!(
            shares.kept(key(8), a, 200).is_empty(),
            "the other share kept its own"
        );
    }

    #[test]
    fn a_stale_place_of_a_record_kept_again_never_stops_the_evictions() {
        let shares = Shares::new(200);
        let a = ScopeHash::of(b"a");
        assert!(shares.kept(key(1), a, 100).is_empty());
        // It left (expired); its place in the order is stale.
        shares.left(&key(1));
        assert!(shares.kept(key(2), a, 100).is_empty());
        assert!(shares.kept(key(3), a, 100).is_empty());
        // The same intent kept again: its stale place is skipped, the oldest live one goes.
        assert_eq!(shares.kept(key(1), a, 100), vec![key(2)]);
        assert_eq!(shares.kept(key(4), a, 100), vec![key(3)]);
    }

    #[test]
    fn a_record_larger_than_the_part_is_kept_alone() {
        let shares = Shares::new(100);
        let a = ScopeHash::of(b"a");
        assert!(shares.kept(key(1), a, 50).is_empty());
        assert_eq!(shares.kept(key(2), a, 500), vec![key(1)]);
    }
}
