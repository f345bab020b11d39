//! What a store keeps about an intent.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};

use super::Transition;
use crate::key::{Fingerprint, ScopeHash};

/// An execution that holds the lease.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RunningInfo {
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// Whose it is.
    pub scope: ScopeHash,
    /// What it was asked to do.
    pub fingerprint: Fingerprint,
}

impl RunningInfo {
    /// An execution of `fingerprint` within `scope`, started at `started_at_ms`.
    pub fn new(started_at_ms: u64, scope: ScopeHash, fingerprint: Fingerprint) -> Self {
        Self {
            started_at_ms,
            scope,
            fingerprint,
        }
    }
}

/// A response as it will be replayed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoredResponse {
    /// The status the tool answered.
    pub status: StatusCode,
    /// Its headers, without hop-by-hop headers and `date`.
    pub headers: HeaderMap,
    /// Its body, byte for byte.
    pub body: Bytes,
}

impl StoredResponse {
    /// A response with this status, these headers and this body.
    pub fn new(status: StatusCode, headers: HeaderMap, body: Bytes) -> Self {
        Self {
            status,
            headers,
            body,
        }
    }
}

/// What was kept of a completed execution's response.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum KeptResponse {
    /// The whole response, replayed as it was.
    Full(StoredResponse),
    /// The action ran, but its response was not kept: only that it ran, and its status.
    Omitted {
        /// The status it answered.
        status: StatusCode,
        /// Why the response was not kept.
        why: Omission,
    },
    /// The execution was still running at its `max_execution` bound and was abandoned: the
    /// action may have happened, and it is not run again.
    Abandoned,
}

/// Why an executed action's response was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Omission {
    /// It was over the stored-response cap.
    TooLarge,
    /// It was marked `cache-control: no-store`.
    NoStore,
    /// The classification rule failed on it, so whether the action took effect is unknown:
    /// it is not run again, and repeats are told to check.
    Unclassified,
    /// It stands in for an answer that was lost after the request reached the tool (marked
    /// [`Interrupted`](crate::Interrupted)): the action may have run, it is not run again, and
    /// repeats are told to check.
    Interrupted,
    /// An operator resolved an outcome that was not known: the action ran, and it is not run
    /// again.
    Resolved,
}

/// The outcome of a completed execution.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Record {
    /// Whose it is.
    pub scope: ScopeHash,
    /// What it was asked to do.
    pub fingerprint: Fingerprint,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// When it ended, in milliseconds since the Unix epoch.
    pub completed_at_ms: u64,
    /// Until when it is kept, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
    /// What it answered.
    pub response: KeptResponse,
    /// Whose answer it keeps: the protocol the execution was called in.
    pub protocol: Protocol,
    /// The operation it was a call of (the route's label, such as `POST /tools/send_email`),
    /// for an operator's listing; `None` in records written without it.
    pub operation: Option<Arc<str>>,
    /// Whose part of the store it counts against where that is not its scope (the principal,
    /// where one is configured), so that an operator can purge every record of one caller.
    pub share: Option<ScopeHash>,
    /// What an operator wrote when resolving it.
    pub note: Option<Arc<str>>,
    /// The intent's story up to this record, oldest first: the attempts before it, its own
    /// claim and outcome, an operator's resolution; at most
    /// [`HISTORY_LIMIT`](super::HISTORY_LIMIT). Empty in records written without it.
    pub history: Vec<Transition>,
}

/// The protocol a record's answer was given in, so that each reader renders it in its own
/// terms (the HTTP status path shows an MCP call's JSON-RPC answer as the JSON it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Protocol {
    /// An HTTP response, replayed as it was.
    #[default]
    Http,
    /// The JSON-RPC answer of an MCP server to a `tools/call`.
    Mcp,
}

impl KeptResponse {
    /// Whether it leaves what became of the action unknown (abandoned at its bound, not
    /// classified, or standing in for a lost answer): the action may have run.
    pub(crate) fn is_unknown(&self) -> bool {
        matches!(
            self,
            Self::Abandoned
                | Self::Omitted {
                    why: Omission::Unclassified | Omission::Interrupted,
                    ..
                }
        )
    }
}

impl Record {
    /// The record of an execution of `fingerprint` within `scope` that started and completed
    /// at these times (milliseconds since the Unix epoch) and is kept until `expires_at_ms`,
    /// with the answer of an HTTP call; see [`Record::protocol`].
    pub fn new(
        scope: ScopeHash,
        fingerprint: Fingerprint,
        started_at_ms: u64,
        completed_at_ms: u64,
        expires_at_ms: u64,
        response: KeptResponse,
    ) -> Self {
        Self {
            scope,
            fingerprint,
            started_at_ms,
            completed_at_ms,
            expires_at_ms,
            response,
            protocol: Protocol::Http,
            operation: None,
            share: None,
            note: None,
            history: Vec::new(),
        }
    }

    /// What a byte-weighted store charges for this record, its entry included. The constants
    /// were measured (resident memory over 200 000 kept records, in an earlier cache) so that
    /// a byte budget bounds the process's memory, not only the payloads; the memory store's
    /// own table needs less, so the budget errs high.
    pub fn weight(&self) -> usize {
        const ENTRY: usize = 800;
        const PER_HEADER: usize = 96;
        const PER_TRANSITION: usize = 48;
        let response = match &self.response {
            KeptResponse::Full(response) => {
                let headers: usize = response
                    .headers
                    .iter()
                    .map(|(name, value)| PER_HEADER + name.as_str().len() + value.len())
                    .sum();
                ENTRY + headers + response.body.len()
            }
            KeptResponse::Omitted { .. } | KeptResponse::Abandoned => ENTRY,
        };
        let history: usize = (self.history.iter())
            .map(|t| match &t.event {
                super::Event::Resolved { note: Some(note) } => PER_TRANSITION + note.len(),
                _ => PER_TRANSITION,
            })
            .sum();
        response + history
    }

    /// The status the execution answered (504 for an abandoned one, which never answered).
    pub fn status(&self) -> StatusCode {
        match &self.response {
            KeptResponse::Full(response) => response.status,
            KeptResponse::Omitted { status, .. } => *status,
            KeptResponse::Abandoned => StatusCode::GATEWAY_TIMEOUT,
        }
    }
}

/// Why an execution's key was released instead of kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReleaseCause {
    /// The response status says the action did not happen (5xx, 408, 425, 429).
    Status,
    /// The response is the answer of the credentials or of the request's preconditions, not
    /// the tool's to its arguments (401, 403, 407, 412, 428): a retry with other credentials
    /// or preconditions must be able to run.
    Credentials,
    /// A response other than a success said `cache-control: no-store`.
    NoStore,
    /// The classification predicate said so for another reason.
    Predicate,
    /// The inner service returned an error instead of a response.
    InnerError,
    /// The inner service panicked.
    Panic,
    /// The response body failed while being read.
    ResponseBody,
    /// The tool's server cancelled the call before it answered (an MCP server's "Request
    /// cancelled"): the tool may have run part of the way.
    Cancelled,
    /// The tool's server asked for more input before it would complete the call (an MCP
    /// `input_required` result): the call, sent again with the input, must run.
    InputRequired,
    /// Transactional mode: the tool's database transaction was rolled back (it crashed, it
    /// failed, or its commit did not go through), so none of its database changes were kept.
    RolledBack,
}

impl ReleaseCause {
    /// Whether an attempt released for this cause counts against the intent's retry budget:
    /// the tool failed, or may have. An answer of the credentials, a server's cancellation and
    /// a request for more input say nothing of the tool's health, and a retry with other
    /// credentials or with the input must run.
    pub fn counts_as_failure(&self) -> bool {
        !matches!(
            self,
            Self::Credentials | Self::Cancelled | Self::InputRequired
        )
    }

    /// A short label for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Credentials => "credentials",
            Self::NoStore => "no_store",
            Self::Predicate => "predicate",
            Self::InnerError => "inner_error",
            Self::Panic => "panic",
            Self::ResponseBody => "response_body",
            Self::Cancelled => "cancelled",
            Self::InputRequired => "input_required",
            Self::RolledBack => "rolled_back",
        }
    }
}

/// A short-lived note that the last attempt of an intent failed, for the status path.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Tombstone {
    /// Whose it was.
    pub scope: ScopeHash,
    /// What it was asked to do.
    pub fingerprint: Fingerprint,
    /// When it failed, in milliseconds since the Unix epoch.
    pub failed_at_ms: u64,
    /// The status it answered, if it answered at all.
    pub status: Option<StatusCode>,
    /// Why the key was released.
    pub cause: ReleaseCause,
    /// How many attempts of the intent in a row have failed, this one included (0 where this
    /// one's cause is not counted against the retry budget: an answer of the credentials, a
    /// server's cancellation, a request for input). The next attempt's wait follows from it.
    pub failures: u32,
    /// How long the tool asked callers to wait before they try again (`retry-after`, in
    /// seconds), if it did.
    pub retry_after_s: Option<u64>,
    /// Whose part of the store it counts against where that is not its scope (the principal
    /// or the credential that a session narrowed), so that an operator can purge every failed
    /// attempt of one caller.
    pub share: Option<ScopeHash>,
    /// The intent's story up to this attempt's release, oldest first; at most
    /// [`HISTORY_LIMIT`](super::HISTORY_LIMIT). Empty in tombstones written without it.
    pub history: Vec<Transition>,
}

impl Tombstone {
    /// The note that an attempt of `fingerprint` within `scope` failed at `failed_at_ms`
    /// (milliseconds since the Unix epoch), answering `status` if it answered, released for
    /// `cause`, asking for a wait of `retry_after_s` seconds if it did.
    pub fn new(
        scope: ScopeHash,
        fingerprint: Fingerprint,
        failed_at_ms: u64,
        status: Option<StatusCode>,
        cause: ReleaseCause,
        retry_after_s: Option<u64>,
    ) -> Self {
        Self {
            scope,
            fingerprint,
            failed_at_ms,
            status,
            cause,
            retry_after_s,
            share: None,
            failures: u32::from(cause.counts_as_failure()),
            history: Vec::new(),
        }
    }
}
