//! A store in a Postgres table: one row per intent, each operation one statement on the
//! database's clock.

use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use deadpool_postgres::Pool;
use tokio_postgres::types::ToSql;

use super::codec::{self, StoredValue};
use super::{
    Claim, ClaimRequest, Entry, Fence, OwnerToken, Record, RunningInfo, Scanned, Store, StoreError,
    Tombstone,
};
use crate::key::IntentKey;

mod builder;
mod connect;
mod sql;
mod transaction;

pub use builder::PostgresStoreBuilder;

use sql::Statements;

pub use transaction::{Transaction, TransactionClient, TransactionError};

/// The table a store uses unless told otherwise.
const DEFAULT_TABLE: &str = "idempotency_intents";
/// How often expired rows are swept.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// A store in Postgres, shared by every instance on the same database: claims are atomic
/// statements, writes are fenced by the owner token, and leases, retention and expiry run on
/// the database's clock (`clock_timestamp()`), never an instance's.
///
/// The table (and a second one for observe mode's counts, `<table>_calls`) is created when the
/// store connects, if it does not exist; rows past their time are swept a minute later, a
/// batch at a time, every minute. Built on `tokio-postgres` with a `deadpool` pool.
///
/// ```no_run
/// # async fn run() -> Result<(), tower_idempotency::store::StoreError> {
/// use tower_idempotency::store::PostgresStore;
///
/// let store = PostgresStore::connect("postgres://app@127.0.0.1/app").await?;
/// let layer = tower_idempotency::IdempotencyLayer::with_store(store.tiered());
/// # let _ = layer;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<PostgresState>,
}

struct PostgresState {
    pool: Pool,
    /// The connections of transactional mode's transactions, apart from the store's own, so
    /// that open transactions never leave a claim or a lease renewal without one.
    transactions: Pool,
    statements: Statements,
    call_timeout: Duration,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("pool", &self.inner.pool.status())
            .finish_non_exhaustive()
    }
}

/// Deletes rows past their time, a batch at a time, every minute, while the store lives.
async fn sweep(inner: Weak<PostgresState>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        for sql in [&inner.statements.sweep, &inner.statements.sweep_calls] {
            loop {
                match inner.execute(sql, &[]).await {
                    Ok(deleted) if deleted >= 1000 => continue,
                    Ok(_) => break,
                    Err(error) => {
                        tracing::warn!(%error, "the sweep of expired rows failed; it runs again");
                        break;
                    }
                }
            }
        }
    }
}

impl PostgresStore {
    /// Connects with the defaults: see [`PostgresStoreBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::builder().connect(url).await
    }

    /// Starts a builder.
    pub fn builder() -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            table: DEFAULT_TABLE.to_owned(),
            pool_size: 16,
            transaction_pool_size: 16,
            call_timeout: Duration::from_secs(2),
        }
    }

    /// Puts an in-process cache of completed records in front.
    pub fn tiered(self) -> super::TieredStore<Self> {
        super::TieredStore::new(self)
    }
}

impl PostgresState {
    /// Runs `sql` once on a pooled connection, bounded by the call timeout: its rows.
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let call = async {
            let client = self.pool.get().await.map_err(described)?;
            let statement = client.prepare_cached(sql).await.map_err(described)?;
            client.query(&statement, params).await.map_err(described)
        };
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(rows) => rows,
            Err(_) => Err(StoreError::new(format!(
                "postgres did not answer within {:?}",
                self.call_timeout
            ))),
        }
    }

    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, StoreError> {
        let rows = self
            .query(
                &format!("WITH done AS ({sql} RETURNING 1) SELECT count(*) FROM done"),
                params,
            )
            .await?;
        let count: i64 = rows.first().map_or(0, |row| row.get(0));
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// A fenced write: held if the statement returned a row.
    async fn fenced(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Fence, StoreError> {
        let rows = self.query(sql, params).await?;
        Ok(if rows.is_empty() {
            Fence::Lost
        } else {
            Fence::Held
        })
    }
}

/// The error with every cause under it in its text (`db error: FATAL: …`): the pool's and the
/// client's own words alone say little of what the database answered.
fn described(error: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(under) = cause {
        let said = under.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = under.source();
    }
    StoreError::new(text)
}

/// Milliseconds as the statements' `bigint` argument.
fn millis(duration: Duration) -> i64 {
    i64::try_from(super::store_millis(duration)).unwrap_or(i64::MAX)
}

fn decode(value: Vec<u8>) -> Result<StoredValue, StoreError> {
    codec::decode(Bytes::from(value)).map_err(StoreError::new)
}

impl Store for PostgresStore {
    async fn claim(&self, key: &IntentKey, request: &ClaimRequest) -> Result<Claim, StoreError> {
        let info = RunningInfo {
            started_at_ms: request.started_at_ms,
            scope: request.scope,
            fingerprint: request.fingerprint,
        };
        let running = codec::encode_running(&request.token, &info);
        let lease = millis(request.lease);
        let key = key.as_bytes().as_slice();
        // A row inserted after the statement's snapshot is neither taken nor seen: asked again.
        for _ in 0..3 {
            let rows = self
                .inner
                .query(&self.inner.statements.claim, &[&key, &running, &lease])
                .await?;
            let row = rows
                .first()
                .ok_or_else(|| StoreError::new("claim returned no row"))?;
            let (acquired, current): (bool, Option<Vec<u8>>) = (row.get(0), row.get(1));
            if acquired {
                // What the statement's snapshot held: the tombstone the claim took the intent
                // over, if it was one (a tombstone unreadable or replaced meanwhile counts the
                // budget from zero).
                return Ok(match current.map(decode) {
                    Some(Ok(StoredValue::Failed(tombstone))) => {
                        Claim::AcquiredAfterFailure(request.token, Arc::new(tombstone))
                    }
                    _ => Claim::Acquired(request.token),
                });
            }
            match current.map(decode).transpose()? {
                Some(StoredValue::Running(_, info)) => return Ok(Claim::Running(info)),
                Some(StoredValue::Completed(record)) => {
                    return Ok(Claim::Completed(Arc::new(record)))
                }
                Some(StoredValue::Failed(_)) | None => continue,
            }
        }
        Err(StoreError::new(
            "the claim kept meeting a row written at the same moment",
        ))
    }

    async fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<Fence, StoreError> {
        let encoded = codec::encode_record(&record);
        let params: [&(dyn ToSql + Sync); 4] = [
            &key.as_bytes().as_slice(),
            &token.as_bytes().as_slice(),
            &encoded,
            &millis(retention),
        ];
        self.inner
            .fenced(&self.inner.statements.complete, &params)
            .await
    }

    async fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> Result<Fence, StoreError> {
        let encoded = codec::encode_tombstone(&tombstone);
        let params: [&(dyn ToSql + Sync); 4] = [
            &key.as_bytes().as_slice(),
            &token.as_bytes().as_slice(),
            &encoded,
            &millis(ttl),
        ];
        self.inner
            .fenced(&self.inner.statements.release, &params)
            .await
    }

    async fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> Result<Fence, StoreError> {
        let params: [&(dyn ToSql + Sync); 3] = [
            &key.as_bytes().as_slice(),
            &token.as_bytes().as_slice(),
            &millis(lease),
        ];
        self.inner
            .fenced(&self.inner.statements.extend, &params)
            .await
    }

    async fn abandon(&self, key: &IntentKey, token: &OwnerToken) -> Result<Fence, StoreError> {
        let params: [&(dyn ToSql + Sync); 2] =
            [&key.as_bytes().as_slice(), &token.as_bytes().as_slice()];
        self.inner
            .fenced(&self.inner.statements.abandon, &params)
            .await
    }

    async fn get(&self, key: &IntentKey) -> Result<Option<Entry>, StoreError> {
        let key = key.as_bytes().as_slice();
        let rows = self
            .inner
            .query(&self.inner.statements.get, &[&key])
            .await?;
        let value = rows.first().map(|row| row.get::<_, Vec<u8>>(0));
        Ok(value.map(decode).transpose()?.map(StoredValue::into_entry))
    }

    /// Pages by key: the cursor is the first eight bytes of the last key listed, and the next
    /// page starts past every key that begins with them (intent keys are hashes: two that
    /// share eight bytes are as good as never met).
    async fn scan(&self, cursor: u64, count: usize) -> Result<Scanned, StoreError> {
        let after: Vec<u8> = match cursor {
            0 => Vec::new(),
            cursor => [cursor.to_be_bytes().as_slice(), &[0xff; 24]].concat(),
        };
        let limit = i64::try_from(count.max(1)).unwrap_or(i64::MAX);
        let rows = (self.inner)
            .query(&self.inner.statements.scan, &[&after, &limit])
            .await?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            let key = <[u8; 32]>::try_from(row.get::<_, &[u8]>(0))
                .map_err(|_| StoreError::new("a key of the table is not an intent's"))?;
            let entry = decode(row.get(1))?.into_entry();
            entries.push((IntentKey::from_bytes(key), entry));
        }
        let full = rows.len() >= usize::try_from(limit).unwrap_or(usize::MAX);
        let next = match entries.last() {
            Some((key, _)) if full => {
                let head: [u8; 8] = key.as_bytes()[..8].try_into().unwrap_or_default();
                u64::from_be_bytes(head).max(1)
            }
            _ => 0,
        };
        Ok(Scanned::new(entries, next))
    }

    async fn remove(&self, key: &IntentKey) -> Result<bool, StoreError> {
        let key = key.as_bytes().as_slice();
        let removed = self
            .inner
            .execute(&self.inner.statements.remove, &[&key])
            .await?;
        Ok(removed > 0)
    }

    async fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> Result<bool, StoreError> {
        let encoded = codec::encode_record(&record);
        let params: [&(dyn ToSql + Sync); 3] =
            [&key.as_bytes().as_slice(), &encoded, &millis(retention)];
        let statement = &self.inner.statements.put;
        Ok(self.inner.execute(statement, &params).await? > 0)
    }

    async fn count_call(&self, key: &IntentKey, window: Duration) -> Result<u64, StoreError> {
        let params: [&(dyn ToSql + Sync); 2] = [&key.as_bytes().as_slice(), &millis(window)];
        let rows = self
            .inner
            .query(&self.inner.statements.count_call, &params)
            .await?;
        let calls: i64 = rows.first().map_or(1, |row| row.get(0));
        Ok(u64::try_from(calls).unwrap_or(1))
    }
}
