//! A store that answers slowly, every call near a timeout: still one execution per intent,
//! and every caller gets the result or `in_progress`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use support::{serve, tools, Client, Counts};
use tower_idempotency::key::IntentKey;
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, MemoryStore, OwnerToken, Record, Store, StoreError,
    Tombstone,
};
use tower_idempotency::IdempotencyLayer;

/// A real memory store behind a slow link: every call waits before it is made.
struct SlowStore {
    inner: MemoryStore,
    delay: Duration,
}

impl Store for SlowStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.claim(key, request).await
    }
    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.complete(key, token, record, retention).await
    }
    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.release(key, token, tombstone, ttl).await
    }
    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.extend(key, token, lease).await
    }
    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.get(key).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_store_still_runs_each_intent_once() {
    let store = SlowStore {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(150),
    };
    let layer = IdempotencyLayer::with_store(store)
        .deadline(Duration::from_millis(400))
        .lease(Duration::from_millis(300));
    let counts = Counts::default();
    let client = Client::new(serve(tools(counts.clone()).layer(layer)).await);
    let calls = (0..30).map(|i| {
        let client = client.clone();
        let body = format!(r#"{{"id":{},"delay_ms":200}}"#, i % 3);
        tokio::spawn(async move { client.post("/tools/intent", "s", &body).await })
    });
    for answer in futures_util::future::join_all(calls).await {
        let answer = answer.unwrap();
        assert!(
            answer.status == StatusCode::OK || answer.status == StatusCode::ACCEPTED,
            "{}",
            answer.status
        );
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    for id in 0..3 {
        assert_eq!(
            counts.get(&format!("intent:{id}")),
            1,
            "intent {id} ran once"
        );
    }
}
