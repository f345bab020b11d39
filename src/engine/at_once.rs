//! Leading an intent on a store that answers at once (see [`Store::answers_at_once`]): the
//! slot is joined, the intent claimed, the tool called and its outcome recorded in place,
//! while the engine is deciding, so that a tool that answers at once (most do) costs no future
//! of those steps. Whatever must wait (a duplicate joining a running execution, another
//! layer's execution, a tool that has not answered) goes on in one boxed future, on the
//! common path's own steps.

use std::future::Future;
use std::sync::Arc;

use futures_util::FutureExt;

use super::coalesce::{self, Running};
use super::inflight::Role;
use super::lead::{self, after_claim, answer_now, Leading, Led, Next};
use super::{Begun, Decided, Engine, Intent, Outcome, Work};
use crate::store::{Store, StoreError};

/// Takes the answer of a store call made in place. A call that waits although its store said
/// it answers at once is dropped where it stands and taken as the store's error.
pub(crate) fn answered_at_once<T>(
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    call.now_or_never().unwrap_or_else(|| {
        tracing::warn!("a store that answers at once made a call wait; it is taken as failed");
        Err(StoreError::new(
            "the store made a call wait, though it answers at once",
        ))
    })
}

/// Leads `intent` in place if nothing needs waiting, or hands what does to one boxed future.
pub(crate) fn lead<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: Intent,
    work: F,
) -> Begun<A, E, Running<A, E>>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    // The intent was derived a moment ago: its time is the execution's start.
    let lead = match coalesce::join(engine, &intent, crate::clock::ms_at(intent.arrived)) {
        Role::Leader(lead) => lead,
        // The common path, in one boxed future, from the role taken.
        follower => {
            let running = coalesce::running(Arc::clone(engine), intent, work, Some(follower));
            return Begun::Running(running);
        }
    };
    // At capacity, the common path answers from the store what it can.
    let max = engine.settings.max_detached;
    let Some(reservation) = engine.runtime.detached.try_reserve(max) else {
        let running = coalesce::running(Arc::clone(engine), intent, work, Some(Role::Leader(lead)));
        return Begun::Running(running);
    };
    let leading = Leading::new(lead, reservation);
    let claim = leading.claim_request(engine, &intent);
    let claimed = answered_at_once(engine.store.claim(&intent.key, &claim));
    let next = match after_claim(engine, work, &intent, leading, claimed) {
        Next::Decided(outcome) => return Begun::Decided(Ok(keyed(intent, outcome))),
        Next::Started(started, started_at_ms) => {
            match answer_now(started, &intent, started_at_ms) {
                Ok(answered) => {
                    return Begun::Decided(answered.map(|outcome| keyed(intent, outcome)))
                }
                Err(answer) => Next::Waiting(answer, started_at_ms),
            }
        }
        next => next,
    };
    let engine = Arc::clone(engine);
    Begun::Running(Box::pin(async move {
        let outcome = match lead::proceed(&engine, &intent, next).await {
            Led::Decided(outcome) => outcome,
            Led::Again(work) => coalesce::coalesce_or_execute(&engine, &intent, work, None).await,
        };
        outcome.map(|outcome| (intent, outcome))
    }))
}

fn keyed<A>(intent: Intent, outcome: Outcome<A>) -> Decided<A> {
    Decided::Keyed { intent, outcome }
}
