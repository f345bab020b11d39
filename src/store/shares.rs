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
    /// Which share each kept record counts against, and its weight.
    owners: HashMap<IntentKey, (ScopeHash, u64), KeyHasher>,
}

#[derive(Default)]
struct Share {
    bytes: u64,
    /// Keys in the order they were kept; a key no longer in `owners` is skipped.
    order: VecDeque<IntentKey>,
}

impl Shares {
    pub(super) fn new(limit: u64) -> Self {
        Self {
            limit,
            state: Mutex::new(State {
                shares: HashMap::new(),
                owners: HashMap::with_hasher(KeyHasher::new()),
            }),
        }
    }

    /// Counts a kept record against `share`, and returns the share's oldest records to drop
    /// so that it stays within its part of the budget (never the record just kept).
    pub(super) fn kept(&self, key: IntentKey, share: ScopeHash, weight: u64) -> Vec<IntentKey> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { shares, owners } = &mut *state;
        if let Some((old, old_weight)) = owners.insert(key, (share, weight)) {
            if let Some(old) = shares.get_mut(&old) {
                old.bytes = old.bytes.saturating_sub(old_weight);
            }
        }
        let held = shares.entry(share).or_default();
        held.bytes += weight;
        held.order.push_back(key);
        let mut dropped = Vec::new();
        while held.bytes > self.limit {
            let Some(oldest) = held.order.pop_front() else {
                break;
            };
            if oldest == key {
                // The newest record stays: put it back and stop.
                held.order.push_front(oldest);
                break;
            }
            if let Some((owner, weight)) = owners.get(&oldest).copied() {
                if owner == share {
                    owners.remove(&oldest);
                    held.bytes = held.bytes.saturating_sub(weight);
                    dropped.push(oldest);
                }
            }
        }
        dropped
    }

    /// A record left the store (expired, evicted, replaced): it no longer counts.
    pub(super) fn left(&self, key: &IntentKey) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let State { shares, owners } = &mut *state;
        let Some((share, weight)) = owners.remove(key) else {
            return;
        };
        if let Some(held) = shares.get_mut(&share) {
            held.bytes = held.bytes.saturating_sub(weight);
            if held.bytes == 0 {
                shares.remove(&share);
            } else if held.order.len() > 2 * owners.len() + 64 {
                // Keys of records gone by other ways pile up in the order: drop them now and then.
                held.order
                    .retain(|k| owners.get(k).is_some_and(|(s, _)| *s == share));
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
    fn a_record_larger_than_the_part_is_kept_alone() {
        let shares = Shares::new(100);
        let a = ScopeHash::of(b"a");
        assert!(shares.kept(key(1), a, 50).is_empty());
        assert_eq!(shares.kept(key(2), a, 500), vec![key(1)]);
    }
}
