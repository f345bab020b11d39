//! The second way an execution ends, in transactional mode: its record is written in the
//! tool's own database transaction and committed with the tool's changes, or the transaction
//! is rolled back and the intent released, so that what the database holds and what the store
//! says of the action never disagree.
//!
//! ```text
//! the plan of the ended execution
//!   a known outcome kept ──── commit the record with the changes ── kept: as planned
//!   │                           ├─ fenced (another owner): rolled back, the waiters ask the store
//!   │                           ├─ not committed: rolled back, released
//!   │                           └─ cannot tell: the lease lapses; a retry replays or runs
//!   anything else ─────────── roll back, then release
//! ```

use std::sync::Arc;

use super::outcome::{Failure, Outcome};
use super::recorder::{Plan, Recorder, Write};
use crate::store::{CommitResult, KeptResponse, ReleaseCause, Store, StoreError, Transactional};
use crate::telemetry;

/// What settling in the transaction comes to.
pub(super) enum Settling<A, E> {
    /// Settled by this plan, whose write the store took (or refused, to be retried).
    Written(Plan<A, E>, Result<(), StoreError>),
    /// Nothing this execution can settle: the intent is another owner's, or its outcome is
    /// not known yet. The first caller's answer; the waiters ask the store again.
    Left(Result<Outcome<A>, E>),
}

/// Commits or rolls back the transaction of an ended execution, as its plan says, and
/// answers what is then known.
pub(super) async fn settle<St: Store, A, E>(
    recorder: &Recorder<'_, St>,
    transaction: &dyn Transactional,
    plan: Plan<A, E>,
) -> Settling<A, E> {
    let kept = match &plan.write {
        Write::Record(record) if !record.response.is_unknown() => Arc::clone(record),
        _ => {
            let rolling_back = transaction.roll_back();
            rolling_back.await;
            let plan = undone(recorder, plan);
            let written = recorder.attempt(&plan.write).await;
            return Settling::Written(plan, written);
        }
    };
    let retention = recorder.retention_of(&kept.response);
    let key = &recorder.intent.key;
    let committing = transaction.commit(key, &recorder.token, &kept, retention);
    match committing.await {
        CommitResult::Kept => Settling::Written(plan, Ok(())),
        CommitResult::Fenced => {
            telemetry::fenced(&recorder.intent.op);
            tracing::warn!("the lease lapsed and another owner took the intent; rolled back");
            Settling::Left(Ok(Outcome::Failed {
                failure: Failure::RolledBack,
                answer: None,
                freed_in_s: None,
            }))
        }
        CommitResult::RolledBack => {
            tracing::warn!("the transaction did not commit; its changes were rolled back");
            let plan = recorder.failed(ReleaseCause::RolledBack, Failure::RolledBack);
            let written = recorder.attempt(&plan.write).await;
            Settling::Written(plan, written)
        }
        CommitResult::Unknown => {
            tracing::error!(
                "the connection broke during the commit and the record cannot be read; the \
                 lease is left to lapse"
            );
            let lease = recorder.engine.settings.lease;
            Settling::Left(Ok(Outcome::Failed {
                failure: Failure::CommitUnknown,
                answer: None,
                freed_in_s: Some(lease.as_secs().max(1)),
            }))
        }
    }
}

/// The plan of an execution whose transaction was rolled back: where it ended without an
/// answer of its own, or with one that leaves the action unknown, the rollback is what is
/// known now, and the key is released so that a retry runs it. A tool's own failing answer
/// stands as it is.
fn undone<St: Store, A, E>(recorder: &Recorder<'_, St>, plan: Plan<A, E>) -> Plan<A, E> {
    let rolled_back = || recorder.failed(ReleaseCause::RolledBack, Failure::RolledBack);
    match &plan.write {
        Write::Record(record) if matches!(record.response, KeptResponse::Abandoned) => {
            rolled_back()
        }
        // The tool's answer (a 502, say) is the first caller's, as ever; what is kept of it
        // is now known: nothing in the database.
        Write::Record(_) => Plan {
            answer: plan.answer,
            ..rolled_back()
        },
        Write::Release(tombstone) => match Failure::of(tombstone) {
            Failure::Panic | Failure::Body => rolled_back(),
            // The inner service's error is the first caller's, as ever.
            Failure::Error => Plan {
                answer: plan.answer,
                ..rolled_back()
            },
            _ => plan,
        },
    }
}
