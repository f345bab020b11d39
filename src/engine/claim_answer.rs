//! What the store's answer to a leader's claim leaves the request's path to do. The path
//! matches on it and alone holds the tool's work: nothing that answers a claim touches it.

use super::execute::ClaimTicket;
use super::inflight::Lead;
use super::outcome::Outcome;
use crate::store::OwnerToken;

/// What the store's answer to a leader's claim leaves the path to do: run the work, run it
/// unprotected, answer without it, or start over.
pub(super) enum ClaimAnswer<A> {
    /// The intent is this caller's to run, under the claim.
    Execute(ClaimTicket),
    /// The store could not answer, and the layer fails open: run without protection, the
    /// in-process slot still held.
    RunUnprotected(FailOpenTicket),
    /// Answered without running anything here.
    Done(Outcome<A>),
    /// The store released the intent while this caller waited on another instance's
    /// execution: take it from the top.
    Again,
}

/// A fail-open run's slot, and the token and time its outcome is told with.
pub(super) struct FailOpenTicket {
    pub(super) token: OwnerToken,
    pub(super) lead: Lead,
    pub(super) started_at_ms: u64,
}
