//! Leading an intent on a store that answers at once (see [`Store::answers_at_once`]): the
//! slot is joined, the intent claimed, the tool called and its outcome recorded in place,
//! while the engine is deciding, so that a tool that answers at once (most do) costs no future
//! of those steps. Whatever must wait (a duplicate joining a running execution, another
//! layer's execution, a tool that has not answered) goes on in one boxed future.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::coalesce::{self, after_claim, answer_now, Leading, Led, Next};
use super::inflight::Role;
use super::{Begun, Decided, Engine, Intent, Outcome, Produced};
use crate::clock::ms_at;
use crate::store::{Store, StoreError};

/// An execution still to wait on: it yields the intent and its outcome.
pub(crate) type Running<A, E> =
    Pin<Box<dyn Future<Output = Result<(Intent, Outcome<A>), E>> + Send + 'static>>;

/// Takes the answer of a store call made in place. A call that waits although its store said
/// it answers at once is dropped where it stands and taken as the store's error.
pub(crate) fn answered_at_once<T>(
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let mut call = pin!(call);
    match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answered) => answered,
        Poll::Pending => {
            tracing::warn!("a store that answers at once made a call wait; it is taken as failed");
            Err(StoreError::new(
                "the store made a call wait, though it answers at once",
            ))
        }
    }
}

/// Leads `intent` in place if nothing needs waiting, or hands what does to one boxed future.
pub(crate) fn lead<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: Intent,
    work: F,
) -> Begun<A, E, Running<A, E>>
where
    St: Store,
    F: Future<Output = Result<Produced<A>, E>> + Send + Unpin + 'static,
    A: Send + 'static,
    E: Send + 'static,
{
    // Reserved before the slot is joined, so that a leader never waits for a place: a
    // duplicate gives it back at once, and at capacity the common path takes over.
    let max = engine.settings.max_detached;
    let Some(reservation) = engine.runtime.detached.try_reserve(max) else {
        return waiting(engine, intent, work);
    };
    let inflight = &engine.runtime.inflight;
    // The slot opens as the intent arrived: a reading of the clock already taken.
    let lead = match inflight.join(intent.key, intent.fingerprint, ms_at(intent.arrived)) {
        Role::Leader(lead) => lead,
        Role::Follower(_) => {
            drop(reservation);
            return waiting(engine, intent, work);
        }
    };
    let leading = Leading::new(lead, reservation);
    let claim = leading.claim_request(engine, &intent);
    let claimed = answered_at_once(engine.store.claim(&intent.key, &claim));
    let next = after_claim(engine, work, &intent, leading, claimed);
    match next {
        Next::Led(Led::Decided(decided)) => {
            Begun::Decided(decided.map(|outcome| keyed(intent, outcome)))
        }
        // Only a wait elsewhere starts over.
        Next::Led(Led::Again(work)) => waiting(engine, intent, work),
        Next::Started(started, started_at_ms) => {
            match answer_now(started, &intent, started_at_ms) {
                Ok(answered) => Begun::Decided(answered.map(|outcome| keyed(intent, outcome))),
                Err(answer) => Begun::Running(Box::pin(async move {
                    let outcome = coalesce::wait_for_answer(answer, &intent, started_at_ms).await;
                    outcome.map(|outcome| (intent, outcome))
                })),
            }
        }
        Next::Elsewhere {
            work,
            lead,
            started_at_ms,
        } => {
            let engine = Arc::clone(engine);
            Begun::Running(Box::pin(async move {
                let waited =
                    coalesce::wait_elsewhere(&engine, work, &intent, lead, started_at_ms).await;
                let outcome = match waited {
                    Led::Decided(outcome) => outcome,
                    Led::Again(work) => coalesce::coalesce_or_execute(&engine, &intent, work).await,
                };
                outcome.map(|outcome| (intent, outcome))
            }))
        }
        Next::Unprotected(work) => Begun::Running(Box::pin(async move {
            let outcome = coalesce::run_unprotected(work).await;
            outcome.map(|outcome| (intent, outcome))
        })),
    }
}

fn keyed<A>(intent: Intent, outcome: Outcome<A>) -> Decided<A> {
    Decided::Keyed { intent, outcome }
}

/// The common path, in one boxed future: join or lead, and wait as needed.
fn waiting<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: Intent,
    work: F,
) -> Begun<A, E, Running<A, E>>
where
    St: Store,
    F: Future<Output = Result<Produced<A>, E>> + Send + Unpin + 'static,
    A: Send + 'static,
    E: Send + 'static,
{
    Begun::Running(super::running(Arc::clone(engine), intent, work))
}
