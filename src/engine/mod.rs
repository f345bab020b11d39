//! The engine: from a request's scope, operation and body to an [`Outcome`], whatever protocol
//! the request came in. It claims, coalesces, executes detached and records; it names no
//! status code and no header, and the dialects (`http`, `mcp`) render what it decides.
//!
//! Every protected request takes one path, whatever the store: [`path`], with steps 2 to 4 in
//! [`claim`]:
//!
//! ```text
//! begin     derive the intent ──────────────────────────────── refused: NotExecuted
//!             │  a record this process holds? ──────────────── Replayed   (fast path: no
//!             ▼                                                             store, no slot)
//! run       1. join the intent's slot in this process
//!             ├─ a duplicate: wait on the leader ──────────── its outcome, or InProgress
//!             │    (the leader stopped first: from the top)     at the caller's deadline
//!             ▼  the leader
//!           2. a place among the detached executions ──────── none: what the store holds
//!             ▼                                                 answers, else TooBusy
//!           3. claim in the store ─────────────────────────── full: StoreFull
//!             │                                                 error: StoreUnavailable, or
//!             ▼                                                 run unprotected (fail_open)
//!           4. completed ──────────────────────────────────── Replayed
//!              running elsewhere: poll the store ─────────── its outcome, or InProgress
//!                (released meanwhile: from the top)
//!              a failure's tombstone, inside the wait its ─── NotExecuted (BackingOff); the
//!                retry budget sets                              tombstone is put back
//!             ▼  acquired          steps 2 to 4 answer a ClaimAnswer: Execute, Done,
//!                                  Again, or RunUnprotected; the path holds the work
//!           5. execute::start, detached from the caller ──── Executed / Failed when it
//!              (the recorder writes the outcome, settles        answers by the deadline,
//!               the slot, and renews the lease meanwhile)     else InProgress
//! ```
//!
//! In transactional mode (the Postgres store's), a claim that acquires begins the execution's
//! own database transaction before step 5, and the execution ends in [`transactional`] rather
//! than in a store write: its record commits with the tool's changes, or both roll back.
//!
//! A tool that answers at once on a store that answers at once (the memory store) is run and
//! recorded inside the request's first poll, with no task and no timer: `execute::start`
//! polls it in place and moves it into a task only if it waits.
//!
//! Futures off the common path are boxed, and a boxed future is built in a `let` of its own
//! before it is awaited: a temporary inside an `.await` expression keeps its storage in the
//! awaiting future until the statement ends, so `Box::pin(work()).await` would carry the whole
//! state of `work` in every request's future anyway.

mod backoff;
mod claim;
mod claim_answer;
pub(crate) mod detached;
mod elsewhere;
mod execute;
mod fail_open;
mod inflight;
mod intent;
pub(crate) mod lookup;
mod observe;
mod outcome;
pub(crate) mod path;
mod recent;
mod recorder;
pub(crate) mod relay;
mod runtime;
#[cfg(test)]
mod tests;
mod transactional;

use std::future::Future;
use std::sync::Arc;

use crate::scope::{Scope, ScopeFault};
use crate::settings::Settings;
use crate::store::ObservedStore;
use crate::telemetry::{self, Op};

pub use detached::DetachedExecutions;
pub(crate) use intent::{Call, Intent};
pub(crate) use outcome::{
    Failure, Judgement, Outcome, Reading, Refusal, ToolAnswer, UnprotectedCause,
};
pub(crate) use runtime::Runtime;

/// The dialect's call of the tool and its reading, boxed: what an execution runs, or hands
/// on to a task if it waits.
pub(crate) trait Work<A, E>:
    Future<Output = Result<Reading<A>, E>> + Send + Unpin + 'static
{
}

impl<T, A, E> Work<A, E> for T where
    T: Future<Output = Result<Reading<A>, E>> + Send + Unpin + 'static
{
}

/// One layer's settings and shared state, as every request of it sees them.
pub(crate) struct Engine<St> {
    pub(crate) settings: Arc<Settings>,
    pub(crate) runtime: Arc<Runtime<St>>,
    /// The store, bounded by this layer's store timeout.
    pub(crate) store: ObservedStore<St>,
}

impl<St> Engine<St> {
    pub(crate) fn new(settings: Arc<Settings>, runtime: Arc<Runtime<St>>) -> Self {
        let store = ObservedStore::new(
            Arc::clone(&runtime.store),
            Arc::clone(&runtime.store_metrics),
            settings.store_timeout,
        );
        Self {
            settings,
            runtime,
            store,
        }
    }
}

impl<St> std::fmt::Debug for Engine<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("runtime", &self.runtime)
            .finish_non_exhaustive()
    }
}

/// The engine's answer to one protected request.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "the keyed variant is the common one; boxing it would cost every request an allocation"
)]
pub(crate) enum Decision<A> {
    /// Refused before an intent could be derived: nothing ran.
    Refused(Refusal),
    /// What became of the request's intent.
    Keyed { intent: Intent, outcome: Outcome<A> },
}

/// Where protecting a request stands once nothing more can be decided without waiting.
#[must_use = "a running execution's outcome is the caller's answer"]
#[allow(
    clippy::large_enum_variant,
    reason = "it lives for one match, on the stack; boxing the decided side would cost a replay an allocation"
)]
pub(crate) enum Beginning<A, E> {
    /// Decided at once: refused, or replayed from a record this process holds.
    Decided(Decision<A>),
    /// On its path: the boxed future yields the intent and its outcome.
    Running(path::Running<A, E>),
}

impl<A, E> std::fmt::Debug for Beginning<A, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Decided(_) => f.write_str("Beginning::Decided"),
            Self::Running(_) => f.write_str("Beginning::Running"),
        }
    }
}

/// What a request's scope decides of protecting it.
#[derive(Debug)]
pub(crate) enum ScopeDecision {
    Protect(Scope),
    /// No scope, and the layer lets such requests through unprotected (recorded as such).
    PassThrough,
    Refuse(Refusal),
}

/// Decides on a request from its scope, as `scope_of` found it.
pub(crate) fn scoped(
    settings: &Settings,
    scope: Result<Option<Scope>, ScopeFault>,
    op: &Op,
) -> ScopeDecision {
    match scope {
        Ok(Some(scope)) => ScopeDecision::Protect(scope),
        Ok(None) if !settings.refuse_without_scope => {
            record_outcome(
                op,
                &Outcome::Unprotected((), UnprotectedCause::MissingScope),
            );
            ScopeDecision::PassThrough
        }
        Ok(None) => ScopeDecision::Refuse(Refusal::MissingScope),
        Err(ScopeFault::Panicked(panicked)) => {
            ScopeDecision::Refuse(Refusal::LayerFault(panicked.what))
        }
        Err(ScopeFault::Repeated(name)) => ScopeDecision::Refuse(Refusal::RepeatedScope(name)),
    }
}

/// Records how one protected request ended, once: from what the engine decided, or `None`
/// when the tool's own error ended it.
pub(crate) fn record<A>(op: &Op, decided: Option<&Decision<A>>) {
    match decided {
        None => telemetry::outcome(op, "error"),
        Some(Decision::Refused(refusal)) => refused(op, refusal),
        Some(Decision::Keyed { outcome, .. }) => record_outcome(op, outcome),
    }
}

/// Records how a request ended, from its outcome.
pub(crate) fn record_outcome<A>(op: &Op, outcome: &Outcome<A>) {
    match outcome {
        Outcome::NotExecuted(refusal) => return refused(op, refusal),
        Outcome::Replayed(_) => telemetry::replayed(op),
        Outcome::InProgress { .. } => telemetry::in_progress(op),
        Outcome::Unprotected(_, why) => telemetry::unprotected(op, why.as_str()),
        Outcome::Executed(_) | Outcome::Abandoned(_) | Outcome::Failed { .. } => {}
    }
    telemetry::outcome(op, outcome.tag());
}

fn refused(op: &Op, refusal: &Refusal) {
    telemetry::not_executed(op, refusal.reason());
    telemetry::outcome(op, "not_executed");
}
