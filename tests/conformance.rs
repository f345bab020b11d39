//! The store conformance suite: every store this crate ships passes it, and a store that breaks
//! fencing or expiry fails it, each for its own reason.
#![cfg(feature = "conformance")]

#[cfg(feature = "redis")]
mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower_idempotency::key::IntentKey;
use tower_idempotency::store::conformance::{self, Violation};
use tower_idempotency::store::{
    Claim, ClaimRequest, Entry, Fence, MemoryStore, OwnerToken, Record, Store, StoreError,
    TieredStore, Tombstone,
};

#[cfg(feature = "redis")]
use support::redis_server::{RedisCluster, RedisServer};
#[cfg(feature = "redis")]
use tower_idempotency::store::RedisStore;

/// The checks a store without fencing must fail and a store without expiry must pass.
const FENCING: [&str; 6] = [
    "complete_under_a_wrong_token_is_fenced",
    "release_under_a_wrong_token_is_fenced",
    "extend_under_a_wrong_token_is_fenced",
    "abandon_under_a_wrong_token_is_fenced",
    "a_released_intent_fences_its_old_owner",
    "a_lapsed_owner_is_fenced",
];

/// The checks a store without expiry must fail and a store without fencing must pass.
const EXPIRY: [&str; 4] = [
    "a_lease_that_is_not_extended_lapses",
    "a_record_expires_after_its_retention",
    "a_tombstone_expires_after_its_ttl",
    "calls_are_counted_per_intent_within_the_first_calls_window",
];

fn failed_checks(violations: &[Violation]) -> HashSet<&'static str> {
    violations.iter().map(|v| v.check).collect()
}

#[tokio::test]
async fn the_memory_store_conforms() {
    conformance::assert_conforms(&MemoryStore::new()).await;
}

#[tokio::test]
async fn the_tiered_store_over_memory_conforms() {
    conformance::assert_conforms(&TieredStore::new(MemoryStore::new())).await;
}

#[tokio::test]
async fn one_store_runs_the_suite_twice_at_once() {
    let store = MemoryStore::new();
    let (first, second) = tokio::join!(conformance::check(&store), conformance::check(&store));
    assert!(first.is_ok(), "{first:#?}");
    assert!(second.is_ok(), "{second:#?}");
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_store_conforms() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    conformance::assert_conforms(&store).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_store_conforms() {
    let cluster = RedisCluster::start();
    let store = RedisStore::connect_cluster(&cluster.urls()).await.unwrap();
    conformance::assert_conforms(&store).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_redis_store_conforms() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url()).await.unwrap().tiered();
    conformance::assert_conforms(&store).await;
}

#[cfg(feature = "postgres")]
mod postgres {
    use tower_idempotency::store::{conformance, PostgresStore, TieredStore};

    use crate::support::postgres_server::PostgresServer;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_postgres_store_conforms_alone_and_under_the_tiered_cache() {
        let server = PostgresServer::start();
        let store = PostgresStore::connect(&server.url())
            .await
            .expect("the test's postgres");
        conformance::assert_conforms(&store).await;
        conformance::assert_conforms(&TieredStore::new(store)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_postgres_stores_on_one_table_make_the_tables_once_and_share_intents() {
        let server = PostgresServer::start();
        let url = server.url();
        let (one, two) = tokio::join!(PostgresStore::connect(&url), PostgresStore::connect(&url));
        let (one, two) = (one.expect("the first"), two.expect("the second at once"));
        let key = tower_idempotency::key::IntentKey::from_bytes([7; 32]);
        let window = std::time::Duration::from_secs(60);
        use tower_idempotency::store::Store;
        assert_eq!(one.count_call(&key, window).await.unwrap(), 1);
        assert_eq!(two.count_call(&key, window).await.unwrap(), 2);
        conformance::assert_conforms(&two).await;
    }
}

/// Every store a URL names, chosen at run time, conforms as it does by its own type.
mod any_store {
    use tower_idempotency::store::{conformance, AnyStore, Backend};

    #[tokio::test]
    async fn memory_by_url_conforms() {
        let store = AnyStore::from_url("memory").await.unwrap();
        assert_eq!(store.backend(), Backend::Memory);
        conformance::assert_conforms(&store).await;
    }

    #[cfg(feature = "redis")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_by_url_conforms_alone_and_under_the_tiered_cache() {
        let server = crate::support::redis_server::RedisServer::start();
        let store = AnyStore::from_url(&server.url()).await.unwrap();
        assert_eq!(store.backend(), Backend::Redis);
        conformance::assert_conforms(&store).await;
        let builder = AnyStore::builder(&server.url()).unwrap().prefix("tiered:");
        let tiered = builder.tiered().build().await.unwrap();
        assert!(tiered.is_tiered());
        conformance::assert_conforms(&tiered).await;
    }

    #[cfg(feature = "redis")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_redis_cluster_of_three_by_its_nodes_urls_conforms() {
        let cluster = crate::support::redis_server::RedisCluster::start();
        let nodes = cluster.urls();
        assert_eq!(nodes.len(), 3);
        let store = AnyStore::from_url(&nodes.join(",")).await.unwrap();
        assert_eq!(store.backend(), Backend::RedisCluster);
        conformance::assert_conforms(&store).await;
        // One URL for all three: `redis+cluster://` with their hosts.
        let hosts: Vec<&str> = nodes.iter().map(|node| &node["redis://".len()..]).collect();
        let url = format!("redis+cluster://{}", hosts.join(","));
        let store = AnyStore::from_url(&url).await.unwrap();
        assert_eq!(store.backend(), Backend::RedisCluster);
        conformance::assert_conforms(&store).await;
        // Through one node, the client learns the others.
        let one = AnyStore::cluster_builder(&nodes[..1]).unwrap();
        let store = one.build().await.unwrap();
        assert_eq!(store.backend(), Backend::RedisCluster);
        conformance::assert_conforms(&store).await;
    }

    #[cfg(feature = "postgres")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_by_url_conforms_alone_and_under_the_tiered_cache() {
        let server = crate::support::postgres_server::PostgresServer::start();
        let store = AnyStore::from_url(&server.url()).await.unwrap();
        assert_eq!(store.backend(), Backend::Postgres);
        conformance::assert_conforms(&store).await;
        let postgresql = server.url().replacen("postgres://", "postgresql://", 1);
        let builder = AnyStore::builder(&postgresql)
            .unwrap()
            .table("any_store_intents");
        let tiered = builder.pool_size(4).tiered().build().await.unwrap();
        conformance::assert_conforms(&tiered).await;
    }
}

#[tokio::test]
async fn a_store_that_does_not_fence_fails_the_suite() {
    let violations = conformance::check(&NoFence::new())
        .await
        .expect_err("a store that ignores owner tokens passed");
    let failed = failed_checks(&violations);
    for check in FENCING {
        assert!(failed.contains(check), "{check} passed: {violations:#?}");
    }
    for check in EXPIRY {
        assert!(!failed.contains(check), "{check} failed: {violations:#?}");
    }
    for violation in &violations {
        assert!(violation.to_string().starts_with(violation.check));
    }
}

#[tokio::test]
async fn a_store_that_ignores_expiry_fails_the_suite() {
    let violations = conformance::check(&NoExpiry(MemoryStore::new()))
        .await
        .expect_err("a store whose leases, records and tombstones never expire passed");
    let failed = failed_checks(&violations);
    for check in EXPIRY {
        assert!(failed.contains(check), "{check} passed: {violations:#?}");
    }
    for check in FENCING {
        assert!(!failed.contains(check), "{check} failed: {violations:#?}");
    }
}

/// Writes under the token that last acquired the intent, whatever token the caller shows.
struct NoFence {
    inner: MemoryStore,
    owners: Mutex<HashMap<IntentKey, OwnerToken>>,
}

impl NoFence {
    fn new() -> Self {
        Self {
            inner: MemoryStore::new(),
            owners: Mutex::default(),
        }
    }

    /// The intent's latest owner, in place of the caller.
    fn owner(&self, key: &IntentKey, token: &OwnerToken) -> OwnerToken {
        let owners = self.owners.lock().unwrap();
        owners.get(key).copied().unwrap_or(*token)
    }
}

impl Store for NoFence {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let claim = self.inner.claim(key, request).await?;
        if let Claim::Acquired(token) | Claim::AcquiredAfterFailure(token, _) = &claim {
            self.owners.lock().unwrap().insert(*key, *token);
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
        let owner = self.owner(key, token);
        self.inner.complete(key, &owner, record, retention).await
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let owner = self.owner(key, token);
        self.inner.release(key, &owner, tombstone, ttl).await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let owner = self.owner(key, token);
        self.inner.extend(key, &owner, lease).await
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        let owner = self.owner(key, token);
        self.inner.abandon(key, &owner).await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        self.inner.get(key).await
    }
}

/// Keeps every lease, record, tombstone and call count a thousand times longer than asked.
struct NoExpiry(MemoryStore);

const STRETCH: u32 = 1000;

impl Store for NoExpiry {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let mut stretched = request.clone();
        stretched.lease *= STRETCH;
        self.0.claim(key, &stretched).await
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        self.0
            .complete(key, token, record, retention * STRETCH)
            .await
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        self.0.release(key, token, tombstone, ttl * STRETCH).await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        self.0.extend(key, token, lease * STRETCH).await
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        self.0.abandon(key, token).await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        self.0.get(key).await
    }

    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        self.0.count_call(key, window * STRETCH).await
    }
}
