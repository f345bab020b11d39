//! A store chosen at run time: one type for whichever store a URL names, so that a layer built
//! from configuration is one program whatever the configuration says.

mod builder;
mod from;
pub(super) mod redaction;
#[cfg(test)]
mod tests;
mod url;

use std::sync::Arc;
use std::time::Duration;

pub use builder::AnyStoreBuilder;
pub use url::Backend;

use super::hints::{Hints, Sealed};
#[cfg(feature = "postgres")]
use super::PostgresStore;
#[cfg(feature = "redis")]
use super::RedisStore;
#[cfg(any(feature = "redis", feature = "postgres"))]
use super::TieredStore;
use super::{
    Claim, ClaimRequest, Entry, Fence, MemoryStore, OwnerToken, Record, Scanned, Store, StoreError,
    Tombstone,
};
use crate::key::IntentKey;

/// Whichever store a URL names: the memory store, Redis, a Redis Cluster or PostgreSQL, alone
/// or under the in-process cache of [`TieredStore`](super::TieredStore).
///
/// A store is a type parameter of the layer: an application that reads its store from its
/// configuration takes this one type, and the layer takes it like any other store. Every call
/// goes to the store inside, the operator's calls (the admin API's listing, removal and
/// resolution) and the memory store's and the cache's answers without a round trip included.
///
/// [`from_url`](Self::from_url) connects with the defaults; [`builder`](Self::builder) sets a
/// Redis key prefix, timeouts, pool sizes or the local cache first. Each backend is behind its
/// feature (`redis`, `redis-tls` for `rediss://`, `postgres`): a URL whose feature is off is
/// refused, naming the feature. Every error shows the URL without its password.
///
/// ```no_run
/// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
/// use tower_idempotency::store::AnyStore;
/// use tower_idempotency::IdempotencyLayer;
///
/// let url = std::env::var("IDEMPOTENCY_STORE").unwrap_or_else(|_| "memory".to_owned());
/// let store = AnyStore::from_url(&url).await?;
/// let layer = IdempotencyLayer::new().store(store);
/// # let _ = layer;
/// # Ok(()) }
/// ```
pub struct AnyStore {
    inner: Inner,
}

/// The store inside.
enum Inner {
    Memory(MemoryStore),
    #[cfg(feature = "redis")]
    Redis(RedisStore),
    #[cfg(feature = "redis")]
    TieredRedis(TieredStore<RedisStore>),
    #[cfg(feature = "postgres")]
    Postgres(PostgresStore),
    #[cfg(feature = "postgres")]
    TieredPostgres(TieredStore<PostgresStore>),
}

/// `$body` with `$store` bound to the store inside `$inner`, whichever it is.
macro_rules! each {
    ($inner:expr, $store:ident => $body:expr) => {
        match $inner {
            Inner::Memory($store) => $body,
            #[cfg(feature = "redis")]
            Inner::Redis($store) => $body,
            #[cfg(feature = "redis")]
            Inner::TieredRedis($store) => $body,
            #[cfg(feature = "postgres")]
            Inner::Postgres($store) => $body,
            #[cfg(feature = "postgres")]
            Inner::TieredPostgres($store) => $body,
        }
    };
}

impl AnyStore {
    /// Connects to the store `url` names, with the defaults of its kind:
    ///
    /// - `memory` (or `memory://`): a [`MemoryStore`] of 64 MiB;
    /// - `redis://HOST:PORT`, `rediss://HOST:PORT` (TLS): a `RedisStore` on one server
    ///   (feature `redis`);
    /// - a Redis Cluster: `redis+cluster://10.0.0.1:7000,10.0.0.2:7000`, or its nodes' URLs
    ///   separated by commas (`redis://10.0.0.1:7000,redis://10.0.0.2:7000`), or
    ///   [`AnyStore::cluster_builder`] for a cluster reached through one node;
    /// - `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (or `postgresql://`): a
    ///   `PostgresStore` (feature `postgres`), which makes its table if it does not exist.
    ///
    /// An error says why, with the URL shown without its password: a URL that names no store,
    /// one whose feature this build lacks, a store that cannot be reached.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
    /// use tower_idempotency::store::AnyStore;
    ///
    /// let store = AnyStore::from_url("redis://127.0.0.1:6379").await?;
    /// # let _ = store;
    /// # Ok(()) }
    /// ```
    pub async fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::builder(url)?.build().await
    }

    /// A builder for the store `url` names (as [`from_url`](Self::from_url) reads it): the
    /// URL is checked now, the store connected by [`AnyStoreBuilder::build`].
    pub fn builder(url: &str) -> Result<AnyStoreBuilder, StoreError> {
        url::place(url).map(AnyStoreBuilder::new)
    }

    /// A builder for a Redis Cluster reached through any of `nodes`, each a `redis://` or
    /// `rediss://` URL: one node is enough, the client learns the others from it.
    pub fn cluster_builder<U: AsRef<str>>(nodes: &[U]) -> Result<AnyStoreBuilder, StoreError> {
        url::cluster(nodes).map(AnyStoreBuilder::new)
    }

    /// Which kind of store is inside.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            Inner::Memory(_) => Backend::Memory,
            #[cfg(feature = "redis")]
            Inner::Redis(store) => redis_backend(store),
            #[cfg(feature = "redis")]
            Inner::TieredRedis(store) => redis_backend(store.remote()),
            #[cfg(feature = "postgres")]
            Inner::Postgres(_) | Inner::TieredPostgres(_) => Backend::Postgres,
        }
    }

    /// Whether the in-process cache of [`TieredStore`](super::TieredStore) is in front.
    pub fn is_tiered(&self) -> bool {
        match &self.inner {
            #[cfg(feature = "redis")]
            Inner::TieredRedis(_) => true,
            #[cfg(feature = "postgres")]
            Inner::TieredPostgres(_) => true,
            _ => false,
        }
    }

    /// The memory store inside, if it is one: for its eviction counts and size.
    pub fn memory(&self) -> Option<&MemoryStore> {
        match &self.inner {
            Inner::Memory(store) => Some(store),
            #[allow(
                unreachable_patterns,
                reason = "the only variant without a shared store"
            )]
            _ => None,
        }
    }

    /// The Postgres store inside, if it is one, under the cache or not: transactional mode's.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(&self) -> Option<&PostgresStore> {
        match &self.inner {
            Inner::Postgres(store) => Some(store),
            Inner::TieredPostgres(store) => Some(store.remote()),
            _ => None,
        }
    }
}

#[cfg(feature = "redis")]
fn redis_backend(store: &RedisStore) -> Backend {
    if store.is_cluster() {
        Backend::RedisCluster
    } else {
        Backend::Redis
    }
}

impl std::fmt::Debug for AnyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        each!(&self.inner, store => f.debug_tuple("AnyStore").field(store).finish())
    }
}

impl Store for AnyStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        each!(&self.inner, store => store.claim(key, request).await)
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        each!(&self.inner, store => store.complete(key, token, record, retention).await)
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        each!(&self.inner, store => store.release(key, token, tombstone, ttl).await)
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        each!(&self.inner, store => store.extend(key, token, lease).await)
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        each!(&self.inner, store => store.abandon(key, token).await)
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        each!(&self.inner, store => store.get(key).await)
    }

    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        each!(&self.inner, store => store.count_call(key, window).await)
    }

    async fn scan(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        each!(&self.inner, store => store.scan(cursor, count).await)
    }

    async fn remove(&self, key: &IntentKey) -> Result<bool, StoreError> {
        each!(&self.inner, store => store.remove(key).await)
    }

    async fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        each!(&self.inner, store => store.put(key, record, retention).await)
    }

    /// The store inside's: the memory store answers at once, and a cache's records are
    /// replayed without a round trip, as they are without the erasure.
    fn hints(&self, sealed: Sealed) -> Option<&dyn Hints> {
        each!(&self.inner, store => store.hints(sealed))
    }
}
