//! The detached execution of a claimed intent: run, keep the lease alive, record the outcome.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::detached::Reservation;
use super::inflight::{Lead, Settlement};
use super::intent::Intent;
use super::outcome::{Failure, Outcome};
use super::recorder::{Plan, Recorder, RecorderParts, Write};
use super::relay::{self, Hold};
use super::transactional::{self, Settling};
use super::{Engine, Work};
use crate::store::{Fence, OwnerToken, Store, StoreError, Transactional};
use crate::telemetry;

/// The claim's duties, carried into the execution.
pub(crate) struct ClaimTicket {
    pub(crate) token: OwnerToken,
    pub(crate) lead: Lead,
    pub(crate) reservation: Reservation,
    pub(crate) started_at_ms: u64,
    /// The intent's failures in a row before this attempt (from the tombstone the claim
    /// replaced).
    pub(crate) failures_before: u32,
    /// The intent's story before this attempt (from the same tombstone).
    pub(crate) history: Vec<crate::store::Transition>,
    /// Begun, in transactional mode: the outcome is committed in it.
    pub(crate) transaction: Option<Arc<dyn Transactional>>,
}

/// What starting an execution gives its first caller.
pub(crate) enum Launch<A, E> {
    /// The tool answered at once and its outcome is settled (or its write is being retried):
    /// the first caller's answer.
    Answered(Result<Outcome<A>, E>),
    /// The answer comes later, on this channel.
    Later(oneshot::Receiver<Result<Outcome<A>, E>>),
}

/// Starts the execution detached from the caller.
///
/// The tool is called here first: one that answers without waiting (most do) is recorded at
/// once, with no task, no channel and no copy of its future or its intent, and only the
/// store's write is boxed (a store that makes it wait gets it moved, as it is, into a tracked
/// task). A tool that waits is moved, as it is, into a tracked task, which polls it again with
/// a real waker at once, renews the lease while it runs and bounds it by `max_execution`. A
/// transactional execution always runs in its task: its commit waits on the database.
pub(crate) fn start<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    claimed: ClaimTicket,
) -> Launch<A, E>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    let ClaimTicket {
        token,
        lead,
        reservation,
        started_at_ms,
        failures_before,
        history,
        transaction,
    } = claimed;
    let recorder = Recorder {
        engine,
        intent,
        token,
        started_at_ms,
        failures_before,
        history: &history,
    };
    let after = Settle {
        lead,
        _reservation: reservation,
    };
    let mut work = AssertUnwindSafe(work).catch_unwind();
    let polled = match transaction {
        None => Pin::new(&mut work).poll(&mut Context::from_waker(Waker::noop())),
        Some(_) => Poll::Pending,
    };
    if let Poll::Ready(ended) = polled {
        let Plan {
            write,
            settled,
            answer,
        } = recorder.plan(Some(ended));
        if crate::store::answers_at_once(&engine.store) {
            let written = answered_at_once(recorder.attempt(&write));
            if let Some(retrying) = after.written(written, || recorder.to_owned(), write, settled) {
                detach(engine, retrying);
            }
            return Launch::Answered(answer);
        }
        // The execution logs into the request's span, which outlives the request if it must.
        let span = tracing::Span::current();
        let owned = recorder.to_owned();
        let mut attempt = Box::pin(
            async move {
                let written = owned.recorder().attempt(&write).await;
                (owned, write, written)
            }
            .instrument(span),
        );
        let polled = attempt
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        if let Poll::Ready((owned, write, written)) = polled {
            if let Some(retrying) = after.written(written, move || owned, write, settled) {
                detach(engine, retrying);
            }
            return Launch::Answered(answer);
        }
        let (first, later) = oneshot::channel();
        engine.runtime.detached.tracker().spawn(async move {
            let (owned, write, written) = attempt.await;
            settle_after_wait(after, owned, write, settled, written, first, answer).await;
        });
        return Launch::Later(later);
    }
    let (first, later) = oneshot::channel();
    let owned = recorder.to_owned();
    let execution = async move {
        let recorder = owned.recorder();
        let bounded = async {
            match recorder.intent.max_execution {
                Some(limit) => tokio::time::timeout(limit, work).await.ok(),
                None => Some(work.await),
            }
        };
        let ended =
            keep_lease_while(recorder.engine, recorder.intent, &recorder.token, bounded).await;
        let plan = recorder.plan(ended);
        let (plan, written) = match transaction {
            None => {
                let written = recorder.attempt(&plan.write).await;
                (plan, written)
            }
            Some(transaction) => {
                match transactional::settle(&recorder, &*transaction, plan).await {
                    Settling::Written(plan, written) => (plan, written),
                    Settling::Left(answer) => {
                        // Unsettled, the slot sends the waiters back to the store.
                        drop(after);
                        let _ = first.send(answer);
                        return;
                    }
                }
            }
        };
        let Plan {
            write,
            settled,
            answer,
        } = plan;
        settle_after_wait(after, owned, write, settled, written, first, answer).await;
    };
    detach(engine, execution);
    Launch::Later(later)
}

/// The first caller's answer from a started execution, if it needs no waiting: "in progress"
/// for an asynchronous intent, or the outcome the tool has already given. Otherwise the
/// channel to wait on.
fn answer_now<A, E>(started: Launch<A, E>, intent: &Intent, started_at_ms: u64) -> Launch<A, E> {
    if intent.asynchronous {
        return Launch::Answered(Ok(still_running(started_at_ms)));
    }
    // Most tools have answered by now: their outcome is taken with no timer armed.
    match started {
        Launch::Answered(answered) => Launch::Answered(answered),
        Launch::Later(mut answer) => match answer.try_recv() {
            Ok(answered) => Launch::Answered(answered),
            Err(oneshot::error::TryRecvError::Closed) => Launch::Answered(Ok(dropped_midway())),
            Err(oneshot::error::TryRecvError::Empty) => Launch::Later(answer),
        },
    }
}

/// The first caller's answer from a started execution: at once where it can be, else when
/// the execution ends or the caller's deadline comes, whichever is first.
pub(super) async fn first_answer<A, E>(
    started: Launch<A, E>,
    intent: &Intent,
    started_at_ms: u64,
    hold: Option<Hold>,
) -> Result<Outcome<A>, E> {
    match answer_now(started, intent, started_at_ms) {
        Launch::Answered(answered) => answered,
        Launch::Later(answer) => wait_for_answer(answer, intent, started_at_ms, hold).await,
    }
}

/// Waits for the first answer of a running execution until the caller's deadline, held back
/// while the execution waits on this caller (`hold`).
async fn wait_for_answer<A, E>(
    answer: oneshot::Receiver<Result<Outcome<A>, E>>,
    intent: &Intent,
    started_at_ms: u64,
    hold: Option<Hold>,
) -> Result<Outcome<A>, E> {
    let waiting = Box::pin(async move {
        tokio::select! {
            answered = answer => Some(answered),
            () = relay::past(intent.deadline, hold.as_ref()) => None,
        }
    });
    match waiting.await {
        Some(Ok(answered)) => answered,
        Some(Err(_)) => Ok(dropped_midway()),
        None => Ok(still_running(started_at_ms)),
    }
}

/// The first caller's own execution is still running at its deadline.
fn still_running<A>(started_at_ms: u64) -> Outcome<A> {
    Outcome::InProgress {
        started_at_ms,
        duplicate: false,
    }
}

/// The execution ended without a word: it was dropped mid-way, so it may have run.
fn dropped_midway<A>() -> Outcome<A> {
    Outcome::Failed {
        failure: Failure::Panic,
        answer: None,
        freed_in_s: None,
    }
}

/// Takes the answer of a store call made in place. A call that waits although its store said
/// it answers at once is dropped where it stands and taken as the store's error.
fn answered_at_once<T>(call: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    call.now_or_never().unwrap_or_else(|| {
        tracing::warn!("a store that answers at once made a call wait; it is taken as failed");
        Err(StoreError::new(
            "the store made a call wait, though it answers at once",
        ))
    })
}

/// Runs `work` in a task tracked for shutdown, in the request's span, which outlives the
/// request if it must.
fn detach<St>(engine: &Engine<St>, work: impl Future<Output = ()> + Send + 'static) {
    let span = tracing::Span::current();
    engine
        .runtime
        .detached
        .tracker()
        .spawn(work.instrument(span));
}

/// After a first write that had to wait: tells the waiters, then the first caller, then
/// retries the write if the store refused it.
async fn settle_after_wait<St: Store, A, E>(
    after: Settle,
    owned: RecorderParts<St>,
    write: Write,
    settled: Settlement,
    written: Result<(), StoreError>,
    first: oneshot::Sender<Result<Outcome<A>, E>>,
    answer: Result<Outcome<A>, E>,
) {
    let retrying = after.written(written, move || owned, write, settled);
    // The caller may have had its answer already (202) or gone away: either is fine.
    let _ = first.send(answer);
    if let Some(retrying) = retrying {
        retrying.await;
    }
}

/// What is left to do once the store has answered the first write of an outcome.
struct Settle {
    lead: Lead,
    /// Held until the outcome is settled: the execution counts until then.
    _reservation: Reservation,
}

impl Settle {
    /// Tells the waiters; the first caller is told next, by the caller. A write the store
    /// refused is retried by the future returned, while every caller waiting here has the
    /// outcome, and repeats in this process are answered from the slot. `owned` gives the
    /// retry its recorder, made only if the write was refused.
    fn written<St: Store>(
        self,
        written: Result<(), StoreError>,
        owned: impl FnOnce() -> RecorderParts<St>,
        write: Write,
        settled: Settlement,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let Self { lead, _reservation } = self;
        if written.is_ok() {
            lead.settle(settled);
            return None;
        }
        let owned = owned();
        lead.publish(unwritten(
            &write,
            settled.clone(),
            owned.recorder().engine.settings.lease,
        ));
        Some(async move {
            let _reservation = _reservation;
            owned.recorder().keep_trying(write).await;
            lead.settle(settled);
        })
    }
}

/// What repeats in this process are told while a write the store refused is retried. A record
/// is the outcome all the same. A release is not: the store holds the key until the release is
/// written or the lease, no longer renewed, lapses, so a repeat meanwhile does not run the
/// action, and is told that it failed and how long until a repeat runs it again.
fn unwritten(write: &Write, settled: Settlement, lease: Duration) -> Settlement {
    match (write, settled) {
        (Write::Release(_), Settlement::Failed { failure, .. }) => Settlement::Failed {
            response: None,
            failure,
            freed_in_s: Some((lease.as_secs() + u64::from(lease.subsec_nanos() > 0)).max(1)),
        },
        (_, settled) => settled,
    }
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
        let first = crate::clock::later(tokio::time::Instant::now(), period);
        let mut ticks = tokio::time::interval_at(first, period);
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
