//! A store on Redis or Redis Cluster, shared by every gateway instance.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::Script;

use super::codec::{self, StoredValue};
use super::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, RunningInfo, Scanned, Store, StoreError,
    Tombstone,
};
use crate::key::IntentKey;

mod builder;
mod connection;
mod operator;
mod scripts;

pub use builder::RedisStoreBuilder;

use connection::Connection;

/// Default timeout of every Redis call.
const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Default prefix of every key.
const DEFAULT_PREFIX: &str = "idempotency:";

/// The token and encoded running entry of a lease this process holds.
type OwnedLease = (OwnerToken, Vec<u8>);

/// Intents in Redis: one key per intent, one round trip per operation, every write fenced by
/// the owner token in a Lua script.
///
/// Each intent is one key, `{prefix}{<intent hex>}`: the braces make the intent its own hash
/// tag, so the store works unchanged on a cluster. Values use a versioned binary encoding. A
/// running execution's key expires with its lease; a completed one with its retention.
///
/// Use it behind a [`TieredStore`](super::TieredStore) (see [`RedisStore::tiered`]), which
/// answers replays in the same process without a round trip.
///
/// ```no_run
/// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
/// use tower_idempotency::store::RedisStore;
/// use tower_idempotency::IdempotencyLayer;
///
/// let store = RedisStore::connect("redis://127.0.0.1:6379").await?.tiered();
/// let layer = IdempotencyLayer::with_store(store);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    connection: Connection,
    prefix: Arc<str>,
    call_timeout: Duration,
    /// Running entries this process owns, to restore one that a Redis restart lost.
    owned: Arc<Mutex<HashMap<IntentKey, OwnedLease>>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

/// Runs a Redis call under the timeout, mapping both failures to a store error.
async fn timed<T>(
    limit: Duration,
    call: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(limit, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(StoreError::new(error)),
        Err(_) => Err(StoreError::new(format!(
            "redis call timed out after {limit:?}"
        ))),
    }
}

fn fence(written: i64) -> Fence {
    if written == 1 {
        Fence::Held
    } else {
        Fence::Lost
    }
}

impl RedisStore {
    /// Starts a builder.
    pub fn builder() -> RedisStoreBuilder {
        RedisStoreBuilder {
            prefix: DEFAULT_PREFIX.to_owned(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Connects to one node with the defaults.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// Connects to a cluster with the defaults.
    pub async fn connect_cluster<U: AsRef<str>>(urls: &[U]) -> Result<Self, StoreError> {
        Self::builder().connect_cluster(urls).await
    }

    /// Puts an in-process cache of completed records in front: the default way to use Redis.
    pub fn tiered(self) -> super::TieredStore<Self> {
        super::TieredStore::new(self)
    }

    /// Whether it keeps intents in a Redis Cluster rather than on one server.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.connection, Connection::Cluster(_))
    }

    fn redis_key(&self, key: &IntentKey) -> String {
        let mut name = String::with_capacity(self.prefix.len() + 66);
        name.push_str(&self.prefix);
        name.push('{');
        // Hex digits are ASCII.
        name.extend(key.hex_digits().iter().map(|&digit| char::from(digit)));
        name.push('}');
        name
    }

    /// Runs a script once, and once more if the connection broke: every script is written so
    /// that running it twice with the same arguments answers as running it once did.
    async fn run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        key: &IntentKey,
        args: &[&[u8]],
    ) -> Result<T, StoreError> {
        let mut invocation = script.key(self.redis_key(key));
        for arg in args {
            invocation.arg(*arg);
        }
        let mut connection = self.connection.clone();
        let call = async {
            match invocation.invoke_async(&mut connection).await {
                Err(error) if error.is_connection_dropped() || error.is_io_error() => {
                    // The connection reconnects on this error; the second try uses the new one.
                    invocation.invoke_async(&mut connection).await
                }
                result => result,
            }
        };
        timed(self.call_timeout, call).await
    }

    /// Forgets the lease `token` held on `key`: a write under another token (fenced, or a
    /// claim's give-back) must not make the real owner's renewals stop.
    fn forget(&self, key: &IntentKey, token: &OwnerToken) {
        let mut owned = self.owned.lock().unwrap_or_else(PoisonError::into_inner);
        if owned.get(key).is_some_and(|(held, _)| held == token) {
            owned.remove(key);
        }
    }
}

/// A time as the scripts' `PX` argument: whole milliseconds, at least one (zero is refused).
fn millis_arg(duration: Duration) -> String {
    super::store_millis(duration).to_string()
}

fn decode(value: Vec<u8>) -> Result<StoredValue, StoreError> {
    codec::decode(Bytes::from(value)).map_err(StoreError::new)
}

impl Store for RedisStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let token = request.token;
        let info = RunningInfo {
            started_at_ms: request.started_at_ms,
            scope: request.scope,
            fingerprint: request.fingerprint,
        };
        let running = codec::encode_running(&token, &info);
        let lease = millis_arg(request.lease);
        let current: Option<Vec<u8>> = self
            .run(&scripts::CLAIM, key, &[&running, lease.as_bytes()])
            .await?;
        let failed = match current {
            None => None,
            // The claim took the lease over a tombstone, and hands it on; one it cannot read
            // was replaced all the same, and the budget counts from zero.
            Some(value) if value.starts_with(&[codec::VERSION, codec::FAILED]) => {
                match decode(value) {
                    Ok(StoredValue::Failed(tombstone)) => Some(Arc::new(tombstone)),
                    _ => None,
                }
            }
            Some(value) => match decode(value)? {
                StoredValue::Running(_, info) => return Ok(Claim::Running(info)),
                StoredValue::Completed(record) => return Ok(Claim::Completed(Arc::new(record))),
                StoredValue::Failed(_) => None,
            },
        };
        self.owned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(*key, (token, running));
        Ok(match failed {
            Some(tombstone) => Claim::AcquiredAfterFailure(token, tombstone),
            None => Claim::Acquired(token),
        })
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        let encoded = codec::encode_record(&record);
        let retention = millis_arg(retention);
        let written: i64 = self
            .run(
                &scripts::COMPLETE,
                key,
                &[token.as_bytes(), &encoded, retention.as_bytes()],
            )
            .await?;
        self.forget(key, token);
        Ok(fence(written))
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let encoded = codec::encode_tombstone(&tombstone);
        let ttl = millis_arg(ttl);
        let written: i64 = self
            .run(
                &scripts::RELEASE,
                key,
                &[token.as_bytes(), &encoded, ttl.as_bytes()],
            )
            .await?;
        self.forget(key, token);
        Ok(fence(written))
    }

    /// Deletes the running entry `token` holds, whether or not this process learned that its
    /// claim succeeded: the reply of a claim can be lost after Redis ran it.
    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        let deleted: i64 = self
            .run(&scripts::ABANDON, key, &[token.as_bytes()])
            .await?;
        self.forget(key, token);
        Ok(fence(deleted))
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let running = {
            let owned = self.owned.lock().unwrap_or_else(PoisonError::into_inner);
            match owned.get(key) {
                Some((held, running)) if held == token => running.clone(),
                _ => return Ok(Fence::Lost),
            }
        };
        let lease = millis_arg(lease);
        let written: i64 = self
            .run(
                &scripts::EXTEND,
                key,
                &[token.as_bytes(), lease.as_bytes(), &running],
            )
            .await?;
        Ok(fence(written))
    }

    /// Counted under the intent's key with `:calls` after it: the same hash slot in a cluster.
    /// Not sent again by this store on a dropped connection, as the other scripts are: a count
    /// would count twice. (A cluster connection may still resend a command whose connection
    /// broke, which counts that call twice: the count errs that way only then.)
    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        let mut name = self.redis_key(key);
        name.push_str(":calls");
        let window = millis_arg(window);
        let mut invocation = scripts::COUNT_CALL.key(name);
        invocation.arg(window);
        let mut connection = self.connection.clone();
        let count: u64 = timed(self.call_timeout, invocation.invoke_async(&mut connection)).await?;
        Ok(count)
    }

    async fn scan(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        self.scan_page(cursor, count).await
    }

    async fn remove(&self, key: &IntentKey) -> Result<bool, StoreError> {
        self.remove_key(key).await
    }

    async fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        self.put_record(key, record, retention).await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        let mut connection = self.connection.clone();
        let mut get = redis::cmd("GET");
        get.arg(self.redis_key(key));
        let value: Option<Vec<u8>> =
            timed(self.call_timeout, get.query_async(&mut connection)).await?;
        Ok(value.map(decode).transpose()?.map(StoredValue::into_entry))
    }
}
