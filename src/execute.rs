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

use crate::answer::Failure;
use crate::bounds::{Keepable, Tool};
use crate::inflight::{Lead, Settled};
use crate::layer::Shared;
use crate::protect::Intent;
use crate::recorder::{FirstAnswer, Recorder};
use crate::store::{Fence, OwnerToken, ReleaseCause, Store};
use crate::telemetry;

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
            unreleased: Mutex::new(None),
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
        let unreleased = recorder
            .unreleased
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if unwritten.is_none() && unreleased.is_none() {
            lead.settle(settled);
            // The caller may have had its answer already (202) or gone away: either is fine.
            let _ = first.send(answer);
            return;
        }
        // The store refused the outcome: every caller waiting here gets it now, and repeats
        // in this process are answered from the slot while the write is retried.
        lead.publish(settled.clone());
        let _ = first.send(answer);
        if let Some(record) = unwritten {
            recorder.keep_writing(record).await;
        }
        if let Some(tombstone) = unreleased {
            recorder.keep_releasing(tombstone).await;
        }
        lead.settle(settled);
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
