//! An in-process cache of completed records in front of a shared store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::policy::{EvictionPolicy, Expiry};
use moka::sync::Cache;

use super::hints::{Hints, Sealed};
use super::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Scanned, Store, StoreError, Tombstone,
};
use crate::clock::now_ms;
use crate::key::{IntentKey, KeyHasher};

/// Default byte budget of the local cache: 64 MiB.
const DEFAULT_LOCAL_BYTES: u64 = 64 * 1024 * 1024;

/// How long a local copy lasts by default: short enough that an operator's release or purge
/// in the shared store reaches every instance within a second, long enough to spare the round
/// trips of a burst of repeats.
pub const DEFAULT_LOCAL_TTL: Duration = Duration::from_millis(500);

/// A shared store with the completed records this process has seen cached in front of it.
///
/// Completed records never change but by an operator's hand, so a local copy is exact until an
/// operator releases or purges the record: it is kept [`DEFAULT_LOCAL_TTL`] (half a second) at
/// most, or its record's retention if that is shorter, so that an operator's act reaches every
/// instance within a second ([`local_ttl`](Self::local_ttl) sets it). Round trips to the
/// shared store: a first execution 2 (claim, complete), a replay of another process's record 1,
/// a replay this process has seen within the local lifetime 0.
/// Duplicates of an execution running in this process never reach the store at all: the layer
/// coalesces them.
pub struct TieredStore<S> {
    remote: S,
    local: Cache<IntentKey, Arc<Record>, KeyHasher>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for TieredStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TieredStore")
            .field("remote", &self.remote)
            .field("local_records", &self.local.entry_count())
            .finish()
    }
}

/// A local copy lasts until its record expires, or `longest`, whichever is first.
struct UntilExpiry {
    longest: Duration,
}

impl Expiry<IntentKey, Arc<Record>> for UntilExpiry {
    fn expire_after_create(
        &self,
        _: &IntentKey,
        record: &Arc<Record>,
        _: Instant,
    ) -> Option<Duration> {
        let left = Duration::from_millis(record.expires_at_ms.saturating_sub(now_ms()));
        Some(left.min(self.longest))
    }
}

impl<S: Store> TieredStore<S> {
    /// Caches up to 64 MiB of records in front of `remote`.
    pub fn new(remote: S) -> Self {
        Self::with_local_bytes(remote, DEFAULT_LOCAL_BYTES)
    }

    /// Caches up to `bytes` of records in front of `remote`.
    pub fn with_local_bytes(remote: S, bytes: u64) -> Self {
        Self::build(remote, bytes, DEFAULT_LOCAL_TTL)
    }

    /// Keeps a local copy for `ttl` at most (by default [`DEFAULT_LOCAL_TTL`]): an operator's
    /// release or purge of a record in the shared store (the admin operations) reaches this
    /// process's replays within `ttl`, at the price of a round trip per record and `ttl`.
    pub fn local_ttl(self, ttl: Duration) -> Self {
        let bytes = self
            .local
            .policy()
            .max_capacity()
            .unwrap_or(DEFAULT_LOCAL_BYTES);
        Self::build(self.remote, bytes, ttl)
    }

    fn build(remote: S, bytes: u64, longest: Duration) -> Self {
        let local = Cache::builder()
            .max_capacity(bytes)
            .eviction_policy(EvictionPolicy::lru())
            .weigher(|_: &IntentKey, record: &Arc<Record>| -> u32 {
                u32::try_from(record.weight() + 32).unwrap_or(u32::MAX)
            })
            .expire_after(UntilExpiry { longest })
            .build_with_hasher(KeyHasher::new());
        Self { remote, local }
    }

    /// The shared store behind the cache.
    pub fn remote(&self) -> &S {
        &self.remote
    }

    fn remember(&self, key: &IntentKey, record: &Arc<Record>) {
        if record.expires_at_ms > now_ms() {
            self.local.insert(*key, Arc::clone(record));
        }
    }
}

impl<S: Store> Store for TieredStore<S> {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        if let Some(record) = self.local.get(key) {
            return Ok(Claim::Completed(record));
        }
        let claim = self.remote.claim(key, request).await?;
        if let Claim::Completed(record) = &claim {
            self.remember(key, record);
        }
        Ok(claim)
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        let fence = self
            .remote
            .complete(key, token, Arc::clone(&record), retention)
            .await?;
        if fence == Fence::Held {
            self.remember(key, &record);
        }
        Ok(fence)
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.remote.release(key, token, tombstone, ttl).await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.remote.extend(key, token, lease).await
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        self.remote.abandon(key, token).await
    }

    /// Counted in the shared store alone: a count is only true across instances there.
    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        self.remote.count_call(key, window).await
    }

    fn hints(&self, _sealed: Sealed) -> Option<&dyn Hints> {
        Some(self)
    }

    /// What the shared store holds: the cache holds only copies of it.
    async fn scan(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        self.remote.scan(cursor, count).await
    }

    /// Removed from the shared store and from this process's cache. Other processes' caches
    /// keep their copy of a completed record until it expires there.
    async fn remove(&self, key: &IntentKey) -> Result<bool, StoreError> {
        // After the shared store's answer: a read meanwhile could have cached the old record.
        let removed = self.remote.remove(key).await;
        self.local.invalidate(key);
        removed
    }

    async fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        let written = self.remote.put(key, record, retention).await;
        self.local.invalidate(key);
        written
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        if let Some(record) = self.local.get(key) {
            return Ok(Some(Entry::Completed(record)));
        }
        let entry = self.remote.get(key).await?;
        if let Some(Entry::Completed(record)) = &entry {
            self.remember(key, record);
        }
        Ok(entry)
    }
}

impl<S: Store> Hints for TieredStore<S> {
    fn cached(&self, key: &IntentKey) -> Option<Arc<Record>> {
        self.local.get(key)
    }
}
