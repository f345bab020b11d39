//! The memory store's builder: its budget, a share's part and the minimum retention.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::seen::SeenCalls;
use super::table::Table;
use super::{
    MemoryState, MemoryStore, DEFAULT_MAX_BYTES, DEFAULT_MIN_RETENTION, DEFAULT_SHARE_DIVISOR,
};
use crate::key::KeyHasher;
use crate::telemetry::MemoryStoreMetrics;

/// Builds a [`MemoryStore`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it builds"]
pub struct MemoryStoreBuilder {
    max_bytes: u64,
    max_bytes_per_scope: Option<u64>,
    min_retention: Duration,
}

impl MemoryStoreBuilder {
    pub(super) fn new() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_bytes_per_scope: None,
            min_retention: DEFAULT_MIN_RETENTION,
        }
    }

    /// The byte budget of kept records (default 64 MiB).
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The most that one share (the principal where the layer has one, else the scope) may
    /// hold of the budget (default a quarter of it); past it, that share's own oldest records
    /// are evicted first (counted in [`MemoryStore::evictions`]).
    pub fn max_bytes_per_scope(mut self, max_bytes: u64) -> Self {
        self.max_bytes_per_scope = Some(max_bytes);
        self
    }

    /// How long a kept record is never dropped to make room for another share's (default 15
    /// minutes, the window in which agents retry; at most the record's retention). Past the
    /// budget with nothing else to drop, new intents are refused until records pass it or
    /// expire. `Duration::ZERO` lets any record go for room, least useful first.
    pub fn min_retention(mut self, min_retention: Duration) -> Self {
        self.min_retention = min_retention;
        self
    }

    /// Builds the store.
    pub fn build(self) -> MemoryStore {
        let per_share = self
            .max_bytes_per_scope
            .unwrap_or(self.max_bytes / DEFAULT_SHARE_DIVISOR);
        let table = Table::new(self.max_bytes, per_share, self.min_retention);
        MemoryStore {
            inner: Arc::new(MemoryState {
                running: Mutex::new(HashMap::with_hasher(KeyHasher::new())),
                settled: Mutex::new(table),
                evictions: AtomicU64::new(0),
                metrics: MemoryStoreMetrics::new(),
                seen: SeenCalls::new(),
            }),
        }
    }
}
