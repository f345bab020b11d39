//! Answering a leader whose intent another instance runs, or that has no place to run it in:
//! from what the store holds, polled until it settles or the caller's deadline.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::claim_answer::ClaimAnswer;
use super::inflight::{Lead, Settlement};
use super::intent::Intent;
use super::outcome::{Failure, Outcome, Refusal};
use super::Engine;
use crate::store::{Entry, Record, RunningInfo, Store};
use crate::telemetry;

fn key_reused<A>(running: bool) -> ClaimAnswer<A> {
    ClaimAnswer::Done(Outcome::key_reused(running))
}

/// What the store holds of an intent that this caller found taken: a kept record, or an
/// execution running elsewhere, started at the given time.
pub(super) enum Holding {
    Completed(Arc<Record>),
    Running(RunningInfo),
}

/// Answers a caller from what the store holds: a kept record is replayed (to this caller and
/// the duplicates on its slot), a running execution is waited on; a key reused for other
/// arguments is refused either way.
pub(super) async fn from_the_store<St: Store, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    lead: Lead,
    held: Holding,
) -> ClaimAnswer<A> {
    match held {
        Holding::Completed(record) if intent.reuses_key_for(&record.fingerprint) => {
            key_reused(false)
        }
        Holding::Running(info) if intent.reuses_key_for(&info.fingerprint) => key_reused(true),
        Holding::Completed(record) => {
            lead.settle(Settlement::Replay(Arc::clone(&record)));
            ClaimAnswer::Done(Outcome::Replayed(record))
        }
        Holding::Running(info) => {
            let waiting = Box::pin(wait_elsewhere(engine, intent, lead, info.started_at_ms));
            waiting.await
        }
    }
}

/// No room for another execution: a completed or running intent is still answered, since
/// that needs none; anything else is refused with nothing executed.
pub(super) async fn at_capacity<St: Store, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    lead: Lead,
) -> ClaimAnswer<A> {
    let held = match engine.store.get(&intent.key).await {
        Ok(Some(Entry::Completed(record))) => Holding::Completed(record),
        Ok(Some(Entry::Running(info))) => Holding::Running(info),
        _ => {
            tracing::warn!("too many detached executions; refusing");
            return ClaimAnswer::Done(Outcome::NotExecuted(Refusal::TooBusy));
        }
    };
    from_the_store(engine, intent, lead, held).await
}

/// Waits for an execution that runs elsewhere (another process, or another layer sharing
/// the store), started at `started_at_ms`, polling the store until it settles or this
/// caller's deadline. Counted as coalesced.
async fn wait_elsewhere<St: Store, A>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    lead: Lead,
    started_at_ms: u64,
) -> ClaimAnswer<A> {
    telemetry::coalesced(&intent.op);
    lead.set_started_at_ms(started_at_ms);
    let mut pause = Duration::from_millis(10);
    loop {
        let now = Instant::now();
        if now >= intent.deadline {
            drop(lead);
            return ClaimAnswer::Done(Outcome::InProgress {
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
                lead.settle(Settlement::Replay(Arc::clone(&record)));
                return ClaimAnswer::Done(Outcome::Replayed(record));
            }
            Ok(Some(Entry::Failed(tombstone))) if tombstone.failed_at_ms >= started_at_ms => {
                drop(lead);
                return ClaimAnswer::Done(Outcome::Failed {
                    failure: Failure::of(&tombstone),
                    answer: None,
                    freed_in_s: None,
                });
            }
            Ok(_) => {
                drop(lead);
                return ClaimAnswer::Again;
            }
        }
    }
}
