//! A store wrapper that times every call and counts its failures.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Store, StoreError, Tombstone};
use crate::key::IntentKey;
use crate::telemetry::StoreCallMetrics;

/// The layer's view of its store: the same calls, measured.
pub(crate) struct Observed<St> {
    pub(crate) store: St,
    claim: StoreCallMetrics,
    complete: StoreCallMetrics,
    release: StoreCallMetrics,
    extend: StoreCallMetrics,
    get: StoreCallMetrics,
}

impl<St> Observed<St> {
    pub(crate) fn new(store: St) -> Self {
        Self {
            store,
            claim: StoreCallMetrics::new("claim"),
            complete: StoreCallMetrics::new("complete"),
            release: StoreCallMetrics::new("release"),
            extend: StoreCallMetrics::new("extend"),
            get: StoreCallMetrics::new("get"),
        }
    }
}

async fn measured<T>(
    metrics: &StoreCallMetrics,
    future: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = future.await;
    metrics.record(started.elapsed(), result.is_ok());
    result
}

impl<St: Store> Store for Observed<St> {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        measured(&self.claim, self.store.claim(key, request)).await
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        measured(
            &self.complete,
            self.store.complete(key, token, record, retention),
        )
        .await
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        measured(
            &self.release,
            self.store.release(key, token, tombstone, ttl),
        )
        .await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        measured(&self.extend, self.store.extend(key, token, lease)).await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        measured(&self.get, self.store.get(key)).await
    }

    fn cached(&self, key: &IntentKey) -> Option<Arc<Record>> {
        self.store.cached(key)
    }
}
