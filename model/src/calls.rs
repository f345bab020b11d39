//! A step's call on any `Store`: the memory store the checker runs, or a Redis or PostgreSQL
//! store a trace is replayed on. Each call is made as the engine makes it, with the values
//! the step names; a tick and a restart are the caller's, since they act on the clock and
//! on which store there is.

use tower_idempotency::store::{Claim, Entry, Fence, KeptResponse, Store, StoreError};

use crate::intents::Intent;
use crate::step::{self, Step};

/// What the store answered a step.
#[derive(Debug)]
pub enum Answer {
    Claim(Claim),
    Fence(Fence),
    Entry(Option<Entry>),
    /// An operator's call: whether it removed or wrote.
    Done(bool),
    /// A tick or a restart.
    Nothing,
}

/// Makes `step`'s call on `store` at tick `now`. A tick or a restart makes none.
pub async fn call<S: Store>(
    store: &S,
    intents: &[Intent],
    step: Step,
    now: u8,
) -> Result<Answer, StoreError> {
    let of = |intent: u8| &intents[usize::from(intent)];
    Ok(match step {
        Step::Claim { intent, token } => {
            let request = step::claim_request(of(intent), token, now);
            Answer::Claim(store.claim(&of(intent).key, &request).await?)
        }
        Step::Complete {
            intent,
            token,
            started,
        } => {
            let record = step::record(of(intent), token, started, now);
            let retention = step::ticks(step::RETENTION);
            let owner = step::token(token);
            let written = store.complete(&of(intent).key, &owner, record, retention);
            Answer::Fence(written.await?)
        }
        Step::Release {
            intent,
            token,
            failures,
            ..
        } => {
            let tombstone = step::tombstone(of(intent), now, failures);
            let ttl = step::ticks(step::FAILURE_TTL);
            let owner = step::token(token);
            let written = store.release(&of(intent).key, &owner, tombstone, ttl);
            Answer::Fence(written.await?)
        }
        Step::Extend { intent, token } => {
            let lease = step::ticks(step::LEASE);
            let owner = step::token(token);
            Answer::Fence(store.extend(&of(intent).key, &owner, lease).await?)
        }
        Step::Abandon { intent, token } => {
            let owner = step::token(token);
            Answer::Fence(store.abandon(&of(intent).key, &owner).await?)
        }
        Step::Get { intent } => Answer::Entry(store.get(&of(intent).key).await?),
        Step::Remove { intent } => Answer::Done(store.remove(&of(intent).key).await?),
        Step::Put { intent } => {
            let record = step::resolution(of(intent), now);
            let retention = step::ticks(step::RETENTION);
            Answer::Done(store.put(&of(intent).key, record, retention).await?)
        }
        Step::Tick | Step::Restart => Answer::Nothing,
    })
}

/// An answer as two stores must agree on it: the claim's kind and token, the fence, the
/// entry's kind and whose record it is, the operator's result.
pub fn summary(answer: &Answer) -> String {
    let by = |response: &KeptResponse| match response {
        KeptResponse::Full(answer) => format!("token {:?}", answer.body.first()),
        _ => "a resolution".to_owned(),
    };
    match answer {
        Answer::Claim(Claim::Acquired(token)) => {
            format!("acquired {}", step::token_number(token))
        }
        Answer::Claim(Claim::AcquiredAfterFailure(token, tombstone)) => format!(
            "acquired {} after {} failures",
            step::token_number(token),
            tombstone.failures
        ),
        Answer::Claim(Claim::Running(info)) => {
            format!("running since {}", step::tick_of(info.started_at_ms))
        }
        Answer::Claim(Claim::Completed(record)) => format!("completed by {}", by(&record.response)),
        Answer::Entry(Some(Entry::Running(_))) => "reads running".to_owned(),
        Answer::Entry(Some(Entry::Completed(record))) => {
            format!("reads completed by {}", by(&record.response))
        }
        Answer::Entry(Some(Entry::Failed(tombstone))) => {
            format!("reads {} failures", tombstone.failures)
        }
        Answer::Entry(None) => "reads nothing".to_owned(),
        other => format!("{other:?}"),
    }
}
