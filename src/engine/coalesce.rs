//! One execution per intent: join the one running in this process, or lead it (see
//! [`super::lead`]): claim it, answer from a kept record, wait on one running elsewhere, or
//! start the execution.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::inflight::{Role, Settled, Waited};
use super::lead::{lead_intent, Led};
use super::{Engine, Intent, Outcome, Work};
use crate::clock::now_ms;
use crate::store::Store;
use crate::telemetry;

/// An execution still to wait on: it yields the intent and its outcome.
pub(crate) type Running<A, E> =
    Pin<Box<dyn Future<Output = Result<(Intent, Outcome<A>), E>> + Send + 'static>>;

/// [`coalesce_or_execute`] as one boxed future that owns its intent, so that a caller
/// answered before it (a replay) never carries its state.
pub(crate) fn running<St, A, E, F>(
    engine: Arc<Engine<St>>,
    intent: Intent,
    work: F,
    joined: Option<Role>,
) -> Running<A, E>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    Box::pin(async move {
        let outcome = coalesce_or_execute(&engine, &intent, work, joined).await;
        outcome.map(|outcome| (intent, outcome))
    })
}

/// Runs `work` once for the intent, or answers this caller from the execution that does.
/// `joined` is the role a caller has taken in the intent's slot already, if it has.
pub(crate) async fn coalesce_or_execute<St, A, E, F>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    mut work: F,
    mut joined: Option<Role>,
) -> Result<Outcome<A>, E>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    loop {
        // Matched in a statement of its own, so that the role is not kept across the lead's
        // wait.
        let role = joined
            .take()
            .unwrap_or_else(|| join(engine, intent, now_ms()));
        let lead = match role {
            Role::Follower(slot) => {
                if intent.reuses_key_for(&slot.fingerprint) {
                    return Ok(Outcome::key_reused(true));
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

/// Joins the intent's slot in this process, or opens it (started at `now_ms`) and leads.
pub(crate) fn join<St>(engine: &Engine<St>, intent: &Intent, now_ms: u64) -> Role {
    let inflight = &engine.runtime.inflight;
    inflight.join(intent.key, intent.fingerprint, now_ms)
}
/// The outcome for a duplicate, from how the execution it waited on ended.
fn settled_outcome<A>(settled: Settled) -> Outcome<A> {
    match settled {
        Settled::Replay(record) => Outcome::Replayed(record),
        Settled::Failed {
            response,
            failure,
            freed_in_s,
        } => Outcome::Failed {
            failure,
            answer: response,
            freed_in_s,
        },
    }
}
