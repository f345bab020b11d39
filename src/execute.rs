//! The detached execution of a claimed intent: run, keep the lease alive, record the outcome.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http::{response, Request, Response};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::sync::{oneshot, OwnedSemaphorePermit};
use tracing::Instrument;

use crate::answer::{self, Failure};
use crate::body::ResponseBody;
use crate::bounds::{Keepable, Tool};
use crate::classify::Verdict;
use crate::clock::now_ms;
use crate::guard::guarded;
use crate::inflight::{Lead, Settled};
use crate::layer::Shared;
use crate::protect::Intent;
use crate::replay::{storable_headers, written};
use crate::store::{
    Fence, KeptResponse, Omission, OwnerToken, Record, ReleaseCause, Store, StoreError,
    StoredResponse, Tombstone,
};
use crate::telemetry;

/// How long a completion that the store refuses is retried before it is given up (and logged).
const COMPLETION_RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// What the first caller receives: the execution's own response, or its error.
pub(crate) type FirstAnswer<B, E> = Result<Response<ResponseBody<B>>, E>;

/// A response read as far as the stored-response cap allows.
enum Buffered<B> {
    Whole {
        parts: response::Parts,
        body: Bytes,
    },
    /// Over the cap: what was read, and the rest still to stream.
    Partial {
        parts: response::Parts,
        head: Bytes,
        tail: Pin<Box<B>>,
    },
    /// The body failed while being read.
    Broken,
}

/// The claim's duties, carried into the execution.
pub(crate) struct Claimed {
    pub(crate) token: OwnerToken,
    pub(crate) lead: Lead,
    pub(crate) permit: OwnedSemaphorePermit,
    pub(crate) started_at_ms: u64,
}

/// Starts the execution detached from the caller (a tracked task, unless it finished at its
/// first poll); the first caller's answer goes to `first`.
pub(crate) fn start<S, St, B, ResBody>(
    shared: Arc<Shared<St>>,
    mut inner: S,
    request: Request<B>,
    intent: Intent,
    claimed: Claimed,
    first: oneshot::Sender<FirstAnswer<ResBody, S::Error>>,
) where
    S: Tool<B, ResBody>,
    B: Send + 'static,
    ResBody: Keepable,
    St: Store,
{
    let tracker = shared.detached.tracker().clone();
    // The execution logs into the request's span, which outlives the request if it must.
    let span = tracing::Span::current();
    let execution = async move {
        let Claimed {
            token,
            lead,
            permit: _permit,
            started_at_ms,
        } = claimed;
        let limit = shared.settings.response_limit;
        let work = AssertUnwindSafe(async move {
            let response = inner.call(request).await?;
            Ok(buffer(response, limit).await)
        })
        .catch_unwind();
        let bounded = async {
            match intent.max_execution {
                Some(limit) => tokio::time::timeout(limit, work).await.ok(),
                None => Some(work.await),
            }
        };
        let ended = keep_lease_while(&shared, &intent, &token, bounded).await;
        let recorder = Recorder {
            shared: &shared,
            intent: &intent,
            token: &token,
            started_at_ms,
            unwritten: Mutex::new(None),
        };
        let (settled, answer) = match ended {
            None => recorder.abandoned().await,
            Some(ended) => match ended {
                Ok(Ok(Buffered::Whole { parts, body })) => recorder.whole(parts, body).await,
                Ok(Ok(Buffered::Partial { parts, head, tail })) => {
                    recorder.partial(parts, head, tail).await
                }
                Ok(Ok(Buffered::Broken)) => {
                    recorder
                        .failed(ReleaseCause::ResponseBody, Failure::Body)
                        .await
                }
                Ok(Err(error)) => {
                    recorder.release(None, ReleaseCause::InnerError, None).await;
                    let settled = Settled::Failed {
                        response: None,
                        failure: Failure::Error,
                    };
                    (settled, Err(error))
                }
                Err(_panic) => recorder.failed(ReleaseCause::Panic, Failure::Panic).await,
            },
        };
        let unwritten = recorder
            .unwritten
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match unwritten {
            None => {
                lead.settle(settled);
                // The caller may have had its answer already (202) or gone away: either is fine.
                let _ = first.send(answer);
            }
            Some(record) => {
                // The store refused the record: every caller waiting here gets the outcome now,
                // and repeats in this process are answered from the slot while the write is
                // retried, the lease kept alive.
                lead.publish(settled.clone());
                let _ = first.send(answer);
                recorder.keep_writing(record).await;
                lead.settle(settled);
            }
        }
    };
    // One poll here first: a tool that answers without waiting is done before a task would
    // have been scheduled, and there is nothing left to detach. Anything that waits is moved,
    // as it is, into a tracked task, which polls it again with a real waker at once.
    let mut execution = Box::pin(execution.instrument(span));
    let mut cx = Context::from_waker(Waker::noop());
    if execution.as_mut().poll(&mut cx).is_pending() {
        tracker.spawn(execution);
    }
}

/// Runs `work`, renewing the lease every lease/3 until it ends.
async fn keep_lease_while<St: Store, F: Future>(
    shared: &Shared<St>,
    intent: &Intent,
    token: &OwnerToken,
    work: F,
) -> F::Output {
    let lease = shared.settings.lease;
    let period = (lease / 3).max(Duration::from_millis(10));
    // The renewals are a future of their own, polled beside the work, so that a slow store
    // call never pauses the action.
    let renewals = async {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticks.tick().await;
            match shared.store.extend(&intent.key, token, lease).await {
                Ok(Fence::Held) => {}
                Ok(Fence::Lost) => {
                    telemetry::lease_lost(&intent.op);
                    // Nothing more to renew: another owner holds the intent now, or nobody.
                    std::future::pending::<()>().await;
                }
                Err(error) => tracing::warn!(%error, "lease renewal failed"),
            }
        }
    };
    tokio::pin!(work);
    tokio::pin!(renewals);
    tokio::select! {
        biased;
        output = &mut work => output,
        never = &mut renewals => never,
    }
}

/// Reads a response body up to `limit` bytes, without copying a body that came in one piece.
async fn buffer<B>(response: Response<B>, limit: usize) -> Buffered<B>
where
    B: Body<Data = Bytes>,
{
    let (parts, body) = response.into_parts();
    // Pinned in a box so that, over the cap, the partly read body can move to the caller.
    let mut body = Box::pin(body);
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut length = 0;
    loop {
        match body.frame().await {
            None => {
                return Buffered::Whole {
                    parts,
                    body: concat(chunks, length),
                }
            }
            Some(Ok(frame)) => {
                // Trailers are not kept.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                length += data.len();
                chunks.push(data);
                if length > limit {
                    return Buffered::Partial {
                        parts,
                        head: concat(chunks, length),
                        tail: body,
                    };
                }
            }
            Some(Err(_)) => return Buffered::Broken,
        }
    }
}

/// The wait a response asks for in seconds (`retry-after: 7`; the date form is not read).
fn retry_after_s(headers: &http::HeaderMap) -> Option<u64> {
    let value = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse().ok()
}

fn concat(mut chunks: Vec<Bytes>, length: usize) -> Bytes {
    if chunks.len() <= 1 {
        return chunks.pop().unwrap_or_default();
    }
    let mut joined = BytesMut::with_capacity(length);
    for chunk in chunks {
        joined.extend_from_slice(&chunk);
    }
    joined.freeze()
}

/// Writes an execution's outcome to the store.
struct Recorder<'a, St> {
    shared: &'a Shared<St>,
    intent: &'a Intent,
    token: &'a OwnerToken,
    started_at_ms: u64,
    /// A record the store refused at the first attempt, still to be written.
    unwritten: Mutex<Option<Arc<Record>>>,
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
    async fn whole<B, E>(
        &self,
        parts: response::Parts,
        body: Bytes,
    ) -> (Settled, FirstAnswer<B, E>) {
        let stored = StoredResponse {
            status: parts.status,
            headers: storable_headers(&parts.headers),
            body: body.clone(),
        };
        let settled = match self.classify(&parts) {
            Verdict::Keep => Settled::Replay(self.complete(KeptResponse::Full(stored)).await),
            verdict @ (Verdict::KeepStatus | Verdict::Unclassified) => {
                let why = match verdict {
                    Verdict::KeepStatus => Omission::NoStore,
                    _ => Omission::Unclassified,
                };
                let kept = KeptResponse::Omitted {
                    status: parts.status,
                    why,
                };
                Settled::Replay(self.complete(kept).await)
            }
            Verdict::Release(cause) => {
                let wait = retry_after_s(&parts.headers);
                self.release(Some(parts.status), cause, wait).await;
                Settled::Failed {
                    response: Some(Arc::new(stored)),
                    failure: Failure::Status(parts.status, wait),
                }
            }
        };
        (
            settled,
            Ok(Response::from_parts(parts, ResponseBody::full(body))),
        )
    }

    /// A response over the stored-response cap: the action ran, its response is not kept.
    async fn partial<B, E>(
        &self,
        parts: response::Parts,
        head: Bytes,
        tail: Pin<Box<B>>,
    ) -> (Settled, FirstAnswer<B, E>) {
        let settled = match self.classify(&parts) {
            verdict @ (Verdict::Keep | Verdict::KeepStatus | Verdict::Unclassified) => {
                let why = match verdict {
                    Verdict::KeepStatus => Omission::NoStore,
                    Verdict::Unclassified => Omission::Unclassified,
                    _ => Omission::TooLarge,
                };
                let kept = KeptResponse::Omitted {
                    status: parts.status,
                    why,
                };
                Settled::Replay(self.complete(kept).await)
            }
            Verdict::Release(cause) => {
                let wait = retry_after_s(&parts.headers);
                self.release(Some(parts.status), cause, wait).await;
                Settled::Failed {
                    response: None,
                    failure: Failure::Status(parts.status, wait),
                }
            }
        };
        let response = Response::from_parts(parts, ResponseBody::chained(head, tail));
        (settled, Ok(response))
    }

    /// The execution passed its bound and was dropped: recorded as run with an unknown
    /// outcome, so that it never runs again by itself.
    async fn abandoned<B, E>(&self) -> (Settled, FirstAnswer<B, E>) {
        tracing::warn!("the execution passed its max_execution bound and was abandoned");
        let record = self.complete(KeptResponse::Abandoned).await;
        (
            Settled::Replay(record),
            Ok(written(answer::abandoned(&self.intent.key))),
        )
    }

    /// The execution produced no usable response.
    async fn failed<B, E>(
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

    /// Stores the record, retrying a store that fails while keeping the lease alive.
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
    async fn keep_writing(&self, record: Arc<Record>) {
        let give_up = tokio::time::Instant::now() + COMPLETION_RETRY_WINDOW;
        let mut backoff = Duration::from_millis(50);
        loop {
            tokio::time::sleep(backoff).await;
            let key = &self.intent.key;
            let lease = self.shared.settings.lease;
            let _ = self.shared.store.extend(key, self.token, lease).await;
            match self.write(&record).await {
                Ok(()) => return,
                Err(error) if tokio::time::Instant::now() < give_up => {
                    tracing::warn!(%error, "recording the outcome failed; retrying");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
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
    async fn release(
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
        let key = &self.intent.key;
        telemetry::released(&self.intent.op, cause);
        let ttl = self.shared.settings.failure_ttl;
        for attempt in 0..3u32 {
            match self
                .shared
                .store
                .release(key, self.token, Arc::clone(&tombstone), ttl)
                .await
            {
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(%error, attempt, "releasing the intent failed");
                    tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
                }
            }
        }
        // The lease is no longer renewed, so the intent frees itself when it lapses.
    }
}
