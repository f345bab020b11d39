//! Calls counted per intent for observe mode: how many times each intent came within the
//! window that its first call opened.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use moka::sync::Cache;
use tokio::time::Instant;

use crate::clock::later;
use crate::key::{IntentKey, KeyHasher};

/// How many intents' counts are kept at most; past it the least recently seen are forgotten,
/// so that a later call of one of them counts as a first (the count errs towards "no repeat").
pub(super) const COUNTED_INTENTS: u64 = 256 * 1024;

/// One intent's count and when its window ends.
struct Window {
    calls: u64,
    ends: Instant,
}

pub(super) struct SeenCalls {
    // A bounded cache of the crate's dependencies rather than a map of its own: it evicts by
    // recency without a lock over every intent.
    windows: Cache<IntentKey, Arc<Mutex<Window>>, KeyHasher>,
}

impl SeenCalls {
    pub(super) fn new(capacity: u64) -> Self {
        Self {
            windows: Cache::builder()
                .max_capacity(capacity)
                .build_with_hasher(KeyHasher::new()),
        }
    }

    /// Counts one more call of `key`: its number within the window (1 for the first).
    pub(super) fn count(&self, key: &IntentKey, window: Duration) -> u64 {
        let now = Instant::now();
        let opened = || {
            Arc::new(Mutex::new(Window {
                calls: 0,
                ends: later(now, window),
            }))
        };
        let counted = self.windows.get_with(*key, opened);
        let mut counted = counted.lock().unwrap_or_else(PoisonError::into_inner);
        if counted.ends <= now {
            *counted = Window {
                calls: 0,
                ends: later(now, window),
            };
        }
        counted.calls += 1;
        counted.calls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn calls_of_one_intent_are_counted_until_the_window_of_the_first_ends() {
        let seen = SeenCalls::new(16);
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
}
