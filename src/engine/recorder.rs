//! Recording an execution's outcome: kept, kept without its answer, or released, with a write
//! the store refuses retried in the background.

use std::sync::Arc;
use std::time::Duration;

use super::inflight::Settled;
use super::{Answered, Engine, Failure, Intent, Outcome};
use crate::classify::Verdict;
use crate::clock::now_ms;
use crate::store::{
    Fence, KeptResponse, Omission, OwnerToken, Record, ReleaseCause, Store, StoreError, Tombstone,
};
use crate::telemetry;

/// What the first caller is given: the outcome of its execution, or the tool's error.
pub(crate) type FirstOutcome<A, E> = Result<Outcome<A>, E>;

/// How long a completion that the store refuses is retried before it is given up (and logged).
const COMPLETION_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Writes an execution's outcome to the store.
pub(crate) struct Recorder<'a, St> {
    pub(crate) engine: &'a Engine<St>,
    pub(crate) intent: &'a Intent,
    pub(crate) token: &'a OwnerToken,
    pub(crate) started_at_ms: u64,
}

/// What recording came to: the outcome for the waiters, and a write the store refused at the
/// first attempt, still to be made.
pub(crate) struct Recorded {
    pub(crate) settled: Settled,
    pub(crate) unwritten: Option<Unwritten>,
}

/// A write the store refused.
pub(crate) enum Unwritten {
    Record(Arc<Record>),
    Release(Arc<Tombstone>),
}

impl<St: Store> Recorder<'_, St> {
    /// The tool answered: kept or released as its dialect's verdict says; the first caller is
    /// given the answer either way.
    pub(crate) async fn answered<A, E>(
        &self,
        answered: Answered<A>,
    ) -> (Recorded, FirstOutcome<A, E>) {
        let Answered {
            verdict,
            stored,
            status,
            retry_after_s,
            answer,
        } = answered;
        let status_or_ok = status.unwrap_or(http::StatusCode::OK);
        let omitted = |why| KeptResponse::Omitted {
            status: status_or_ok,
            why,
        };
        let kept = match (verdict, stored) {
            (Verdict::Keep, Some(stored)) => KeptResponse::Full(stored),
            (Verdict::Keep, None) => omitted(Omission::TooLarge),
            (Verdict::KeepStatus, _) => omitted(Omission::NoStore),
            (Verdict::Unknown, _) => omitted(Omission::Unclassified),
            (Verdict::Release(cause), stored) => {
                let (settled, unwritten) = self.release(status, cause, retry_after_s).await;
                let settled = Settled::Failed {
                    response: stored.map(Arc::new),
                    failure: settled,
                };
                let recorded = Recorded { settled, unwritten };
                return (recorded, Ok(Outcome::Executed(answer)));
            }
        };
        let (record, unwritten) = self.complete(kept).await;
        let recorded = Recorded {
            settled: Settled::Replay(record),
            unwritten,
        };
        (recorded, Ok(Outcome::Executed(answer)))
    }

    /// The execution passed its bound and was dropped: recorded as run with an unknown
    /// outcome, so that it never runs again by itself.
    pub(crate) async fn abandoned<A, E>(&self) -> (Recorded, FirstOutcome<A, E>) {
        tracing::warn!("the execution passed its max_execution bound and was abandoned");
        let (record, unwritten) = self.complete(KeptResponse::Abandoned).await;
        let recorded = Recorded {
            settled: Settled::Replay(Arc::clone(&record)),
            unwritten,
        };
        (recorded, Ok(Outcome::Abandoned(record)))
    }

    /// The execution produced no usable answer.
    pub(crate) async fn failed<A, E>(
        &self,
        cause: ReleaseCause,
        failure: Failure,
    ) -> (Recorded, FirstOutcome<A, E>) {
        let (_, unwritten) = self.release(None, cause, None).await;
        let settled = Settled::Failed {
            response: None,
            failure,
        };
        let outcome = Outcome::Failed {
            failure,
            answer: None,
        };
        (Recorded { settled, unwritten }, Ok(outcome))
    }

    /// Stores the record; one the store refuses is handed back, to be written by
    /// [`Recorder::keep_trying`] while the callers already have their answers.
    async fn complete(&self, response: KeptResponse) -> (Arc<Record>, Option<Unwritten>) {
        let completed_at_ms = now_ms();
        let record = Arc::new(Record {
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            started_at_ms: self.started_at_ms,
            completed_at_ms,
            expires_at_ms: completed_at_ms.saturating_add(self.intent.retention.as_millis() as u64),
            response,
            dialect: self.intent.dialect,
        });
        match self.write(&record).await {
            Ok(()) => (record, None),
            Err(error) => {
                tracing::warn!(%error, "recording the outcome failed; retrying in the background");
                let unwritten = Unwritten::Record(Arc::clone(&record));
                (record, Some(unwritten))
            }
        }
    }

    /// One attempt at writing the record; a fence is final, so only an error is retried.
    async fn write(&self, record: &Arc<Record>) -> Result<(), StoreError> {
        let key = &self.intent.key;
        let retention = self.intent.retention;
        let written = self
            .engine
            .store
            .complete(key, self.token, Arc::clone(record), retention);
        match written.await? {
            Fence::Held => tracing::debug!(status = record.status().as_u16(), "outcome recorded"),
            Fence::Lost => telemetry::fenced(&self.intent.op),
        }
        Ok(())
    }

    /// Makes a write the store refused, in the background of the callers.
    pub(crate) async fn keep_trying(&self, unwritten: Unwritten) {
        match unwritten {
            Unwritten::Record(record) => self.keep_writing(record).await,
            Unwritten::Release(tombstone) => self.keep_releasing(tombstone).await,
        }
    }

    /// Retries a refused record, renewing the lease between attempts, for up to
    /// [`COMPLETION_RETRY_WINDOW`]. Given up, the lease lapses and a later repeat may run the
    /// action again: counted (`idempotency_completions_abandoned_total`) and logged.
    async fn keep_writing(&self, record: Arc<Record>) {
        let give_up = tokio::time::Instant::now() + COMPLETION_RETRY_WINDOW;
        let lease = self.engine.settings.lease;
        // Each attempt renews the lease first, so attempts never wait longer than a third of it.
        let longest = (lease / 3).clamp(Duration::from_millis(10), Duration::from_secs(5));
        let mut backoff = Duration::from_millis(50).min(longest);
        loop {
            tokio::time::sleep(backoff).await;
            let key = &self.intent.key;
            let _ = self.engine.store.extend(key, self.token, lease).await;
            match self.write(&record).await {
                Ok(()) => return,
                Err(error) if tokio::time::Instant::now() < give_up => {
                    tracing::warn!(%error, "recording the outcome failed; retrying");
                    backoff = (backoff * 2).min(longest);
                }
                Err(error) => {
                    tracing::error!(%error, "recording the outcome failed; giving up");
                    telemetry::completion_abandoned(&self.intent.op);
                    return;
                }
            }
        }
    }

    /// Releases the key, leaving a tombstone for the status path; a release the store refuses
    /// is handed back. Returns how the attempt ended, as its tombstone tells it.
    async fn release(
        &self,
        status: Option<http::StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) -> (Failure, Option<Unwritten>) {
        let tombstone = Arc::new(Tombstone {
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            failed_at_ms: now_ms(),
            status,
            cause,
            retry_after_s,
        });
        telemetry::released(&self.intent.op, cause.as_str());
        let failure = Failure::of(&tombstone);
        match self.write_release(&tombstone).await {
            Ok(_) => (failure, None),
            Err(error) => {
                tracing::warn!(%error, "releasing the intent failed; retrying in the background");
                (failure, Some(Unwritten::Release(tombstone)))
            }
        }
    }

    async fn write_release(&self, tombstone: &Arc<Tombstone>) -> Result<Fence, StoreError> {
        let ttl = self.engine.settings.failure_ttl;
        let key = &self.intent.key;
        let tombstone = Arc::clone(tombstone);
        self.engine
            .store
            .release(key, self.token, tombstone, ttl)
            .await
    }

    /// Retries a refused release until it is written or the lease, no longer renewed, has
    /// lapsed by itself: either way the intent is free for a retry then.
    async fn keep_releasing(&self, tombstone: Arc<Tombstone>) {
        let lapsed = tokio::time::Instant::now() + self.engine.settings.lease;
        let mut backoff = Duration::from_millis(50);
        while tokio::time::Instant::now() < lapsed {
            tokio::time::sleep(backoff.min(lapsed - tokio::time::Instant::now())).await;
            match self.write_release(&tombstone).await {
                Ok(_) => return,
                Err(error) => tracing::debug!(%error, "releasing the intent failed; retrying"),
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}
