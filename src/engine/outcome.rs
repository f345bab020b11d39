//! What the engine decides about a protected request, before any protocol renders it.
//!
//! The engine names no status code and no header: an [`Outcome`] says what happened to the
//! action, and a dialect (HTTP, MCP) writes it in its own terms.

use std::sync::Arc;

use http::StatusCode;

use crate::body::Unread;
use crate::canonical::CanonicalError;
use crate::classify::Verdict;
use crate::key::KeySource;
use crate::store::{Record, ReleaseCause, StoredResponse, Tombstone};

/// How a protected request ended, for the caller that sent it. `A` is the dialect's answer
/// of the tool (an HTTP response, a JSON-RPC message).
#[derive(Debug)]
pub(crate) enum Outcome<A> {
    /// This caller's execution answered within its deadline: its own answer.
    Executed(A),
    /// The request ran without protection: it had no scope (and that is allowed), or the
    /// store could not answer and the layer fails open.
    Unprotected(A, UnprotectedCause),
    /// A repeat, answered from a kept record: the whole answer, or only that the action ran.
    Replayed(Arc<Record>),
    /// This caller's execution passed its `max_execution` bound and was abandoned: the
    /// action may have happened.
    Abandoned(Arc<Record>),
    /// The action is still running at this caller's deadline.
    InProgress {
        started_at_ms: u64,
        /// Whether this caller is a duplicate of another's execution.
        duplicate: bool,
    },
    /// The attempt ended without a kept outcome; with the failed answer where there was one
    /// (for a duplicate that waited on it).
    Failed {
        failure: Failure,
        answer: Option<Arc<StoredResponse>>,
        /// Where the key is not free yet (the store refused its release), the seconds at
        /// most until a repeat runs the action again.
        freed_in_s: Option<u64>,
    },
    /// Nothing was executed, for this reason.
    NotExecuted(Refusal),
}

/// Why a request ran without protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnprotectedCause {
    MissingScope,
    StoreUnavailable,
}

impl UnprotectedCause {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::MissingScope => "missing-scope",
            Self::StoreUnavailable => "store-unavailable",
        }
    }
}

impl<A> Outcome<A> {
    /// Refused with nothing run: the request's explicit key names an intent that was, or is
    /// being (`running`), called with another body.
    pub(crate) fn key_reused(running: bool) -> Self {
        Self::NotExecuted(Refusal::KeyReused { running })
    }

    /// A short tag of the outcome, for the request's span.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            Self::Executed(_) | Self::Abandoned(_) => "executed",
            Self::Unprotected(..) => "unprotected",
            Self::Replayed(_) => "replayed",
            Self::InProgress { .. } => "in_progress",
            Self::Failed { .. } => "failed",
            Self::NotExecuted(_) => "not_executed",
        }
    }
}

/// Why a request was not executed. Each is known for certain: nothing ran.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// A hook of the user's (scope function, normalisation) panicked before anything was
    /// claimed.
    LayerFault(&'static str),
    /// The request has no scope.
    MissingScope,
    /// A header that names the scope came more than once.
    RepeatedScope(http::HeaderName),
    /// The body is over the limit.
    BodyTooLarge(usize),
    /// The body could not be read to the end.
    BodyUnreadable,
    /// The explicit key from this source is not 1 to 255 visible ASCII characters.
    MalformedKey(KeySource),
    /// The body has fields to leave out of its key but no canonical form to find them in.
    Unkeyable(CanonicalError),
    /// An explicit key was reused with other arguments; the action under it runs, or ran.
    KeyReused { running: bool },
    /// The store could not answer the claim, and the layer fails closed.
    StoreUnavailable,
    /// The store is full: it had no room for this new intent's outcome without dropping one
    /// it keeps.
    StoreFull,
    /// Too many executions run at once.
    TooBusy,
    /// The intent's attempts failed `failures` times in a row, the last as `last`, and its
    /// retry budget holds it back for `wait_s` more seconds.
    BackingOff {
        failures: u32,
        last: Failure,
        wait_s: u64,
    },
}

impl From<Unread> for Refusal {
    fn from(unread: Unread) -> Self {
        match unread {
            Unread::TooLarge(limit) => Self::BodyTooLarge(limit),
            Unread::Broken => Self::BodyUnreadable,
        }
    }
}

impl Refusal {
    /// A short name of the situation, for metrics.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Self::LayerFault(_) => "layer-fault",
            Self::MissingScope => "missing-scope",
            Self::RepeatedScope(_) => "repeated-scope",
            Self::BodyTooLarge(_) => "body-too-large",
            Self::BodyUnreadable => "body-unreadable",
            Self::MalformedKey(_) => "malformed-key",
            Self::Unkeyable(_) => "unkeyable",
            Self::KeyReused { .. } => "key-reused",
            Self::StoreUnavailable => "store-unavailable",
            Self::StoreFull => "store-full",
            Self::TooBusy => "too-busy",
            Self::BackingOff { .. } => "backing-off",
        }
    }
}

/// How an attempt ended without a kept outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It answered with this status, which released the key; with the wait it asked for.
    Status(StatusCode, Option<u64>),
    /// The inner service returned an error instead of an answer: whether the request
    /// reached the tool is not known.
    Error,
    /// The tool's server answered that the call failed (a JSON-RPC error it does not keep).
    Answered,
    /// The tool's server cancelled the call before it answered: it may have run.
    Cancelled,
    /// The tool's server asked for more input before it would complete the call.
    AsksForInput,
    /// The tool panicked, or its execution stopped before it reported an outcome: it may
    /// have run.
    Panic,
    /// Its answer broke off after it began: it may have run.
    Body,
    /// Its database transaction was rolled back (transactional mode): none of its database
    /// changes were kept.
    RolledBack,
    /// The connection broke while its transaction committed (transactional mode): whether its
    /// changes and its record were kept, together, cannot be told yet.
    CommitUnknown,
}

impl Failure {
    /// How the attempt a tombstone records ended.
    pub(crate) fn of(tombstone: &Tombstone) -> Self {
        Self::released(tombstone.status, tombstone.cause, tombstone.retry_after_s)
    }

    /// How an attempt released for `cause` ended: a crash or an answer that broke off may
    /// have run, whatever status came before it.
    pub(crate) fn released(
        status: Option<StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) -> Self {
        match (status, cause) {
            (_, ReleaseCause::Panic) => Self::Panic,
            (_, ReleaseCause::ResponseBody) => Self::Body,
            (_, ReleaseCause::Cancelled) => Self::Cancelled,
            (_, ReleaseCause::InputRequired) => Self::AsksForInput,
            (Some(status), _) => Self::Status(status, retry_after_s),
            (None, ReleaseCause::RolledBack) => Self::RolledBack,
            (None, ReleaseCause::InnerError) => Self::Error,
            (None, _) => Self::Answered,
        }
    }

    /// The wait the failed answer asked for, in seconds.
    pub(crate) fn wait(self) -> Option<u64> {
        match self {
            Self::Status(_, wait) => wait,
            _ => None,
        }
    }
}

/// What a dialect read of the tool's answer, for the engine to record.
#[derive(Debug)]
pub(crate) enum Reading<A> {
    /// The tool answered.
    Answered(ToolAnswer<A>),
    /// Its answer broke off before it was complete: it may have run.
    Broken,
}

/// How a dialect judged a tool's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judgement {
    /// By its rule: whether the action happened, and what to keep of it.
    Verdict(Verdict),
    /// Not at all: the answer stands in for one lost after the request reached the tool
    /// ([`Interrupted`](crate::Interrupted)), so the action may have run.
    Interrupted,
}

/// A tool's answer, judged by its dialect.
#[derive(Debug)]
pub(crate) struct ToolAnswer<A> {
    pub(crate) judged: Judgement,
    /// The answer as a repeat would be given it, where it was read whole under the
    /// response limit.
    pub(crate) stored: Option<StoredResponse>,
    /// The status a record without its answer, or a tombstone, keeps (the dialect's own;
    /// `None` where its answer has none to tell).
    pub(crate) status: Option<StatusCode>,
    /// The wait the answer asked for before a retry, in seconds.
    pub(crate) retry_after_s: Option<u64>,
    /// What the first caller is given.
    pub(crate) answer: A,
}
