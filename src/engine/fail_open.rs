//! Fail-open: the store could not answer a claim, and the layer runs the action unprotected
//! rather than refusing it. Nothing is written; the in-process slot is still held, so that
//! duplicates in this process wait for this run's answer rather than each running.

use std::future::Future;

use super::inflight::Lead;
use super::outcome::{Outcome, Reading, UnprotectedCause};
use super::recorder::Recorder;
use crate::store::Store;

/// Runs the work in place, unprotected (fail-open): nothing is written, but the duplicates
/// waiting on `lead` in this process are given its outcome, as `recorder` would record it.
pub(super) async fn run_unprotected<St, A, E, F>(
    recorder: Recorder<'_, St>,
    work: F,
    lead: Lead,
) -> Result<Outcome<A>, E>
where
    St: Store,
    F: Future<Output = Result<Reading<A>, E>>,
{
    let plan = recorder.plan(Some(Ok(work.await)));
    lead.settle(plan.settled);
    Ok(match plan.answer? {
        Outcome::Executed(answer) => {
            Outcome::Unprotected(answer, UnprotectedCause::StoreUnavailable)
        }
        other => other,
    })
}
