//! The embedded store: a byte-bounded table for settled intents, a plain map for running ones.

mod builder;
mod kept;
mod operator;
mod revert;
mod seen;
mod table;

use std::collections::{hash_map, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

// Leases and retention run on the layer's clock (Tokio's), so that a test that pauses time can
// let them lapse.
use tokio::time::Instant as LeaseClock;

pub use self::builder::MemoryStoreBuilder;
use self::kept::CachedRecord;
use self::seen::SeenCalls;
use self::table::{Cause, Table};
use super::hints::{Hints, Sealed};
use super::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, RunningInfo, Scanned, Store, StoreError,
    Tombstone,
};
use crate::clock::later;
use crate::key::{IntentKey, KeyHasher, ScopeHash};
use crate::telemetry::MemoryStoreMetrics;

/// Default byte budget of the settled-record cache: 64 MiB.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// By default one share (a principal, else a scope) holds at most this part of the budget.
const DEFAULT_SHARE_DIVISOR: u64 = 4;
/// By default a kept record is never dropped for another share for 15 minutes: the window in
/// which agents retry.
pub(crate) const DEFAULT_MIN_RETENTION: Duration = Duration::from_secs(15 * 60);

/// An in-process store: no server, one process.
///
/// Completed records and failure tombstones live in a table weighed in bytes, each with its
/// own expiry. Running executions live in a map that is never evicted.
///
/// One share (the principal where the layer has one, else the scope) holds at most a part of
/// the budget, a quarter by default ([`MemoryStoreBuilder::max_bytes_per_scope`]): a caller
/// that floods new intents, or calls that fail, evicts its own oldest records first.
///
/// When the whole budget is full, failure records go first (a repeat runs again whether they
/// are kept or not), then the largest share's oldest records. A kept record younger than
/// [`MemoryStoreBuilder::min_retention`] (15 minutes by default) is never dropped for another
/// share, however many new callers come: where the client chooses its scope (the default
/// `x-session-id`), a flood of new sessions would otherwise push out every other caller's
/// records. When nothing may be dropped, a new intent is refused at its claim
/// ([`StoreError::is_full`]): the layer answers 503, nothing executed, as Redis with
/// `noeviction` does. An outcome that arrives while the store is full is still kept (its
/// action ran: without its record a repeat would run it again), so the budget may be
/// overshot by the records of what was running when it filled up, no more. Evicting an
/// unexpired kept record is counted ([`MemoryStore::evictions`]) and logged: it means the
/// budget is too small.
///
/// Clones share the same state.
///
/// ```
/// use tower_idempotency::store::MemoryStore;
///
/// let store = MemoryStore::builder().max_bytes(16 * 1024 * 1024).build();
/// assert_eq!(store.evictions(), 0);
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<MemoryState>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("kept_bytes", &self.weighted_size())
            .field("evictions", &self.evictions())
            .finish_non_exhaustive()
    }
}

struct MemoryState {
    running: Mutex<HashMap<IntentKey, Lease, KeyHasher>>,
    settled: Mutex<Table>,
    evictions: AtomicU64,
    metrics: MemoryStoreMetrics,
    /// Calls counted per intent, for observe mode.
    seen: SeenCalls,
}

struct Lease {
    token: OwnerToken,
    expires: LeaseClock,
    info: RunningInfo,
    share: ScopeHash,
}

enum Closing {
    Completed(CachedRecord),
    Failed(Arc<Tombstone>),
}

/// What the table charges for a tombstone, its key included.
const TOMBSTONE_WEIGHT: u32 = 400 + 32;

/// What the table charges for a record, its key included.
fn record_weight(record: &Record) -> u32 {
    u32::try_from(record.weight() + 32).unwrap_or(u32::MAX)
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store with the default 64 MiB budget.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Starts a builder.
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder::new()
    }

    /// How many unexpired completed records were evicted for room: their own share's, past its
    /// part, or past `min_retention` for the whole budget.
    pub fn evictions(&self) -> u64 {
        self.inner.evictions.load(Ordering::Relaxed)
    }

    /// Bytes currently charged to kept records and tombstones.
    pub fn weighted_size(&self) -> u64 {
        self.settled_table().bytes()
    }

    /// Executions that hold a lease right now.
    pub fn running(&self) -> usize {
        self.running_map().len()
    }

    fn running_map(&self) -> MutexGuard<'_, HashMap<IntentKey, Lease, KeyHasher>> {
        // A panic while holding the lock leaves the map consistent: every update is one call.
        self.inner
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn settled_table(&self) -> MutexGuard<'_, Table> {
        self.inner.settled.lock().unwrap_or_else(|poisoned| {
            // A panic halfway through relinking may have left the lists inconsistent: the
            // table starts afresh, and a repeat of what it held may run again.
            tracing::error!(
                "the memory store's table was left mid-update by a panic; it is emptied"
            );
            let mut table = poisoned.into_inner();
            table.clear();
            self.inner.settled.clear_poison();
            table
        })
    }

    /// What the table holds for `key`; the clock is read only if it holds something.
    fn settled_entry(&self, key: &IntentKey, now: impl FnOnce() -> LeaseClock) -> Option<Entry> {
        let mut table = self.settled_table();
        table.get(key, now).map(|settled| match settled {
            Closing::Completed(kept) => Entry::Completed(kept.record()),
            Closing::Failed(tombstone) => Entry::Failed(Arc::clone(tombstone)),
        })
    }

    /// Runs `write` on the lease if `token` holds `key`, under the lock that makes claims
    /// atomic.
    fn fenced(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        write: impl FnOnce(hash_map::OccupiedEntry<'_, IntentKey, Lease>),
    ) -> Fence {
        let mut running = self.running_map();
        match running.entry(*key) {
            hash_map::Entry::Occupied(held) if held.get().token == *token => {
                write(held);
                Fence::Held
            }
            _ => Fence::Lost,
        }
    }
}

impl MemoryStore {
    /// Ends `token`'s lease with an outcome: the lease is taken and the outcome kept under the
    /// claim lock, so no claim ever sees neither. A kept record counts against its share, and
    /// the table evicts what its share or the budget has no room for; the evictions are
    /// counted and logged outside the locks.
    fn settle(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        outcome: Closing,
        weight: u32,
        ttl: Duration,
    ) -> Fence {
        let mut evicted = table::Evictions::new();
        let mut kept_bytes = None;
        let fence = self.fenced(key, token, |held| {
            // Its share is read from the lease taken.
            let lease = held.remove();
            // Tombstones count too: a caller whose calls all fail must not fill the budget at
            // the others' expense.
            let mut table = self.settled_table();
            evicted = table.insert(*key, outcome, weight, lease.share, ttl, LeaseClock::now());
            kept_bytes = Some(table.bytes());
        });
        if let Some(bytes) = kept_bytes {
            self.inner.metrics.kept(bytes);
        }
        // Counted and logged outside the locks; what is dropped here is only let go.
        for gone in evicted {
            let Closing::Completed(..) = gone.value else {
                continue;
            };
            let count = self.inner.evictions.fetch_add(1, Ordering::Relaxed) + 1;
            let metrics = &self.inner.metrics;
            let warning = match gone.cause {
                Cause::Budget => {
                    metrics.evicted_over_budget();
                    "unexpired idempotency records were evicted: the memory store's byte budget \
                     is too small, and a repeat of these calls would run again"
                }
                Cause::Share => {
                    metrics.evicted_over_share();
                    "one scope went past its part of the memory store's budget: its own oldest \
                     records were evicted, and a repeat of those calls would run again"
                }
            };
            // Logged at the 1st, 2nd, 4th, 8th... eviction: loud, never a flood.
            if count.is_power_of_two() {
                tracing::warn!(intent = %gone.key.short(), evicted = count, "{warning}");
            }
        }
        fence
    }
}

impl Store for MemoryStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let now = LeaseClock::now();
        let mut running = self.running_map();
        // One lookup in the map, whichever way the claim goes.
        let held = running.entry(*key);
        if let hash_map::Entry::Occupied(lease) = &held {
            let lease = lease.get();
            if lease.expires > now && lease.token != request.token {
                return Ok(Claim::Running(lease.info));
            }
        }
        let mut table = self.settled_table();
        let failed = match table.get(key, || now) {
            Some(Closing::Completed(kept)) => {
                let record = kept.record();
                drop(table);
                if let hash_map::Entry::Occupied(lapsed) = held {
                    lapsed.remove();
                }
                return Ok(Claim::Completed(record));
            }
            Some(Closing::Failed(tombstone)) => Some(Arc::clone(tombstone)),
            None => None,
        };
        // A claim repeated under the token that holds the lease (its first answer was lost)
        // was let in already.
        let repeated =
            matches!(&held, hash_map::Entry::Occupied(lease) if lease.get().token == request.token);
        if !repeated && !table.has_room(request.share, now) {
            return Err(StoreError::full(
                "the memory store's byte budget is full of records it keeps for their \
                 `min_retention`",
            ));
        }
        drop(table);
        let token = request.token;
        let lease = Lease {
            token,
            expires: later(now, request.lease),
            info: RunningInfo {
                started_at_ms: request.started_at_ms,
                scope: request.scope,
                fingerprint: request.fingerprint,
            },
            share: request.share,
        };
        // Over a lapsed lease or into a free place alike.
        held.insert_entry(lease);
        Ok(match failed {
            Some(tombstone) => Claim::AcquiredAfterFailure(token, tombstone),
            None => Claim::Acquired(token),
        })
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        #[cfg(tower_idempotency_revert)]
        self.revert_fencing(key, token);
        // Encoded here, and the record as built let go while it is still in cache.
        let (settled, weight) = (
            Closing::Completed(CachedRecord::new(&record)),
            record_weight(&record),
        );
        drop(record);
        Ok(self.settle(key, token, settled, weight, retention))
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let settled = Closing::Failed(tombstone);
        Ok(self.settle(key, token, settled, TOMBSTONE_WEIGHT, ttl))
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        Ok(self.fenced(key, token, |mut held| {
            held.get_mut().expires = later(LeaseClock::now(), lease);
        }))
    }

    fn hints(&self, _sealed: Sealed) -> Option<&dyn Hints> {
        Some(self)
    }

    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        Ok(self.inner.seen.count(key, window))
    }

    async fn scan(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        Ok(self.scan_page(cursor, count))
    }

    async fn remove(&self, key: &IntentKey) -> Result<bool, StoreError> {
        Ok(self.remove_entry(key))
    }

    async fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        Ok(self.put_record(key, &record, retention))
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        let now = LeaseClock::now();
        {
            let running = self.running_map();
            if let Some(lease) = running.get(key) {
                if lease.expires > now {
                    return Ok(Some(Entry::Running(lease.info)));
                }
            }
        }
        Ok(self.settled_entry(key, || now))
    }
}

impl Hints for MemoryStore {
    fn answers_at_once(&self) -> bool {
        true
    }

    fn cached(&self, key: &IntentKey) -> Option<Arc<Record>> {
        match self.settled_entry(key, LeaseClock::now)? {
            Entry::Completed(record) => Some(record),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
