//! What a store that completes intents inside the tool's own database transaction gives the
//! engine: a transaction per execution, begun once the claim is held, in which the record is
//! written, fenced by the owner token, and committed with the tool's own changes.
//!
//! Crate-private: [`PostgresStore`](super::PostgresStore) is the one store that does this, and
//! a user reaches it through `IdempotencyLayer::transactional`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::{OwnerToken, Record};
use crate::key::IntentKey;

/// A boxed future of the engine's end of a transaction: off the common path.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the transactions of one layer come from.
pub(crate) trait Transactions: Send + Sync + 'static {
    /// Puts a transaction, not begun, into a request's extensions, for the tool to take; the
    /// engine's end of it.
    fn attach(&self, extensions: &mut http::Extensions) -> Arc<dyn Transactional>;
}

/// The engine's end of one execution's transaction.
pub(crate) trait Transactional: Send + Sync + 'static {
    /// Takes a connection, waiting for one while the pool has none free, and begins the
    /// transaction. An error: nothing began (no connection came in time, or the database
    /// refused), and the tool must not run.
    fn begin(&self) -> Pending<'_, Result<(), super::StoreError>>;

    /// Writes `record` for `key` in the transaction where `token` still holds the intent,
    /// then commits the tool's changes with it; a write that finds another owner rolls back.
    fn commit<'a>(
        &'a self,
        key: &'a IntentKey,
        token: &'a OwnerToken,
        record: &'a Record,
        retention: Duration,
    ) -> Pending<'a, CommitResult>;

    /// Rolls back whatever the transaction holds; a connection that cannot say so is closed,
    /// which rolls it back all the same.
    fn roll_back(&self) -> Pending<'_, ()>;
}

/// What became of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "postgres"),
    allow(dead_code, reason = "the Postgres store makes them")
)]
pub(crate) enum CommitResult {
    /// The record and the tool's changes are kept, together.
    Kept,
    /// Another owner holds the intent (this one's lease lapsed and was taken): nothing of this
    /// execution is kept.
    Fenced,
    /// The transaction did not commit: neither the record nor the tool's changes are kept.
    RolledBack,
    /// The connection broke during the commit and the record could not be read since: whether
    /// both are kept or neither is cannot be told yet.
    Unknown,
}
