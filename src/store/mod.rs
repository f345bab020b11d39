//! Where intents are claimed and their outcomes kept.
//!
//! A [`Store`] answers one atomic question per request ([`Store::claim`]) and fences every later
//! write by the [`OwnerToken`] that claim handed out, so an owner that lost its lease can never
//! overwrite the record of the one that took over.

mod any;
mod codec;
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod encoding;
#[cfg(fuzzing)]
pub(crate) use codec::fuzzing;
pub(crate) mod hints;
mod history;
mod memory;
mod observed;
#[cfg(feature = "postgres")]
mod postgres;
mod record;
#[cfg(feature = "redis")]
mod redis;
mod tiered;
mod token;
mod transaction;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::key::{Fingerprint, IntentKey, ScopeHash};

/// The longest the stores here keep a lease, a record or a tombstone: a longer time (a layer
/// told to keep records "forever", `Duration::MAX`) is taken as this, a hundred years.
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) const LONGEST_KEPT: Duration = crate::clock::FARTHEST;

/// A time as a shared store takes it: whole milliseconds, at least one (zero would be refused
/// or mean "no expiry"), at most [`LONGEST_KEPT`].
#[cfg(any(feature = "redis", feature = "postgres"))]
pub(crate) fn store_millis(duration: Duration) -> u64 {
    let millis = duration.min(LONGEST_KEPT).as_millis().max(1);
    u64::try_from(millis).unwrap_or(u64::MAX)
}

pub use any::redaction::redacted;
pub use any::{AnyStore, AnyStoreBuilder, Backend};
pub use codec::DecodeError;
pub(crate) use hints::{answers_at_once, cached};
pub(crate) use history::continued;
pub use history::{Event, Instance, Transition, HISTORY_LIMIT};
pub use memory::{MemoryStore, MemoryStoreBuilder};
pub(crate) use observed::{ObservedStore, StoreMetrics};
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::{
    PostgresStore, PostgresStoreBuilder, Transaction, TransactionClient, TransactionError,
};
pub use record::{
    KeptResponse, Omission, Protocol, Record, ReleaseCause, RunningInfo, StoredResponse, Tombstone,
};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::{RedisStore, RedisStoreBuilder};
pub use tiered::{TieredStore, DEFAULT_LOCAL_TTL};
pub use token::OwnerToken;
pub(crate) use transaction::{CommitResult, Transactional, Transactions};

/// What a claim asks the store to remember about the execution it starts.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClaimRequest {
    /// The owner token the claimer minted: the store keeps it with the lease and answers
    /// `Acquired` with it. A repeated claim with the same token (its first answer was lost)
    /// acquires again, and after a failed claim the claimer gives back whatever this token
    /// may hold ([`Store::abandon`]).
    pub token: OwnerToken,
    /// How long the claim holds without being extended.
    pub lease: Duration,
    /// Who may see the outcome.
    pub scope: ScopeHash,
    /// Whose part of a bounded store the record counts against: the principal where one is
    /// configured (sessions are the client's to mint), else the scope.
    pub share: ScopeHash,
    /// What the request asked for (compared when an explicit key is reused).
    pub fingerprint: Fingerprint,
    /// When the execution started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
}

impl ClaimRequest {
    /// A claim under `token` for `lease`, of an execution that started at `started_at_ms`
    /// (milliseconds since the Unix epoch), asking for `fingerprint` within `scope`, counted
    /// against `share`.
    pub fn new(
        token: OwnerToken,
        lease: Duration,
        scope: ScopeHash,
        share: ScopeHash,
        fingerprint: Fingerprint,
        started_at_ms: u64,
    ) -> Self {
        Self {
            token,
            lease,
            scope,
            share,
            fingerprint,
            started_at_ms,
        }
    }

    /// What a store answers another claim of this intent with while this one holds it.
    pub fn running(&self) -> RunningInfo {
        RunningInfo::new(self.started_at_ms, self.scope, self.fingerprint)
    }
}

/// The answer to a claim.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Claim {
    /// Nobody holds the intent: the caller now does, and must complete or release it.
    Acquired(OwnerToken),
    /// Nobody holds the intent and its last attempt failed: the caller now holds it, as with
    /// [`Claim::Acquired`], and this is the failed attempt's tombstone, whose failures in a
    /// row the layer's retry budget reads. A store may answer `Acquired` instead (the budget
    /// then counts from zero).
    AcquiredAfterFailure(OwnerToken, Arc<Tombstone>),
    /// Another execution holds the lease.
    Running(RunningInfo),
    /// The intent completed; here is what it answered.
    Completed(Arc<Record>),
}

/// What a store knows of an intent, for the status path and for waiting duplicates.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Entry {
    /// An execution holds the lease.
    Running(RunningInfo),
    /// The intent completed.
    Completed(Arc<Record>),
    /// The last attempt failed and released the key.
    Failed(Arc<Tombstone>),
}

/// One page of what a store holds, for an operator's listing ([`Store::scan`]).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Scanned {
    /// The page's entries, with their keys; an entry past its time is not among them.
    pub entries: Vec<(IntentKey, Entry)>,
    /// Where the next page starts; 0 when this was the last.
    pub next: u64,
}

impl Scanned {
    /// A page of `entries`, followed by the page at `next` (0: none).
    pub fn new(entries: Vec<(IntentKey, Entry)>, next: u64) -> Self {
        Self { entries, next }
    }
}

/// Whether a fenced write was made under the caller's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fence {
    /// The caller still held the intent; the write happened.
    Held,
    /// Another owner holds the intent, or nobody does: nothing was written.
    Lost,
}

/// The store could not answer, or refused a new intent because it is full.
#[derive(Debug)]
pub struct StoreError {
    cause: Box<dyn std::error::Error + Send + Sync>,
    full: bool,
}

impl StoreError {
    /// Wraps the cause of a failed store operation.
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            cause: cause.into(),
            full: false,
        }
    }

    /// A claim refused because the store is full: it has no room for the new intent's outcome
    /// without dropping one it keeps, and it took nothing (no lease to give back). The layer
    /// answers 503, nothing executed, whether it fails open or closed: the store answered,
    /// and running the action would leave nothing to recognise its repeat by.
    pub fn full(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            cause: cause.into(),
            full: true,
        }
    }

    /// Whether the store refused a claim because it is full ([`StoreError::full`]).
    pub fn is_full(&self) -> bool {
        self.full
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.full {
            write!(f, "idempotency store full: {}", self.cause)
        } else {
            write!(f, "idempotency store error: {}", self.cause)
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.cause)
    }
}

/// A place to claim intents and keep their outcomes. Implementations must make `claim`
/// atomic and fence `complete`, `release` and `extend` by the owner token.
///
/// Every method is one round trip at most; the layer adds no locking of its own around them.
pub trait Store: Send + Sync + 'static {
    /// Atomically: acquire the intent under `request.token`, or report who runs it, or return
    /// its record.
    ///
    /// A failed attempt's tombstone does not block a claim (the answer is then
    /// [`Claim::AcquiredAfterFailure`], with the tombstone); a running entry under the same
    /// token does not either (the claim is repeated). A store that has no room for a new
    /// intent's outcome may refuse it with [`StoreError::full`], taking nothing.
    fn claim(
        &self,
        key: &IntentKey,
        request: &ClaimRequest,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Stores the outcome for `retention` and ends the lease, if `token` still holds it.
    fn complete(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        record: Arc<Record>,
        retention: Duration,
    ) -> impl Future<Output = Result<Fence, StoreError>> + Send;

    /// Ends the lease without a record, leaving a tombstone for `ttl`, if `token` still holds it.
    fn release(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        tombstone: Arc<Tombstone>,
        ttl: Duration,
    ) -> impl Future<Output = Result<Fence, StoreError>> + Send;

    /// Renews the lease for another `lease`, if `token` still holds it.
    fn extend(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
        lease: Duration,
    ) -> impl Future<Output = Result<Fence, StoreError>> + Send;

    /// Ends a lease `token` may hold, with no record and no tombstone: a claim whose answer
    /// never came gives back what it may have taken, so that no lease lingers that nobody
    /// owns. The default renews the lease for zero time.
    fn abandon(
        &self,
        key: &IntentKey,
        token: &OwnerToken,
    ) -> impl Future<Output = Result<Fence, StoreError>> + Send {
        self.extend(key, token, Duration::ZERO)
    }

    /// Reads what is known of an intent.
    fn get(
        &self,
        key: &IntentKey,
    ) -> impl Future<Output = Result<Option<Entry>, StoreError>> + Send;

    /// Counts one more call of `key` in observe mode and returns how many calls of it the
    /// store has counted since the first, within `window` of that first (1: this call is the
    /// first). Atomic, one round trip, so that instances that share the store count one
    /// intent's repeats together whichever instance each call reaches.
    ///
    /// The default answers an error: on a store that does not count, observe mode forwards
    /// every call as ever and counts the calls it could not check as `uncounted`.
    fn count_call(
        &self,
        key: &IntentKey,
        window: Duration,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        let _ = (key, window);
        std::future::ready(Err(StoreError::new(
            "this store does not count calls for observe mode",
        )))
    }

    /// A page of about `count` of the entries the store holds, from `cursor` (0: the first
    /// page), for an operator's listing (the admin API); never on a request's path. A
    /// listing may miss or repeat an entry written while it pages.
    ///
    /// The default answers an error: an operator cannot list what such a store holds.
    fn scan(
        &self,
        cursor: u64,
        count: usize,
    ) -> impl Future<Output = Result<Scanned, StoreError>> + Send {
        let _ = (cursor, count);
        std::future::ready(Err(StoreError::new("this store cannot list what it holds")))
    }

    /// Removes the record or the tombstone the store holds of `key`, atomically never a running
    /// execution's lease (one that began since the operator looked must go on): whether it
    /// removed one. For an operator (a resolution as "not run", a purge), never on a request's
    /// path.
    ///
    /// The default answers an error.
    fn remove(&self, key: &IntentKey) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = key;
        std::future::ready(Err(StoreError::new("this store cannot remove an entry")))
    }

    /// Keeps `record` for `key` for `retention` over a record, a tombstone or nothing, with no
    /// owner's token, atomically never over a running execution's lease: whether it wrote. An
    /// operator's resolution of an outcome as "ran", never on a request's path.
    ///
    /// The default answers an error.
    fn put(
        &self,
        key: &IntentKey,
        record: Arc<Record>,
        retention: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (key, record, retention);
        std::future::ready(Err(StoreError::new("this store cannot keep a resolution")))
    }

    /// Where this crate's own stores give the layer hooks that answer faster; hidden, and
    /// closed to stores outside the crate, which work the same without them.
    #[doc(hidden)]
    fn hints(&self, _sealed: hints::Sealed) -> Option<&dyn hints::Hints> {
        None
    }
}
