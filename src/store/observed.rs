//! A store wrapper that times every call, bounds it by the layer's store timeout, turns a
//! panic in a custom store into an error, and counts failures.
//!
//! One store is shared by every layer built from one builder; each layer's own view carries
//! its own timeout, so a setting on one layer never changes another's.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt;

use super::{Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, Store, StoreError, Tombstone};
use crate::key::IntentKey;
use crate::telemetry::{Stopwatch, StoreCallMetrics, StoreFull};

/// The metric handles of every kind of store call, registered once per store.
pub(crate) struct StoreMetrics {
    claim: StoreCallMetrics,
    complete: StoreCallMetrics,
    release: StoreCallMetrics,
    extend: StoreCallMetrics,
    abandon: StoreCallMetrics,
    get: StoreCallMetrics,
    count_call: StoreCallMetrics,
    /// Claims refused because the store was full.
    full: StoreFull,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        Self {
            claim: StoreCallMetrics::new("claim"),
            complete: StoreCallMetrics::new("complete"),
            release: StoreCallMetrics::new("release"),
            extend: StoreCallMetrics::new("extend"),
            abandon: StoreCallMetrics::new("abandon"),
            get: StoreCallMetrics::new("get"),
            count_call: StoreCallMetrics::new("count_call"),
            full: StoreFull::new(),
        }
    }
}

/// A layer's view of its store: the same calls, measured and bounded by its timeout.
pub(crate) struct ObservedStore<St> {
    store: Arc<St>,
    metrics: Arc<StoreMetrics>,
    /// How long one call may take before it counts as failed.
    timeout: Duration,
}

impl<St> ObservedStore<St> {
    pub(crate) fn new(store: Arc<St>, metrics: Arc<StoreMetrics>, timeout: Duration) -> Self {
        Self {
            store,
            metrics,
            timeout,
        }
    }

    /// Runs one store call: timed, bounded, and with a panic turned into an error, so that a
    /// hanging or broken custom store can neither hold a caller past its deadline nor take the
    /// request down with it.
    async fn measured<T>(
        &self,
        metrics: &StoreCallMetrics,
        future: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Stopwatch::start();
        let timeout = self.timeout;
        let mut call = std::pin::pin!(AssertUnwindSafe(future).catch_unwind());
        // A store that answers at its first poll (the memory store always does) needs no
        // timer: one is armed only for a call that waits.
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        let answered = match first {
            Poll::Ready(answered) => Ok(answered),
            // Boxed: the timer would make every store call's future larger.
            Poll::Pending => {
                let bounded = Box::pin(tokio::time::timeout(timeout, call));
                bounded.await
            }
        };
        let result = match answered {
            Ok(Ok(result)) => result,
            Ok(Err(_panic)) => Err(StoreError::new("the store panicked")),
            Err(_) => Err(StoreError::new(format!(
                "the store did not answer within {timeout:?}"
            ))),
        };
        // A store that is full answered: its refusal is not a failure of the call.
        let answered = result.as_ref().map_or_else(StoreError::is_full, |_| true);
        metrics.record(started.elapsed(), answered);
        result
    }
}

impl<St: Store> Store for ObservedStore<St> {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let claimed = self
            .measured(&self.metrics.claim, self.store.claim(key, request))
            .await;
        if let Some(full) = claimed.as_ref().err().filter(|error| error.is_full()) {
            self.metrics.full.refused(full);
        }
        claimed
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        self.measured(
            &self.metrics.complete,
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
        self.measured(
            &self.metrics.release,
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
        self.measured(&self.metrics.extend, self.store.extend(key, token, lease))
            .await
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        self.measured(&self.metrics.abandon, self.store.abandon(key, token))
            .await
    }

    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        self.measured(&self.metrics.count_call, self.store.count_call(key, window))
            .await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        self.measured(&self.metrics.get, self.store.get(key)).await
    }

    fn hints(&self, sealed: super::hints::Sealed) -> Option<&dyn super::hints::Hints> {
        self.store.hints(sealed)
    }
}
