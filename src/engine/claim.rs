//! Steps 2 to 4 of the path (see [`super`]): the leader takes a place among the detached
//! executions, claims the intent in the store, and learns what the store's answer leaves to
//! do; a claim that goes unanswered gives back the lease it may have taken.

use std::sync::Arc;

use super::backoff;
use super::claim_answer::{ClaimAnswer, FailOpenTicket};
use super::elsewhere::{at_capacity, from_the_store, Holding};
use super::execute::ClaimTicket;
use super::inflight::Lead;
use super::intent::Intent;
use super::outcome::{Outcome, Refusal};
use super::Engine;
use crate::key::IntentKey;
use crate::store::{Claim, ClaimRequest, OwnerToken, Store, StoreError, Transactional};

/// The leader: takes a place among the detached executions, claims the intent, and says what
/// the store's answer leaves to do; in `transaction` where the layer is transactional.
pub(super) async fn claim_intent<St, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    lead: Lead,
    transaction: Option<&Arc<dyn Transactional>>,
) -> ClaimAnswer<A>
where
    St: Store,
{
    // 2. A place to run in; without one, the store still answers what needs none.
    let Some(reservation) = engine
        .runtime
        .detached
        .try_reserve(engine.settings.max_detached)
    else {
        let refusing = Box::pin(at_capacity(engine, intent, lead));
        return refusing.await;
    };
    // 3. The claim.
    let token = OwnerToken::generate();
    let started_at_ms = lead.started_at_ms();
    let claimed = match claim(engine, intent, token, started_at_ms).await {
        Ok(claimed) => claimed,
        // Fail closed whatever the setting: the store answered, and took nothing. (Counted
        // and logged by the store's observer.)
        Err(error) if error.is_full() => {
            return ClaimAnswer::Done(Outcome::NotExecuted(Refusal::StoreFull));
        }
        Err(error) => {
            tracing::warn!(%error, "the store could not answer a claim");
            give_back(engine, &intent.key, token);
            drop(reservation);
            // A transactional layer fails closed: the tool needs the transaction.
            if !engine.settings.fail_open || transaction.is_some() {
                return ClaimAnswer::Done(Outcome::NotExecuted(Refusal::StoreUnavailable));
            }
            tracing::warn!("fail-open: running without protection");
            return ClaimAnswer::RunUnprotected(FailOpenTicket {
                token,
                lead,
                started_at_ms,
            });
        }
    };
    // 4. What the store holds decides.
    match claimed {
        Claim::Completed(record) => {
            from_the_store(engine, intent, lead, Holding::Completed(record)).await
        }
        Claim::Running(info) => {
            // Waiting on an execution elsewhere runs nothing here: it holds no place.
            drop(reservation);
            from_the_store(engine, intent, lead, Holding::Running(info)).await
        }
        Claim::AcquiredAfterFailure(token, failed) => {
            let Some(free_at_ms) = backoff::held_until(intent, &failed) else {
                let failures_before = failed.failures;
                let ticket = ClaimTicket {
                    token,
                    lead,
                    reservation,
                    started_at_ms,
                    failures_before,
                    history: failed.history.clone(),
                    transaction: transaction.cloned(),
                };
                return acquired(engine, intent, ticket).await;
            };
            drop(reservation);
            // Dropped before the tombstone is back (the caller went away), the claim is given
            // back rather than left to lapse.
            let out = ClaimOut {
                engine,
                key: &intent.key,
                token: Some(token),
            };
            let holding = backoff::hold_back(engine, intent, token, failed, free_at_ms);
            let (refusal, put_back) = Box::pin(holding).await;
            if put_back {
                out.answered();
            }
            ClaimAnswer::Done(Outcome::NotExecuted(refusal))
        }
        Claim::Acquired(token) => {
            let ticket = ClaimTicket {
                token,
                lead,
                reservation,
                started_at_ms,
                failures_before: 0,
                history: Vec::new(),
                transaction: transaction.cloned(),
            };
            acquired(engine, intent, ticket).await
        }
    }
}

/// The claim is held: in transactional mode the execution's transaction begins first.
async fn acquired<St: Store, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    ticket: ClaimTicket,
) -> ClaimAnswer<A> {
    if let Some(transaction) = &ticket.transaction {
        if let Err(refused) = begin_transaction(engine, intent, ticket.token, &**transaction).await
        {
            return ClaimAnswer::Done(refused);
        }
    }
    ClaimAnswer::Execute(ticket)
}

/// Begins the transaction of a claimed execution. Without one (no connection came in time,
/// the database refused) the tool does not run: the claim is given back and the caller told
/// that nothing ran.
async fn begin_transaction<St: Store, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    token: OwnerToken,
    transaction: &dyn Transactional,
) -> Result<(), Outcome<A>> {
    let out = ClaimOut {
        engine,
        key: &intent.key,
        token: Some(token),
    };
    let begun = transaction.begin();
    match begun.await {
        Ok(()) => {
            out.answered();
            Ok(())
        }
        Err(error) => {
            tracing::warn!(%error, "the execution's transaction could not begin; nothing ran");
            // Dropped unanswered, the guard gives the claim back.
            drop(out);
            Err(Outcome::NotExecuted(Refusal::StoreUnavailable))
        }
    }
}

/// Claims `intent` under `token`. A caller that goes away before the store answers (its
/// client disconnected) gives back the lease the claim may have taken, under which nothing
/// will run.
async fn claim<St: Store>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    token: OwnerToken,
    started_at_ms: u64,
) -> Result<Claim, StoreError> {
    let request = ClaimRequest {
        token,
        lease: engine.settings.lease,
        scope: intent.scope,
        share: intent.share,
        fingerprint: intent.fingerprint,
        started_at_ms,
    };
    let out = ClaimOut {
        engine,
        key: &intent.key,
        token: Some(token),
    };
    let claimed = engine.store.claim(&intent.key, &request).await;
    out.answered();
    claimed
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

/// A claim sent and not answered yet: dropped so, it gives its lease back.
struct ClaimOut<'a, St: Store> {
    engine: &'a Arc<Engine<St>>,
    key: &'a IntentKey,
    token: Option<OwnerToken>,
}

impl<St: Store> ClaimOut<'_, St> {
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
