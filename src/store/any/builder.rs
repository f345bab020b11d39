//! How an [`AnyStore`] is set up before it connects: the settings of every kind of store, each
//! applied where the store named has it.

use std::time::Duration;

#[cfg(any(feature = "redis", feature = "postgres"))]
use super::redaction::redacted;
use super::url::{Backend, Location};
use super::{AnyStore, Inner};
#[cfg(feature = "postgres")]
use crate::store::PostgresStore;
#[cfg(feature = "redis")]
use crate::store::RedisStore;
use crate::store::{MemoryStore, StoreError};
#[cfg(any(feature = "redis", feature = "postgres"))]
use crate::store::{Store, TieredStore};

/// Builds an [`AnyStore`] from a URL checked by [`AnyStore::builder`] or
/// [`AnyStore::cluster_builder`]. A setting that the store named does not have is not used:
/// one configuration can set them all, whichever store it names.
///
/// ```no_run
/// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
/// use std::time::Duration;
/// use tower_idempotency::store::AnyStore;
///
/// let store = AnyStore::builder("redis://127.0.0.1:6379")?
///     .prefix("billing:")
///     .call_timeout(Duration::from_millis(500))
///     .tiered()
///     .build()
///     .await?;
/// # let _ = store;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it builds"]
pub struct AnyStoreBuilder {
    place: Location,
    #[cfg_attr(not(feature = "redis"), allow(dead_code, reason = "Redis's"))]
    prefix: Option<String>,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code, reason = "Postgres's"))]
    table: Option<String>,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code, reason = "Postgres's"))]
    pool_size: Option<usize>,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code, reason = "Postgres's"))]
    transaction_pool_size: Option<usize>,
    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres")),
        allow(dead_code, reason = "a shared store's")
    )]
    call_timeout: Option<Duration>,
    max_bytes: Option<u64>,
    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres")),
        allow(dead_code, reason = "a shared store's")
    )]
    tiered: bool,
    #[cfg_attr(
        not(any(feature = "redis", feature = "postgres")),
        allow(dead_code, reason = "a shared store's")
    )]
    local_ttl: Option<Duration>,
}

impl AnyStoreBuilder {
    pub(super) fn new(place: Location) -> Self {
        Self {
            place,
            prefix: None,
            table: None,
            pool_size: None,
            transaction_pool_size: None,
            call_timeout: None,
            max_bytes: None,
            tiered: false,
            local_ttl: None,
        }
    }

    /// Which kind of store the URL names.
    pub fn backend(&self) -> Backend {
        match &self.place {
            Location::Memory => Backend::Memory,
            #[cfg(feature = "redis")]
            Location::Redis(_) => Backend::Redis,
            #[cfg(feature = "redis")]
            Location::Cluster(_) => Backend::RedisCluster,
            #[cfg(feature = "postgres")]
            Location::Postgres(_) => Backend::Postgres,
        }
    }

    /// Redis: the prefix of every key (`RedisStoreBuilder::prefix`, default `idempotency:`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// PostgreSQL: the table of intents (`PostgresStoreBuilder::table`, default
    /// `idempotency_intents`).
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = Some(table.into());
        self
    }

    /// PostgreSQL: the connections of the store's pool (default 16).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// PostgreSQL: the connections of transactional mode's pool (default 16).
    pub fn transaction_pool_size(mut self, size: usize) -> Self {
        self.transaction_pool_size = Some(size);
        self
    }

    /// Redis and PostgreSQL: the bound on every call, connecting included (default 1 s for
    /// Redis, 2 s for PostgreSQL).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// The byte budget of what is kept in this process: the memory store's records, or the
    /// local cache's in front of a shared store ([`tiered`](Self::tiered)) (default 64 MiB).
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    /// Redis and PostgreSQL: an in-process cache of completed records in front
    /// ([`TieredStore`](crate::store::TieredStore)), so that a replay this process has seen
    /// costs no round trip: the usual way to use a shared store. The memory store needs none.
    pub fn tiered(mut self) -> Self {
        self.tiered = true;
        self
    }

    /// How long the [`tiered`](Self::tiered) cache keeps a copy (default
    /// [`DEFAULT_LOCAL_TTL`](crate::store::DEFAULT_LOCAL_TTL)); it puts the cache in front.
    pub fn local_ttl(mut self, ttl: Duration) -> Self {
        self.tiered = true;
        self.local_ttl = Some(ttl);
        self
    }

    /// Builds the store: connects to a shared one (making PostgreSQL's tables if they do not
    /// exist). An error names the store without its password.
    pub async fn build(self) -> Result<AnyStore, StoreError> {
        let inner = match &self.place {
            Location::Memory => Inner::Memory(self.memory()),
            #[cfg(feature = "redis")]
            Location::Redis(url) => {
                let store = (self.redis().connect(url).await)
                    .map_err(|error| unreachable(&format!("Redis at {url}"), &error))?;
                self.redis_inner(store)
            }
            #[cfg(feature = "redis")]
            Location::Cluster(nodes) => {
                let store = (self.redis().connect_cluster(nodes).await).map_err(|error| {
                    unreachable(&format!("the Redis Cluster at {}", nodes.join(",")), &error)
                })?;
                self.redis_inner(store)
            }
            #[cfg(feature = "postgres")]
            Location::Postgres(url) => {
                let store = (self.postgres().connect(url).await)
                    .map_err(|error| unreachable(&format!("PostgreSQL at {url}"), &error))?;
                if self.tiered {
                    Inner::TieredPostgres(self.cached(store))
                } else {
                    Inner::Postgres(store)
                }
            }
        };
        Ok(AnyStore { inner })
    }

    fn memory(&self) -> MemoryStore {
        let builder = MemoryStore::builder();
        match self.max_bytes {
            Some(bytes) => builder.max_bytes(bytes).build(),
            None => builder.build(),
        }
    }

    #[cfg(feature = "redis")]
    fn redis(&self) -> crate::store::RedisStoreBuilder {
        let mut builder = RedisStore::builder();
        if let Some(prefix) = &self.prefix {
            builder = builder.prefix(prefix.clone());
        }
        if let Some(timeout) = self.call_timeout {
            builder = builder.call_timeout(timeout);
        }
        builder
    }

    #[cfg(feature = "redis")]
    fn redis_inner(&self, store: RedisStore) -> Inner {
        if self.tiered {
            Inner::TieredRedis(self.cached(store))
        } else {
            Inner::Redis(store)
        }
    }

    #[cfg(feature = "postgres")]
    fn postgres(&self) -> crate::store::PostgresStoreBuilder {
        let mut builder = PostgresStore::builder();
        if let Some(table) = &self.table {
            builder = builder.table(table.clone());
        }
        if let Some(size) = self.pool_size {
            builder = builder.pool_size(size);
        }
        if let Some(size) = self.transaction_pool_size {
            builder = builder.transaction_pool_size(size);
        }
        if let Some(timeout) = self.call_timeout {
            builder = builder.call_timeout(timeout);
        }
        builder
    }

    /// `remote` under the local cache, sized and timed as set.
    #[cfg(any(feature = "redis", feature = "postgres"))]
    fn cached<S: Store>(&self, remote: S) -> TieredStore<S> {
        let tiered = match self.max_bytes {
            Some(bytes) => TieredStore::with_local_bytes(remote, bytes),
            None => TieredStore::new(remote),
        };
        match self.local_ttl {
            Some(ttl) => tiered.local_ttl(ttl),
            None => tiered,
        }
    }
}

/// A store that could not be reached, named without its password, and why.
#[cfg(any(feature = "redis", feature = "postgres"))]
fn unreachable(store: &str, error: &StoreError) -> StoreError {
    // The cause's own words, without the wrapper's "idempotency store error": this error has
    // its own.
    let cause =
        std::error::Error::source(error).map_or_else(|| error.to_string(), |c| c.to_string());
    StoreError::new(redacted(&format!("cannot connect to {store}: {cause}")))
}
