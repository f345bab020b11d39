//! Leading an intent: claiming it in the store, and carrying out what the store's answer
//! leaves to do (start the execution, replay, wait on another instance's, or refuse).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::execute::{self, Claimed, Started};
use super::fail_open;
use super::inflight::{Lead, Settled};
use super::recorder::{FirstOutcome, Recorder};
use super::{Engine, Failure, Intent, Outcome, Refusal, Work};
use crate::detached::Reservation;
use crate::key::IntentKey;
use crate::store::{Claim, ClaimRequest, Entry, OwnerToken, Store, StoreError};
use crate::telemetry;

/// What leading an intent came to.
pub(crate) enum Led<A, E, F> {
    Decided(Result<Outcome<A>, E>),
    /// The store released the intent while we waited on another execution: take it from the
    /// top, with the work still to run.
    Again(F),
}

fn decided<A, E, F>(outcome: Outcome<A>) -> Led<A, E, F> {
    Led::Decided(Ok(outcome))
}

fn key_reused<A, E, F>(running: bool) -> Led<A, E, F> {
    decided(Outcome::key_reused(running))
}

pub(crate) async fn lead_intent<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    lead: Lead,
) -> Led<A, E, F>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    let max = engine.settings.max_detached;
    let Some(reservation) = engine.runtime.detached.try_reserve(max) else {
        let refusing = Box::pin(at_capacity(engine, work, intent, lead));
        return refusing.await;
    };
    let leading = Leading::new(lead, reservation);
    let claimed = {
        // In a block: the request is not kept across the waits after the claim.
        let claim = leading.claim_request(engine, intent);
        let out = ClaimOut::new(engine, &intent.key, leading.token);
        let claimed = engine.store.claim(&intent.key, &claim).await;
        out.answered();
        claimed
    };
    let next = after_claim(engine, work, intent, leading, claimed);
    proceed(engine, intent, next).await
}

/// A leader's duties before its claim is answered: the slot, its place among the detached
/// executions, and the token it claims with.
pub(crate) struct Leading {
    lead: Lead,
    reservation: Reservation,
    token: OwnerToken,
    /// The time the slot was opened, read once for the claim and the execution.
    started_at_ms: u64,
}

impl Leading {
    pub(crate) fn new(lead: Lead, reservation: Reservation) -> Self {
        Self {
            started_at_ms: lead.started_at_ms(),
            lead,
            reservation,
            // The layer mints the owner token, so that a claim whose answer is lost can be
            // given back: no lease lingers that nobody owns.
            token: OwnerToken::generate(),
        }
    }

    pub(crate) fn claim_request<St>(&self, engine: &Engine<St>, intent: &Intent) -> ClaimRequest {
        ClaimRequest {
            token: self.token,
            lease: engine.settings.lease,
            scope: intent.scope,
            share: intent.share,
            fingerprint: intent.fingerprint,
            started_at_ms: self.started_at_ms,
        }
    }
}

/// What the answer to a claim leaves to do, decided without waiting.
pub(crate) enum Next<A, E, F> {
    /// Decided without running anything here.
    Decided(Outcome<A>),
    /// Another process (or layer) runs the intent: wait on it.
    Elsewhere {
        work: F,
        lead: Lead,
        started_at_ms: u64,
    },
    /// The store failed and the layer fails open: run without protection, holding the
    /// in-process slot, so that duplicates here still wait for this run's answer.
    Unprotected {
        work: F,
        lead: Lead,
        token: OwnerToken,
        started_at_ms: u64,
    },
    /// The execution started: its first answer, or the channel it comes on.
    Started(Started<A, E>, u64),
    /// The execution started and its first answer is known not to be there yet: it comes on
    /// this channel.
    Waiting(oneshot::Receiver<FirstOutcome<A, E>>, u64),
}

/// Decides on the store's answer to a leader's claim, and starts the execution if the claim
/// was acquired.
pub(crate) fn after_claim<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    leading: Leading,
    claimed: Result<Claim, StoreError>,
) -> Next<A, E, F>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    let Leading {
        lead,
        reservation,
        token,
        started_at_ms,
    } = leading;
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(error) => {
            tracing::warn!(%error, "the store could not answer a claim");
            give_back(engine, &intent.key, token);
            if engine.settings.fail_open {
                tracing::warn!("fail-open: running without protection");
                drop(reservation);
                return Next::Unprotected {
                    work,
                    lead,
                    token,
                    started_at_ms,
                };
            }
            drop(lead);
            return Next::Decided(Outcome::NotExecuted(Refusal::StoreUnavailable));
        }
    };
    match claimed {
        Claim::Completed(record) => {
            if intent.reuses_key_for(&record.fingerprint) {
                return Next::Decided(Outcome::key_reused(false));
            }
            lead.settle(Settled::Replay(Arc::clone(&record)));
            Next::Decided(Outcome::Replayed(record))
        }
        Claim::Running(info) => {
            if intent.reuses_key_for(&info.fingerprint) {
                return Next::Decided(Outcome::key_reused(true));
            }
            // Waiting on an execution elsewhere runs nothing here: it holds no place.
            drop(reservation);
            Next::Elsewhere {
                work,
                lead,
                started_at_ms: info.started_at_ms,
            }
        }
        Claim::Acquired(token) => {
            telemetry::executed(&intent.op);
            let claimed = Claimed {
                token,
                lead,
                reservation,
                started_at_ms,
            };
            let started = execute::start(engine, work, intent, claimed);
            Next::Started(started, started_at_ms)
        }
    }
}

/// Carries out what a claim's answer left to do, waiting as it must.
pub(crate) async fn proceed<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    next: Next<A, E, F>,
) -> Led<A, E, F>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    match next {
        Next::Decided(outcome) => decided(outcome),
        Next::Elsewhere {
            work,
            lead,
            started_at_ms,
        } => {
            // Boxed, as are the other paths off the common one, so that the future every
            // request carries stays small.
            let waiting = Box::pin(wait_elsewhere(engine, work, intent, lead, started_at_ms));
            waiting.await
        }
        Next::Unprotected {
            work,
            lead,
            token,
            started_at_ms,
        } => {
            let recorder = Recorder {
                engine,
                intent,
                token,
                started_at_ms,
            };
            let running = Box::pin(fail_open::run_unprotected(recorder, work, lead));
            Led::Decided(running.await)
        }
        Next::Started(started, started_at_ms) => {
            Led::Decided(first_answer(started, intent, started_at_ms).await)
        }
        Next::Waiting(answer, started_at_ms) => {
            Led::Decided(wait_for_answer(answer, intent, started_at_ms).await)
        }
    }
}

/// The first caller's answer from a started execution, if it needs no waiting: "in progress"
/// for an asynchronous intent, or the outcome the tool has already given. Otherwise the
/// channel to wait on.
pub(crate) fn answer_now<A, E>(
    started: Started<A, E>,
    intent: &Intent,
    started_at_ms: u64,
) -> Result<FirstOutcome<A, E>, oneshot::Receiver<FirstOutcome<A, E>>> {
    if intent.asynchronous {
        return Ok(Ok(in_progress(started_at_ms)));
    }
    // Most tools have answered by now: their outcome is taken with no timer armed.
    match started {
        Started::Answered(answered) => Ok(answered),
        Started::Later(mut answer) => match answer.try_recv() {
            Ok(answered) => Ok(answered),
            Err(oneshot::error::TryRecvError::Closed) => Ok(Ok(dropped_midway())),
            Err(oneshot::error::TryRecvError::Empty) => Err(answer),
        },
    }
}

/// The first caller's answer from a started execution: at once where it can be, else when
/// the execution ends or the caller's deadline comes, whichever is first.
async fn first_answer<A, E>(
    started: Started<A, E>,
    intent: &Intent,
    started_at_ms: u64,
) -> Result<Outcome<A>, E> {
    match answer_now(started, intent, started_at_ms) {
        Ok(answered) => answered,
        Err(answer) => wait_for_answer(answer, intent, started_at_ms).await,
    }
}

/// Waits for the first answer of a running execution until the caller's deadline.
async fn wait_for_answer<A, E>(
    answer: oneshot::Receiver<FirstOutcome<A, E>>,
    intent: &Intent,
    started_at_ms: u64,
) -> Result<Outcome<A>, E> {
    let waiting = Box::pin(tokio::time::timeout_at(intent.deadline, answer));
    match waiting.await {
        Ok(Ok(answered)) => answered,
        Ok(Err(_)) => Ok(dropped_midway()),
        Err(_) => Ok(in_progress(started_at_ms)),
    }
}

/// The first caller's own execution is still running at its deadline.
fn in_progress<A>(started_at_ms: u64) -> Outcome<A> {
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

/// Gives back, in the background, a lease that a failed or abandoned claim may have taken
/// under `token`. Nothing ran under it; if the store stays down, the lease lapses by itself.
fn give_back<St: Store>(engine: &Arc<Engine<St>>, key: &IntentKey, token: OwnerToken) {
    let tracker = engine.runtime.detached.tracker().clone();
    let engine = Arc::clone(engine);
    let key = *key;
    tracker.spawn(async move {
        if let Err(error) = engine.store.abandon(&key, &token).await {
            tracing::debug!(%error, "giving back a failed claim's lease failed; it will lapse");
        }
    });
}

/// A claim sent and not answered yet. A caller that goes away meanwhile (its client
/// disconnected) drops it so, and the lease the claim may have taken, under which nothing
/// will run, is given back.
struct ClaimOut<'a, St: Store> {
    engine: &'a Arc<Engine<St>>,
    key: &'a IntentKey,
    token: Option<OwnerToken>,
}

impl<'a, St: Store> ClaimOut<'a, St> {
    fn new(engine: &'a Arc<Engine<St>>, key: &'a IntentKey, token: OwnerToken) -> Self {
        Self {
            engine,
            key,
            token: Some(token),
        }
    }

    /// The store answered: what its answer leaves to do is the caller's.
    fn answered(mut self) {
        self.token = None;
    }
}

impl<St: Store> Drop for ClaimOut<'_, St> {
    fn drop(&mut self) {
        // Outside a runtime (one shutting down) nothing can be spawned: the lease lapses.
        if let Some(token) = self.token.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                give_back(self.engine, self.key, token);
            }
        }
    }
}

/// No room for another execution: a completed or running intent is still answered, since
/// that needs none; anything else is refused with nothing executed.
async fn at_capacity<St: Store, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    lead: Lead,
) -> Led<A, E, F> {
    match engine.store.get(&intent.key).await {
        Ok(Some(Entry::Completed(record))) if intent.reuses_key_for(&record.fingerprint) => {
            key_reused(false)
        }
        Ok(Some(Entry::Running(info))) if intent.reuses_key_for(&info.fingerprint) => {
            key_reused(true)
        }
        Ok(Some(Entry::Completed(record))) => {
            lead.settle(Settled::Replay(Arc::clone(&record)));
            decided(Outcome::Replayed(record))
        }
        Ok(Some(Entry::Running(info))) => {
            let waiting = Box::pin(wait_elsewhere(
                engine,
                work,
                intent,
                lead,
                info.started_at_ms,
            ));
            waiting.await
        }
        _ => {
            tracing::warn!("too many detached executions; refusing");
            decided(Outcome::NotExecuted(Refusal::TooBusy))
        }
    }
}

/// Waits for an execution that runs elsewhere (another process, or another layer sharing
/// the store), started at `started_at_ms`, polling the store until it settles or this
/// caller's deadline. Counted as coalesced.
async fn wait_elsewhere<St: Store, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    lead: Lead,
    started_at_ms: u64,
) -> Led<A, E, F> {
    telemetry::coalesced(&intent.op);
    lead.set_started_at_ms(started_at_ms);
    let mut pause = Duration::from_millis(10);
    loop {
        let now = Instant::now();
        if now >= intent.deadline {
            drop(lead);
            return decided(Outcome::InProgress {
                started_at_ms,
                duplicate: true,
            });
        }
        tokio::time::sleep_until((now + pause).min(intent.deadline)).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(100));
        match engine.store.get(&intent.key).await {
            Ok(Some(Entry::Running(_))) | Err(_) => {}
            Ok(Some(Entry::Completed(record))) => {
                // The record may be another payload's under the same explicit key.
                if intent.reuses_key_for(&record.fingerprint) {
                    drop(lead);
                    return key_reused(false);
                }
                lead.settle(Settled::Replay(Arc::clone(&record)));
                return decided(Outcome::Replayed(record));
            }
            Ok(Some(Entry::Failed(tombstone))) if tombstone.failed_at_ms >= started_at_ms => {
                drop(lead);
                return decided(Outcome::Failed {
                    failure: Failure::of(&tombstone),
                    answer: None,
                    freed_in_s: None,
                });
            }
            Ok(_) => {
                drop(lead);
                return Led::Again(work);
            }
        }
    }
}
