//! One execution per intent: join the one running in this process, wait on one running
//! elsewhere, answer from a kept record, or claim the intent and start the execution.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::execute::{self, Claimed, Started};
use super::inflight::{Lead, Role, Settled, Waited};
use super::{Engine, Failure, Intent, Outcome, Produced, Refusal, Unprotected};
use crate::clock::now_ms;
use crate::key::IntentKey;
use crate::store::{Claim, ClaimRequest, Entry, OwnerToken, Store};
use crate::telemetry;

/// What leading an intent came to.
enum Led<A, E, F> {
    Decided(Result<Outcome<A>, E>),
    /// The store released the intent while we waited on another execution: take it from the
    /// top, with the work still to run.
    Again(F),
}

fn decided<A, E, F>(outcome: Outcome<A>) -> Led<A, E, F> {
    Led::Decided(Ok(outcome))
}

fn key_reused<A, E, F>(running: bool) -> Led<A, E, F> {
    decided(Outcome::NotExecuted(Refusal::KeyReused { running }))
}

/// Runs `work` once for the intent, or answers this caller from the execution that does.
pub(crate) async fn coalesce_or_execute<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    mut work: F,
) -> Result<Outcome<A>, E>
where
    St: Store,
    F: Future<Output = Result<Produced<A>, E>> + Send + Unpin + 'static,
    A: Send + 'static,
    E: Send + 'static,
{
    loop {
        // Matched in a statement of its own, so that the role is not kept across the lead's
        // wait.
        let inflight = &engine.runtime.inflight;
        let lead = match inflight.join(intent.key, intent.fingerprint, now_ms()) {
            Role::Follower(slot) => {
                if intent.reuses_key_for(&slot.fingerprint) {
                    return Ok(Outcome::NotExecuted(Refusal::KeyReused { running: true }));
                }
                telemetry::coalesced(&intent.op);
                let waiting = Box::pin(slot.wait_until(intent.deadline));
                match waiting.await {
                    Waited::Redo => continue,
                    Waited::Settled(settled) => return Ok(settled_outcome(settled)),
                    Waited::Deadline => {
                        return Ok(Outcome::InProgress {
                            started_at_ms: slot.started_at_ms(),
                            duplicate: true,
                        })
                    }
                }
            }
            Role::Leader(lead) => lead,
        };
        match lead_intent(engine, work, intent, lead).await {
            Led::Decided(outcome) => return outcome,
            Led::Again(unrun) => work = unrun,
        }
    }
}

async fn lead_intent<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    work: F,
    intent: &Intent,
    lead: Lead,
) -> Led<A, E, F>
where
    St: Store,
    F: Future<Output = Result<Produced<A>, E>> + Send + Unpin + 'static,
    A: Send + 'static,
    E: Send + 'static,
{
    let key = &intent.key;
    let max = engine.settings.max_detached;
    let Some(reservation) = engine.runtime.detached.try_reserve(max) else {
        let refusing = Box::pin(at_capacity(engine, work, intent, lead));
        return refusing.await;
    };
    // The time the slot was opened, read once for both.
    let started_at_ms = lead.started_at_ms();
    // The layer mints the owner token, so that a claim whose answer is lost can be given
    // back: no lease lingers that nobody owns.
    let token = OwnerToken::generate();
    let claimed = {
        // In a block: the request is not kept across the waits after the claim.
        let claim = ClaimRequest {
            token,
            lease: engine.settings.lease,
            scope: intent.scope,
            share: intent.share,
            fingerprint: intent.fingerprint,
            started_at_ms,
        };
        engine.store.claim(key, &claim).await
    };
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(error) => {
            drop(lead);
            tracing::warn!(%error, "the store could not answer a claim");
            give_back(engine, key, token);
            if engine.settings.fail_open {
                tracing::warn!("fail-open: running without protection");
                // Boxed, as are the other paths off the common one, so that the future every
                // request carries stays small.
                let running = Box::pin(run_unprotected(work));
                return Led::Decided(running.await);
            }
            return decided(Outcome::NotExecuted(Refusal::StoreUnavailable));
        }
    };
    match claimed {
        Claim::Completed(record) => {
            if intent.reuses_key_for(&record.fingerprint) {
                return key_reused(false);
            }
            lead.settle(Settled::Replay(Arc::clone(&record)));
            decided(Outcome::Replayed(record))
        }
        Claim::Running(info) => {
            if intent.reuses_key_for(&info.fingerprint) {
                return key_reused(true);
            }
            // Waiting on an execution elsewhere runs nothing here: it holds no place.
            drop(reservation);
            let waiting = Box::pin(wait_elsewhere(
                engine,
                work,
                intent,
                lead,
                info.started_at_ms,
            ));
            waiting.await
        }
        Claim::Acquired(token) => {
            telemetry::executed(&intent.op);
            let claimed = Claimed {
                token,
                lead,
                reservation,
                started_at_ms,
            };
            let started = execute::start(Arc::clone(engine), work, intent.clone(), claimed);
            let in_progress = || Outcome::InProgress {
                started_at_ms,
                duplicate: false,
            };
            if intent.asynchronous {
                return decided(in_progress());
            }
            // Most tools have answered by now: their outcome is taken with no timer armed.
            let answered = match started {
                Started::Answered(answered) => Ok(Ok(answered)),
                Started::Later(mut answer) => match answer.try_recv() {
                    Ok(answered) => Ok(Ok(answered)),
                    Err(oneshot::error::TryRecvError::Closed) => Ok(Err(())),
                    Err(oneshot::error::TryRecvError::Empty) => {
                        let waiting = Box::pin(tokio::time::timeout_at(intent.deadline, answer));
                        let waited = waiting.await;
                        waited.map(|received| received.map_err(|_| ()))
                    }
                },
            };
            match answered {
                Ok(Ok(answered)) => Led::Decided(answered),
                // The execution ended without a word: it was dropped mid-way, so it may have
                // run.
                Ok(Err(_)) => decided(Outcome::Failed {
                    failure: Failure::Panic,
                    answer: None,
                }),
                Err(_) => decided(in_progress()),
            }
        }
    }
}

/// Runs the work in place, unprotected (fail-open).
async fn run_unprotected<A, E, F>(work: F) -> Result<Outcome<A>, E>
where
    F: Future<Output = Result<Produced<A>, E>>,
{
    Ok(match work.await? {
        Produced::Answered(answered) => {
            Outcome::Unprotected(answered.answer, Unprotected::StoreUnavailable)
        }
        Produced::Broken => Outcome::Failed {
            failure: Failure::Body,
            answer: None,
        },
    })
}

/// Gives back, in the background, a lease that a failed claim may have taken under `token`.
/// Nothing ran under it; if the store stays down, the lease lapses by itself.
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
                });
            }
            Ok(_) => {
                drop(lead);
                return Led::Again(work);
            }
        }
    }
}

/// The outcome for a duplicate, from how the execution it waited on ended.
fn settled_outcome<A>(settled: Settled) -> Outcome<A> {
    match settled {
        Settled::Replay(record) => Outcome::Replayed(record),
        Settled::Failed { response, failure } => Outcome::Failed {
            failure,
            answer: response,
        },
    }
}
