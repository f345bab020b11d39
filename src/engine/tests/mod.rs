//! The engine's tests: on its own, through a dialect of the tests' own (`path`), and through
//! the HTTP layer (`layer`), all on Tokio's paused clock.

mod layer;
mod path;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::key::IntentKey;
use crate::store::hints::{Hints, Sealed};
use crate::store::{
    Claim, ClaimRequest, Entry, Fence, MemoryStore, OwnerToken, Record, Store, StoreError,
    Tombstone,
};

/// The memory store, with the hooks it gives the layer, and the faults a test asks for.
#[derive(Clone, Default)]
struct TestStore {
    inner: MemoryStore,
    claims_fail: bool,
    first_write_waits: bool,
    completes: Arc<AtomicUsize>,
}

impl TestStore {
    /// Every claim fails, as a store that is down does.
    fn claims_fail(mut self) -> Self {
        self.claims_fail = true;
        self
    }

    /// The first completion waits a moment, though the store says its calls answer at once.
    fn first_write_waits(mut self) -> Self {
        self.first_write_waits = true;
        self
    }

    /// How many completions it was asked for.
    fn completes(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.completes)
    }
}

impl Store for TestStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        if self.claims_fail {
            return Err(StoreError::new("the store is down"));
        }
        self.inner.claim(key, request).await
    }
    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        let first = self.completes.fetch_add(1, Ordering::SeqCst) == 0;
        if first && self.first_write_waits {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.inner.complete(key, token, record, retention).await
    }
    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.release(key, token, tombstone, ttl).await
    }
    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.inner.extend(key, token, lease).await
    }
    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        self.inner.get(key).await
    }
    fn hints(&self, sealed: Sealed) -> Option<&dyn Hints> {
        self.inner.hints(sealed)
    }
}
