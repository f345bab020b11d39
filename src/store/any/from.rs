//! A store built by hand, erased: for a setting [`AnyStoreBuilder`](super::AnyStoreBuilder)
//! does not have (a Redis connection with a private certificate authority, a memory store's
//! per-scope part), in the same type as the stores chosen by URL.

use super::{AnyStore, Inner};
use crate::store::MemoryStore;
#[cfg(feature = "postgres")]
use crate::store::PostgresStore;
#[cfg(feature = "redis")]
use crate::store::RedisStore;
#[cfg(any(feature = "redis", feature = "postgres"))]
use crate::store::TieredStore;

impl From<MemoryStore> for AnyStore {
    fn from(store: MemoryStore) -> Self {
        Self {
            inner: Inner::Memory(store),
        }
    }
}

#[cfg(feature = "redis")]
impl From<RedisStore> for AnyStore {
    fn from(store: RedisStore) -> Self {
        Self {
            inner: Inner::Redis(store),
        }
    }
}

#[cfg(feature = "redis")]
impl From<TieredStore<RedisStore>> for AnyStore {
    fn from(store: TieredStore<RedisStore>) -> Self {
        Self {
            inner: Inner::TieredRedis(store),
        }
    }
}

#[cfg(feature = "postgres")]
impl From<PostgresStore> for AnyStore {
    fn from(store: PostgresStore) -> Self {
        Self {
            inner: Inner::Postgres(store),
        }
    }
}

#[cfg(feature = "postgres")]
impl From<TieredStore<PostgresStore>> for AnyStore {
    fn from(store: TieredStore<PostgresStore>) -> Self {
        Self {
            inner: Inner::TieredPostgres(store),
        }
    }
}
