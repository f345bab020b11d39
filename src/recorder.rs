//! Recording an execution's outcome: kept, kept without its response, or released, with the
//! write retried while the store refuses it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{response, Response};

use crate::answer::{self, Failure};
use crate::body::ResponseBody;
use crate::classify::Verdict;
use crate::clock::now_ms;
use crate::guard::guarded;
use crate::inflight::Settled;
use crate::layer::Shared;
use crate::protect::Intent;
use crate::replay::{storable_headers, written};
use crate::store::{
    Fence, KeptResponse, Omission, OwnerToken, Record, ReleaseCause, Store, StoreError,
    StoredResponse, Tombstone,
};
use crate::telemetry;

/// What the first caller receives: the execution's own response, or its error.
pub(crate) type FirstAnswer<B, E> = Result<Response<ResponseBody<B>>, E>;

/// How long a completion that the store refuses is retried before it is given up (and logged).
const COMPLETION_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// Writes an execution's outcome to the store.
pub(crate) struct Recorder<'a, St> {
    pub(crate) shared: &'a Shared<St>,
    pub(crate) intent: &'a Intent,
    pub(crate) token: &'a OwnerToken,
    pub(crate) started_at_ms: u64,
    /// A record the store refused at the first attempt, still to be written.
    pub(crate) unwritten: Mutex<Option<Arc<Record>>>,
    /// A release the store refused at the first attempt, still to be written.
    pub(crate) unreleased: Mutex<Option<Arc<Tombstone>>>,
}

impl<St: Store> Recorder<'_, St> {
    /// The classification rule's verdict. The tool has answered: a rule that panics leaves
    /// the outcome unknown, which is recorded, never released into a second run.
    fn classify(&self, parts: &response::Parts) -> Verdict {
        let rule = &self.shared.settings.classify;
        guarded("classify", || rule.classify(parts.status, &parts.headers))
            .unwrap_or(Verdict::Unclassified)
    }

    /// A response read whole: kept or released as the predicate says.
    pub(crate) async fn whole<B, E>(
        &self,
        parts: response::Parts,
        body: Bytes,
    ) -> (Settled, FirstAnswer<B, E>) {
        let stored = StoredResponse {
            status: parts.status,
            headers: storable_headers(&parts.headers),
            body: body.clone(),
        };
        let settled = self.settle(&parts, Some(stored)).await;
        let response = Response::from_parts(parts, ResponseBody::full(body));
        (settled, Ok(response))
    }

    /// A response over the stored-response cap: the action ran, its response is not kept.
    pub(crate) async fn partial<B, E>(
        &self,
        parts: response::Parts,
        head: Bytes,
        tail: Pin<Box<B>>,
    ) -> (Settled, FirstAnswer<B, E>) {
        let settled = self.settle(&parts, None).await;
        let response = Response::from_parts(parts, ResponseBody::chained(head, tail));
        (settled, Ok(response))
    }

    /// Records what the verdict on a response says: the whole response where it was read
    /// whole (`stored`) and may be kept, else that the action ran; or a release.
    async fn settle(&self, parts: &response::Parts, stored: Option<StoredResponse>) -> Settled {
        let status = parts.status;
        let omitted = |why| KeptResponse::Omitted { status, why };
        let kept = match (self.classify(parts), stored) {
            (Verdict::Keep, Some(stored)) => KeptResponse::Full(stored),
            (Verdict::Keep, None) => omitted(Omission::TooLarge),
            (Verdict::KeepStatus, _) => omitted(Omission::NoStore),
            (Verdict::Unclassified, _) => omitted(Omission::Unclassified),
            (Verdict::Release(cause), stored) => {
                let wait = retry_after_s(&parts.headers);
                self.release(Some(status), cause, wait).await;
                return Settled::Failed {
                    response: stored.map(Arc::new),
                    failure: Failure::released(Some(status), cause, wait),
                };
            }
        };
        Settled::Replay(self.complete(kept).await)
    }

    /// The execution passed its bound and was dropped: recorded as run with an unknown
    /// outcome, so that it never runs again by itself.
    pub(crate) async fn abandoned<B, E>(&self) -> (Settled, FirstAnswer<B, E>) {
        tracing::warn!("the execution passed its max_execution bound and was abandoned");
        let record = self.complete(KeptResponse::Abandoned).await;
        (
            Settled::Replay(record),
            Ok(written(answer::abandoned(&self.intent.key))),
        )
    }

    /// The execution produced no usable response.
    pub(crate) async fn failed<B, E>(
        &self,
        cause: ReleaseCause,
        failure: Failure,
    ) -> (Settled, FirstAnswer<B, E>) {
        self.release(None, cause, None).await;
        let settled = Settled::Failed {
            response: None,
            failure,
        };
        (
            settled,
            Ok(written(answer::attempt_failed(&self.intent.key, failure))),
        )
    }

    /// Stores the record; one the store refuses is left for [`Recorder::keep_writing`], so that
    /// the callers need not wait for the store to come back.
    async fn complete(&self, response: KeptResponse) -> Arc<Record> {
        let completed_at_ms = now_ms();
        let record = Arc::new(Record {
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            started_at_ms: self.started_at_ms,
            completed_at_ms,
            expires_at_ms: completed_at_ms.saturating_add(self.intent.retention.as_millis() as u64),
            response,
        });
        if let Err(error) = self.write(&record).await {
            tracing::warn!(%error, "recording the outcome failed; retrying in the background");
            *self
                .unwritten
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&record));
        }
        record
    }

    /// One attempt at writing the record; a fence is final, so only an error is retried.
    async fn write(&self, record: &Arc<Record>) -> Result<(), StoreError> {
        let store = &self.shared.store;
        let key = &self.intent.key;
        let retention = self.intent.retention;
        match store
            .complete(key, self.token, Arc::clone(record), retention)
            .await?
        {
            Fence::Held => tracing::debug!(status = record.status().as_u16(), "outcome recorded"),
            Fence::Lost => telemetry::fenced(&self.intent.op),
        }
        Ok(())
    }

    /// Retries a refused record, renewing the lease between attempts, for up to
    /// [`COMPLETION_RETRY_WINDOW`]. Given up, the lease lapses and a later repeat may run the
    /// action again: counted (`idempotency_completions_abandoned_total`) and logged.
    pub(crate) async fn keep_writing(&self, record: Arc<Record>) {
        let give_up = tokio::time::Instant::now() + COMPLETION_RETRY_WINDOW;
        // Each attempt renews the lease first, so attempts never wait longer than a third of it.
        let longest = (self.shared.settings.lease / 3)
            .clamp(Duration::from_millis(10), Duration::from_secs(5));
        let mut backoff = Duration::from_millis(50).min(longest);
        loop {
            tokio::time::sleep(backoff).await;
            let key = &self.intent.key;
            let lease = self.shared.settings.lease;
            let _ = self.shared.store.extend(key, self.token, lease).await;
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

    /// Releases the key, leaving a tombstone for the status path.
    pub(crate) async fn release(
        &self,
        status: Option<http::StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) {
        let tombstone = Arc::new(Tombstone {
            scope: self.intent.scope,
            fingerprint: self.intent.fingerprint,
            failed_at_ms: now_ms(),
            status,
            cause,
            retry_after_s,
        });
        telemetry::released(&self.intent.op, cause);
        if let Err(error) = self.write_release(&tombstone).await {
            tracing::warn!(%error, "releasing the intent failed; retrying in the background");
            *self
                .unreleased
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(tombstone);
        }
    }

    async fn write_release(&self, tombstone: &Arc<Tombstone>) -> Result<Fence, StoreError> {
        let ttl = self.shared.settings.failure_ttl;
        let key = &self.intent.key;
        let tombstone = Arc::clone(tombstone);
        self.shared
            .store
            .release(key, self.token, tombstone, ttl)
            .await
    }

    /// Retries a refused release until it is written or the lease, no longer renewed, has
    /// lapsed by itself: either way the intent is free for a retry then.
    pub(crate) async fn keep_releasing(&self, tombstone: Arc<Tombstone>) {
        let lapsed = tokio::time::Instant::now() + self.shared.settings.lease;
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

/// The wait a response asks for in seconds (`retry-after: 7`; the date form is not read).
fn retry_after_s(headers: &http::HeaderMap) -> Option<u64> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse().ok()
}
