//! Transactional mode on Postgres: the tool's database transaction, handed to it through the
//! request, in which the layer writes the record and commits.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::Object;
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use super::{described, millis, PostgresState, PostgresStore};
use crate::key::IntentKey;
use crate::store::codec;
use crate::store::transaction::{CommitResult, Pending, Transactional, Transactions};
use crate::store::{OwnerToken, Record, StoreError};

/// How often the record a broken commit left is read before its outcome is left unknown.
const SETTLE_READS: u32 = 3;

impl PostgresStore {
    /// The transactions of transactional mode, on this store's transaction pool.
    pub(crate) fn transactions(&self) -> Arc<dyn Transactions> {
        Arc::new(PostgresTransactions {
            inner: Arc::clone(&self.inner),
        })
    }
}

/// The transactions of one store's layer.
struct PostgresTransactions {
    inner: Arc<PostgresState>,
}

impl Transactions for PostgresTransactions {
    fn attach(&self, extensions: &mut http::Extensions) -> Arc<dyn Transactional> {
        let shared = Arc::new(EngineSide {
            inner: Arc::clone(&self.inner),
            state: Arc::new(Mutex::new(TransactionState::NotBegun)),
        });
        extensions.insert(Transaction {
            state: Arc::clone(&shared.state),
        });
        shared
    }
}

/// The database transaction of one protected call in transactional mode, found in the
/// request's extensions. Clones share it.
///
/// The handler writes through [`Transaction::client`] and never commits or rolls back itself:
/// the layer does, with the call's record.
#[derive(Clone)]
pub struct Transaction {
    state: Arc<Mutex<TransactionState>>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction").finish_non_exhaustive()
    }
}

impl Transaction {
    /// The connection, inside the call's transaction, while the handler holds it.
    ///
    /// An error where the transaction is not open: the call is not one the layer runs (a
    /// replay, a request of a route it does not protect), or it has ended.
    pub async fn client(&self) -> Result<TransactionClient, TransactionError> {
        let guard = Arc::clone(&self.state).lock_owned().await;
        OwnedMutexGuard::try_map(guard, |state| match state {
            TransactionState::Open(OpenConnection(Some(object))) => Some(object),
            _ => None,
        })
        .map(|guard| TransactionClient { guard })
        .map_err(|_| TransactionError(()))
    }
}

/// The connection of a call's transaction, held: it derefs to a [`tokio_postgres::Client`].
/// The layer commits once every holder has let it go.
pub struct TransactionClient {
    guard: OwnedMappedMutexGuard<TransactionState, Object>,
}

impl std::fmt::Debug for TransactionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionClient").finish_non_exhaustive()
    }
}

impl std::ops::Deref for TransactionClient {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &Self::Target {
        let object: &Object = &self.guard;
        object
    }
}

/// [`Transaction::client`] found no open transaction.
#[derive(Debug)]
pub struct TransactionError(());

impl std::fmt::Display for TransactionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "no open transaction: the call is not one a transactional layer runs, or it ended",
        )
    }
}

impl std::error::Error for TransactionError {}

/// Where a call's transaction stands.
#[allow(
    clippy::large_enum_variant,
    reason = "one per call, behind its Arc: boxing the connection would only add an allocation"
)]
enum TransactionState {
    NotBegun,
    /// Begun on this connection, which holds it until a commit or a rollback.
    Open(OpenConnection),
    Ended,
}

/// The connection of an open transaction.
struct OpenConnection(Option<Object>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        // A transaction dropped open (its execution cancelled at shutdown) never goes back to
        // the pool: the connection closes, and the database rolls it back.
        if let Some(object) = self.0.take() {
            drop(Object::take(object));
        }
    }
}

/// The engine's end of a call's transaction.
struct EngineSide {
    inner: Arc<PostgresState>,
    state: Arc<Mutex<TransactionState>>,
}

impl EngineSide {
    /// Takes the open connection out of the transaction, which ends for the handler. A
    /// handler that still holds its client past the call timeout (in a task of its own, say)
    /// keeps it: the transaction is then never committed, and rolls back when the client goes.
    async fn take(&self) -> Option<Object> {
        let timeout = self.inner.call_timeout;
        let Ok(mut state) = tokio::time::timeout(timeout, self.state.lock()).await else {
            tracing::warn!(
                "the handler still holds its transaction's client: it is not committed, and \
                 rolls back when the client is let go"
            );
            return None;
        };
        match std::mem::replace(&mut *state, TransactionState::Ended) {
            TransactionState::Open(mut held) => held.0.take(),
            TransactionState::NotBegun | TransactionState::Ended => None,
        }
    }

    /// What a commit whose answer never came left: the record, if it is this call's, was
    /// committed with the changes; anything else, and neither was.
    async fn settled(&self, key: &IntentKey, encoded: &[u8]) -> CommitResult {
        let key = key.as_bytes().as_slice();
        for attempt in 0..SETTLE_READS {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200) * attempt).await;
            }
            let statement = &self.inner.statements.settled;
            match self.inner.query(statement, &[&key]).await {
                Ok(rows) => {
                    let value = rows.first().map(|row| row.get::<_, &[u8]>(0));
                    return if value == Some(encoded) {
                        CommitResult::Kept
                    } else {
                        CommitResult::RolledBack
                    };
                }
                Err(error) => tracing::warn!(%error, "reading what a broken commit left failed"),
            }
        }
        CommitResult::Unknown
    }
}

/// Rolls back on `object` within `timeout` (a statement of the handler's may still run on it,
/// its future dropped at `max_execution`); a connection that cannot is closed, which rolls
/// back all the same.
async fn roll_back(object: Object, timeout: Duration) {
    match tokio::time::timeout(timeout, object.batch_execute("ROLLBACK")).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            tracing::debug!(%error, "rolling back failed; the connection is closed instead");
            drop(Object::take(object));
        }
        Err(_) => {
            tracing::warn!("rolling back did not end in time; the connection is closed instead");
            drop(Object::take(object));
        }
    }
}

impl Transactional for EngineSide {
    fn begin(&self) -> Pending<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let timeout = self.inner.call_timeout;
            let begun = tokio::time::timeout(timeout, async {
                // Held from the first moment: a begin cut off (the caller gone, the timeout)
                // closes the connection rather than pool it mid-transaction.
                let held = OpenConnection(Some(
                    self.inner.transactions.get().await.map_err(described)?,
                ));
                if let Some(object) = &held.0 {
                    object.batch_execute("BEGIN").await.map_err(described)?;
                }
                Ok::<_, StoreError>(held)
            });
            let held = begun.await.map_err(|_| {
                StoreError::new(format!("no transaction could begin within {timeout:?}"))
            })??;
            *self.state.lock().await = TransactionState::Open(held);
            Ok(())
        })
    }

    fn commit<'a>(
        &'a self,
        key: &'a IntentKey,
        token: &'a OwnerToken,
        record: &'a Record,
        retention: Duration,
    ) -> Pending<'a, CommitResult> {
        Box::pin(async move {
            let Some(object) = self.take().await else {
                return CommitResult::RolledBack;
            };
            let timeout = self.inner.call_timeout;
            let encoded = codec::encode_record(record);
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] = [
                &key.as_bytes().as_slice(),
                &token.as_bytes().as_slice(),
                &encoded,
                &millis(retention),
            ];
            let statement = &self.inner.statements.complete_in_transaction;
            let written = tokio::time::timeout(timeout, object.query(statement, &params)).await;
            match written {
                Ok(Ok(rows)) if rows.is_empty() => {
                    roll_back(object, timeout).await;
                    return CommitResult::Fenced;
                }
                Ok(Ok(_)) => {}
                // Nothing was committed: a failed statement (one of the handler's, say) has
                // aborted the transaction, or the connection is gone before the commit.
                Ok(Err(error)) => {
                    tracing::warn!(%error, "writing the record in the transaction failed");
                    roll_back(object, timeout).await;
                    return CommitResult::RolledBack;
                }
                // No commit was sent: closing the connection rolls back.
                Err(_) => {
                    tracing::warn!("writing the record did not end in time; rolled back");
                    drop(Object::take(object));
                    return CommitResult::RolledBack;
                }
            }
            match tokio::time::timeout(timeout, object.batch_execute("COMMIT")).await {
                Ok(Ok(())) => CommitResult::Kept,
                // The database answered: it refused the commit, and rolled back.
                Ok(Err(error)) if error.code().is_some() => {
                    tracing::warn!(%error, "the database refused the commit");
                    CommitResult::RolledBack
                }
                answered => {
                    match answered {
                        Ok(Err(error)) => {
                            tracing::warn!(%error, "the connection broke during the commit");
                        }
                        _ => tracing::warn!("the commit did not end in time"),
                    }
                    drop(Object::take(object));
                    self.settled(key, &encoded).await
                }
            }
        })
    }

    fn roll_back(&self) -> Pending<'_, ()> {
        Box::pin(async move {
            if let Some(object) = self.take().await {
                roll_back(object, self.inner.call_timeout).await;
            }
        })
    }
}
