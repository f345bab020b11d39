//! The detached execution of a claimed intent: run, keep the lease alive, record the outcome.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::inflight::Lead;
use super::recorder::{FirstOutcome, Recorded, Recorder};
use super::{Engine, Failure, Intent, Produced};
use crate::detached::Reservation;
use crate::store::{Fence, OwnerToken, ReleaseCause, Store};
use crate::telemetry;

/// The claim's duties, carried into the execution.
pub(crate) struct Claimed {
    pub(crate) token: OwnerToken,
    pub(crate) lead: Lead,
    pub(crate) reservation: Reservation,
    pub(crate) started_at_ms: u64,
}

/// Starts the execution detached from the caller; the first caller's outcome goes to `first`.
///
/// The tool is called here first: one that answers without waiting (most do) is recorded at
/// once, with no task and no copy of its future. One that waits is moved, as it is, into a
/// tracked task, which polls it again with a real waker at once, renews the lease while it
/// runs and bounds it by `max_execution`.
pub(crate) fn start<St, A, E, F>(
    engine: Arc<Engine<St>>,
    work: F,
    intent: Intent,
    claimed: Claimed,
    first: oneshot::Sender<FirstOutcome<A, E>>,
) where
    St: Store,
    F: Future<Output = Result<Produced<A>, E>> + Send + Unpin + 'static,
    A: Send + 'static,
    E: Send + 'static,
{
    let tracker = engine.runtime.detached.tracker().clone();
    // The execution logs into the request's span, which outlives the request if it must.
    let span = tracing::Span::current();
    let mut work = AssertUnwindSafe(work).catch_unwind();
    let polled = Pin::new(&mut work).poll(&mut Context::from_waker(Waker::noop()));
    if let Poll::Ready(ended) = polled {
        let recording = record(engine, intent, claimed, first, Some(ended));
        run_or_spawn(&tracker, recording.instrument(span));
        return;
    }
    let execution = async move {
        let bounded = async {
            match intent.max_execution {
                Some(limit) => tokio::time::timeout(limit, work).await.ok(),
                None => Some(work.await),
            }
        };
        let ended = keep_lease_while(&engine, &intent, &claimed.token, bounded).await;
        record(engine, intent, claimed, first, ended).await;
    };
    tracker.spawn(execution.instrument(span));
}

/// Runs `future` to its end here if it needs no waiting, else in a tracked task.
fn run_or_spawn(tracker: &TaskTracker, future: impl Future<Output = ()> + Send + 'static) {
    let mut future = Box::pin(future);
    let mut cx = Context::from_waker(Waker::noop());
    if future.as_mut().poll(&mut cx).is_pending() {
        tracker.spawn(future);
    }
}

/// How the tool's call ended: its dialect's reading, its error, or a panic; `None` when it
/// passed its bound.
type Ended<A, E> = Option<std::thread::Result<Result<Produced<A>, E>>>;

/// Records how the execution ended, then tells the waiters and the first caller.
async fn record<St, A, E>(
    engine: Arc<Engine<St>>,
    intent: Intent,
    claimed: Claimed,
    first: oneshot::Sender<FirstOutcome<A, E>>,
    ended: Ended<A, E>,
) where
    St: Store,
{
    let Claimed {
        token,
        lead,
        reservation: _reservation,
        started_at_ms,
    } = claimed;
    let recorder = Recorder {
        engine: &engine,
        intent: &intent,
        token: &token,
        started_at_ms,
    };
    let (recorded, answer) = match ended {
        None => recorder.abandoned().await,
        Some(Ok(Ok(Produced::Answered(answered)))) => recorder.answered(answered).await,
        Some(Ok(Ok(Produced::Broken))) => {
            recorder
                .failed(ReleaseCause::ResponseBody, Failure::Body)
                .await
        }
        Some(Ok(Err(error))) => {
            let (recorded, _) = recorder
                .failed::<A, E>(ReleaseCause::InnerError, Failure::Error)
                .await;
            (recorded, Err(error))
        }
        Some(Err(_panic)) => recorder.failed(ReleaseCause::Panic, Failure::Panic).await,
    };
    let Recorded { settled, unwritten } = recorded;
    let Some(unwritten) = unwritten else {
        lead.settle(settled);
        // The caller may have had its answer already (202) or gone away: either is fine.
        let _ = first.send(answer);
        return;
    };
    // The store refused the outcome: every caller waiting here gets it now, and repeats in
    // this process are answered from the slot while the write is retried.
    lead.publish(settled.clone());
    let _ = first.send(answer);
    let retrying = Box::pin(recorder.keep_trying(unwritten));
    retrying.await;
    lead.settle(settled);
}

/// Runs `work`, renewing the lease every lease/3 until it ends.
async fn keep_lease_while<St: Store, F: Future>(
    engine: &Engine<St>,
    intent: &Intent,
    token: &OwnerToken,
    work: F,
) -> F::Output {
    let lease = engine.settings.lease;
    let period = (lease / 3).max(Duration::from_millis(10));
    // The renewals are a future of their own, polled beside the work, so that a slow store
    // call never pauses the action.
    let renewals = async {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            ticks.tick().await;
            match engine.store.extend(&intent.key, token, lease).await {
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
