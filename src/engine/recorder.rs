//! Recording an execution's outcome: kept, kept without its answer, or released, with a write
//! the store refuses retried in the background.

use std::sync::Arc;
use std::time::Duration;

use super::inflight::Settlement;
use super::intent::Intent;
use super::outcome::{Failure, Judgement, Outcome, Reading, ToolAnswer};
use super::Engine;
use crate::classify::Verdict;
use crate::clock::{millis, now_ms};
use crate::store::{
    continued, Event, Fence, KeptResponse, Omission, OwnerToken, Record, ReleaseCause, Store,
    StoreError, Tombstone, Transition,
};
use crate::telemetry;

/// How the tool's call ended: its dialect's reading, its error, or a panic; `None` when it
/// passed its bound.
pub(crate) type ToolEnd<A, E> = Option<std::thread::Result<Result<Reading<A>, E>>>;

/// How long a completion that the store refuses is retried before it is given up (and logged).
const COMPLETION_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Writes an execution's outcome to the store. It borrows what it needs: an execution that
/// ends at once on a store that answers at once (the common case) records its outcome with no
/// copy of its intent; a write that must go on in a task of its own takes a [`RecorderParts`] one.
pub(crate) struct Recorder<'a, St> {
    pub(crate) engine: &'a Arc<Engine<St>>,
    pub(crate) intent: &'a Intent,
    pub(crate) token: OwnerToken,
    pub(crate) started_at_ms: u64,
    /// The intent's failures in a row before this attempt, which a failure adds to.
    pub(crate) failures_before: u32,
    /// The intent's story before this attempt (from the tombstone the claim replaced), which
    /// the record or tombstone it leaves continues.
    pub(crate) history: &'a [Transition],
}

/// A recorder's parts, owned, so that it can be moved into a task.
pub(crate) struct RecorderParts<St> {
    engine: Arc<Engine<St>>,
    intent: Intent,
    token: OwnerToken,
    started_at_ms: u64,
    failures_before: u32,
    history: Vec<Transition>,
}

impl<St> RecorderParts<St> {
    pub(crate) fn recorder(&self) -> Recorder<'_, St> {
        Recorder {
            engine: &self.engine,
            intent: &self.intent,
            token: self.token,
            started_at_ms: self.started_at_ms,
            failures_before: self.failures_before,
            history: &self.history,
        }
    }
}

impl<St> Recorder<'_, St> {
    /// The same recorder, owning its parts.
    pub(crate) fn to_owned(&self) -> RecorderParts<St> {
        RecorderParts {
            engine: Arc::clone(self.engine),
            intent: self.intent.clone(),
            token: self.token,
            started_at_ms: self.started_at_ms,
            failures_before: self.failures_before,
            history: self.history.to_vec(),
        }
    }
}

/// What recording an outcome comes to before the store is asked: the write to make, what the
/// waiters learn once it is made, and the first caller's answer.
pub(crate) struct Plan<A, E> {
    pub(crate) write: Write,
    pub(crate) settled: Settlement,
    pub(crate) answer: Result<Outcome<A>, E>,
}

/// A write of an outcome: the record of a completed execution, or the release of its key.
pub(crate) enum Write {
    Record(Arc<Record>),
    Release(Arc<Tombstone>),
}

impl<St: Store> Recorder<'_, St> {
    /// Decides, without the store, what an ended execution leaves: kept or released as its
    /// dialect's verdict says, and the first caller's answer.
    pub(crate) fn plan<A, E>(&self, ended: ToolEnd<A, E>) -> Plan<A, E> {
        match ended {
            None => self.abandoned(),
            Some(Ok(Ok(Reading::Answered(answered)))) => self.answered(answered),
            Some(Ok(Ok(Reading::Broken))) => self.failed(ReleaseCause::ResponseBody, Failure::Body),
            Some(Ok(Err(error))) => Plan {
                answer: Err(error),
                ..self.failed(ReleaseCause::InnerError, Failure::Error)
            },
            Some(Err(_panic)) => self.failed(ReleaseCause::Panic, Failure::Panic),
        }
    }

    /// The tool answered: kept or released as its dialect's verdict says; the first caller is
    /// given the answer either way.
    fn answered<A, E>(&self, answered: ToolAnswer<A>) -> Plan<A, E> {
        let ToolAnswer {
            judged,
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
        let kept = match (judged, stored) {
            (Judgement::Interrupted, _) => omitted(Omission::Interrupted),
            (Judgement::Verdict(Verdict::Keep), Some(stored)) => KeptResponse::Full(stored),
            (Judgement::Verdict(Verdict::Keep), None) => omitted(Omission::TooLarge),
            (Judgement::Verdict(Verdict::KeepStatus), _) => omitted(Omission::NoStore),
            (Judgement::Verdict(Verdict::Unknown), _) => omitted(Omission::Unclassified),
            (Judgement::Verdict(Verdict::Release(cause)), stored) => {
                let tombstone = self.tombstone(status, cause, retry_after_s);
                // The credentials' answer is the caller's, not the tool's: a duplicate, which
                // may hold other credentials, is not handed it; nor a server's cancellation,
                // which says nothing of the tool: the duplicate is told it may have run.
                let handed = !matches!(cause, ReleaseCause::Credentials | ReleaseCause::Cancelled);
                let stored = stored.filter(|_| handed);
                let settled = Settlement::Failed {
                    response: stored.map(Arc::new),
                    failure: Failure::of(&tombstone),
                    freed_in_s: None,
                };
                return Plan {
                    write: Write::Release(tombstone),
                    settled,
                    answer: Ok(Outcome::Executed(answer)),
                };
            }
        };
        let record = self.record(kept);
        Plan {
            write: Write::Record(Arc::clone(&record)),
            settled: Settlement::Replay(record),
            answer: Ok(Outcome::Executed(answer)),
        }
    }

    /// The execution passed its bound and was dropped: recorded as run with an unknown
    /// outcome, so that it never runs again by itself.
    fn abandoned<A, E>(&self) -> Plan<A, E> {
        tracing::warn!("the execution passed its max_execution bound and was abandoned");
        let record = self.record(KeptResponse::Abandoned);
        Plan {
            write: Write::Record(Arc::clone(&record)),
            settled: Settlement::Replay(Arc::clone(&record)),
            answer: Ok(Outcome::Abandoned(record)),
        }
    }

    /// The execution produced no usable answer.
    pub(super) fn failed<A, E>(&self, cause: ReleaseCause, failure: Failure) -> Plan<A, E> {
        Plan {
            write: Write::Release(self.tombstone(None, cause, None)),
            settled: Settlement::Failed {
                response: None,
                failure,
                freed_in_s: None,
            },
            answer: Ok(Outcome::Failed {
                failure,
                answer: None,
                freed_in_s: None,
            }),
        }
    }

    fn record(&self, response: KeptResponse) -> Arc<Record> {
        let completed_at_ms = now_ms();
        let duration_ms = completed_at_ms.saturating_sub(self.started_at_ms);
        let ended = match &response {
            KeptResponse::Abandoned => Event::Abandoned { duration_ms },
            KeptResponse::Full(stored) => Event::Executed {
                status: stored.status,
                duration_ms,
            },
            KeptResponse::Omitted { status, .. } => Event::Executed {
                status: *status,
                duration_ms,
            },
        };
        Arc::new(Record {
            history: self.story(completed_at_ms, ended),
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            started_at_ms: self.started_at_ms,
            completed_at_ms,
            expires_at_ms: completed_at_ms.saturating_add(millis(self.retention_of(&response))),
            response,
            protocol: self.intent.protocol,
            operation: Some(Arc::clone(self.intent.op.label())),
            share: (self.intent.share != self.intent.scope).then_some(self.intent.share),
            note: None,
        })
    }

    /// How long a record is kept: the intent's retention, or for an outcome that is not known
    /// (the action may have run) the shorter retention of such outcomes.
    pub(super) fn retention_of(&self, response: &KeptResponse) -> std::time::Duration {
        let retention = self.intent.retention;
        if response.is_unknown() {
            retention.min(self.engine.settings.unknown_retention)
        } else {
            retention
        }
    }

    /// The tombstone of a released key, left for the status path.
    fn tombstone(
        &self,
        status: Option<http::StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) -> Arc<Tombstone> {
        telemetry::released(&self.intent.op, cause.as_str());
        let failed_at_ms = now_ms();
        let released = Event::Released {
            status,
            cause,
            duration_ms: failed_at_ms.saturating_sub(self.started_at_ms),
        };
        Arc::new(Tombstone {
            history: self.story(failed_at_ms, released),
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            failed_at_ms,
            status,
            cause,
            retry_after_s,
            share: (self.intent.share != self.intent.scope).then_some(self.intent.share),
            failures: if cause.counts_as_failure() {
                self.failures_before.saturating_add(1)
            } else {
                0
            },
        })
    }

    /// The intent's story with this attempt's claim and its end, `ended` at `at_ms`, after it.
    fn story(&self, at_ms: u64, ended: Event) -> Vec<Transition> {
        let claimed = Transition::new(self.started_at_ms, Event::Claimed);
        continued(self.history, [claimed, Transition::new(at_ms, ended)])
    }

    /// The first attempt at a write; one the store refuses is logged, to be made by
    /// [`Recorder::keep_trying`] while the callers already have their answers.
    pub(crate) async fn attempt(&self, write: &Write) -> Result<(), StoreError> {
        let (written, what) = match write {
            Write::Record(record) => (self.write(record).await, "recording the outcome"),
            Write::Release(tombstone) => (
                self.write_release(tombstone).await.map(|_| ()),
                "releasing the intent",
            ),
        };
        if let Err(error) = &written {
            tracing::warn!(%error, "{what} failed; retrying in the background");
        }
        written
    }

    /// One attempt at writing the record; a fence is final, so only an error is retried.
    async fn write(&self, record: &Arc<Record>) -> Result<(), StoreError> {
        let key = &self.intent.key;
        let retention = self.retention_of(&record.response);
        let written = self
            .engine
            .store
            .complete(key, &self.token, Arc::clone(record), retention);
        match written.await? {
            Fence::Held => tracing::debug!(status = record.status().as_u16(), "outcome recorded"),
            Fence::Lost => telemetry::fenced(&self.intent.op),
        }
        Ok(())
    }

    /// Makes a write the store refused, in the background of the callers.
    pub(crate) async fn keep_trying(&self, unwritten: Write) {
        match unwritten {
            Write::Record(record) => self.keep_writing(record).await,
            Write::Release(tombstone) => self.keep_releasing(tombstone).await,
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
            let _ = self.engine.store.extend(key, &self.token, lease).await;
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

    async fn write_release(&self, tombstone: &Arc<Tombstone>) -> Result<Fence, StoreError> {
        // Kept through the wait the retry budget sets, so that the attempt after it still
        // reads the failures in a row.
        let wait = self.intent.retry_budget.wait_after(tombstone.failures);
        let ttl = self.engine.settings.failure_ttl.saturating_add(wait);
        let key = &self.intent.key;
        let tombstone = Arc::clone(tombstone);
        self.engine
            .store
            .release(key, &self.token, tombstone, ttl)
            .await
    }

    /// Retries a refused release until it is written or the lease, no longer renewed, has
    /// lapsed by itself: either way the intent is free for a retry then.
    async fn keep_releasing(&self, tombstone: Arc<Tombstone>) {
        let lapsed = crate::clock::later(tokio::time::Instant::now(), self.engine.settings.lease);
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
