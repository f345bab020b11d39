//! Calls counted per intent for observe mode: how many times each intent came within the
//! window that its first call opened.
//!
//! A fixed table written by hand rather than a cache crate: observe mode counts every call, and
//! a bounded cache's insertion and upkeep for each new intent measured several microseconds a
//! call, where a slot found by the key's hash costs a lock and a compare. Two intents whose
//! keys meet in one slot take it in turn, each starting its count again: the count errs
//! towards "no repeat", never the other way.

use std::hash::BuildHasher;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::clock::{millis, now_ms};
use crate::key::{IntentKey, KeyHasher};

/// Locks, so that calls on other threads seldom wait on each other.
const SHARDS: usize = 64;
/// Slots a shard: with the shards, the windows of 262 144 intents at most.
const SLOTS: usize = 4096;

/// One intent's count: a tag of its key (0: empty), its calls, when its window ends.
#[derive(Clone, Copy, Default)]
struct Window {
    tag: u64,
    calls: u64,
    ends_ms: u64,
}

/// One lock's slots.
type Shard = Mutex<Box<[Window]>>;

pub(super) struct SeenCalls {
    /// Made at the first count: a store outside observe mode never counts, and the table
    /// weighs 6 MiB.
    shards: OnceLock<Box<[Shard]>>,
    /// Seeded per process, so that no one can aim keys at one slot.
    hasher: KeyHasher,
}

impl SeenCalls {
    pub(super) fn new() -> Self {
        Self {
            shards: OnceLock::new(),
            hasher: KeyHasher::new(),
        }
    }

    fn shards(&self) -> &[Shard] {
        self.shards.get_or_init(|| {
            let shard = || Mutex::new(vec![Window::default(); SLOTS].into_boxed_slice());
            (0..SHARDS).map(|_| shard()).collect()
        })
    }

    /// Counts one more call of `key`: its number within the window (1 for the first).
    pub(super) fn count(&self, key: &IntentKey, window: Duration) -> u64 {
        let hash = self.hasher.hash_one(key);
        let (shard, slot) = (hash as usize % SHARDS, (hash >> 32) as usize % SLOTS);
        // Another part of the digest than the hash reads, never 0.
        let bytes = key.as_bytes();
        let tag = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes")) | 1;
        let now = now_ms();
        let mut windows = self.shards()[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let counted = &mut windows[slot];
        if counted.tag == tag && counted.ends_ms > now {
            counted.calls += 1;
        } else {
            *counted = Window {
                tag,
                calls: 1,
                ends_ms: now.saturating_add(millis(window)),
            };
        }
        counted.calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn calls_of_one_intent_are_counted_until_the_window_of_the_first_ends() {
        let seen = SeenCalls::new();
        let key = IntentKey::from_bytes([1; 32]);
        let other = IntentKey::from_bytes([2; 32]);
        let window = Duration::from_secs(60);
        assert_eq!(seen.count(&key, window), 1);
        assert_eq!(seen.count(&key, window), 2);
        assert_eq!(seen.count(&other, window), 1, "another intent counts apart");
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(
            seen.count(&key, window),
            3,
            "within the first call's window"
        );
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(seen.count(&key, window), 1, "a new window once it ended");
    }

    #[test]
    fn many_intents_counted_at_once_each_keep_their_own_count() {
        let seen = SeenCalls::new();
        let window = Duration::from_secs(60);
        let keys: Vec<_> = (0..1000u32)
            .map(|n| {
                let mut bytes = [0; 32];
                bytes[..4].copy_from_slice(&n.to_le_bytes());
                bytes[8..12].copy_from_slice(&n.to_le_bytes());
                IntentKey::from_bytes(bytes)
            })
            .collect();
        for round in 1..=3 {
            let counted = keys.iter().filter(|key| seen.count(key, window) == round);
            // A few may share a slot and start again: never counted higher than they came.
            // The slots are picked by a hash seeded per process: 1 000 keys in 262 144 slots
            // meet in about two pairs, each pair costing both its keys their count; 15 pairs
            // (30 keys) come by chance less than once in a hundred million runs.
            assert!(counted.count() >= 970, "round {round}");
        }
    }
}
