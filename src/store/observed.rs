//! A store wrapper that times every call and counts its failures.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Store, StoreError, Tombstone};
use crate::key::IntentKey;
use crate::telemetry;

/// The layer's view of its store: the same calls, measured.
pub(crate) struct Observed<St>(pub(crate) St);

async fn measured<T>(
    call: &'static str,
    future: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let result = future.await;
    telemetry::store_call(call, started.elapsed(), result.is_ok());
    result
}

impl<St: Store> Store for Observed<St> {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        measured("claim", self.0.claim(key, request)).await
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        measured("complete", self.0.complete(key, token, record, retention)).await
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        measured("release", self.0.release(key, token, tombstone, ttl)).await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        measured("extend", self.0.extend(key, token, lease)).await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        measured("get", self.0.get(key)).await
    }

    fn cached(&self, key: &IntentKey) -> Option<Arc<Record>> {
        self.0.cached(key)
    }
}
