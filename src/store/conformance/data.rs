//! What the checks build, and how they compare what came back with what went in.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, SET_COOKIE};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::clock::{millis, now_ms};
use crate::key::{Fingerprint, IntentKey, ScopeHash};
use crate::store::{
    Claim, ClaimRequest, Entry, Event, Instance, KeptResponse, OwnerToken, Protocol, Record,
    ReleaseCause, RunningInfo, StoredResponse, Tombstone, Transition,
};

/// A lease no check outlives.
pub(super) const HELD: Duration = Duration::from_secs(30);
/// How long records and tombstones are kept where they must not expire during the suite.
pub(super) const KEPT: Duration = Duration::from_secs(60);
/// The lease, retention and ttl of the timing checks.
pub(super) const SHORT: Duration = Duration::from_millis(300);
/// How long the timing checks wait for something `SHORT` to expire: more than twice as long,
/// for stores whose expiry is coarse or lazy.
pub(super) const PAST_SHORT: Duration = Duration::from_millis(800);
/// How long the timing checks wait for a record or tombstone to expire.
pub(super) const PAST_KEPT_SHORT: Duration = Duration::from_millis(1000);

pub(super) fn random() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: an owner token is still unique across processes and calls.
        bytes[..16].copy_from_slice(OwnerToken::generate().as_bytes());
    }
    bytes
}

pub(super) fn fresh_key() -> IntentKey {
    IntentKey::from_bytes(random())
}

/// A claim by a new owner, with its own scope and fingerprint.
pub(super) fn request(lease: Duration) -> ClaimRequest {
    let scope = ScopeHash::from_bytes(random());
    ClaimRequest {
        token: OwnerToken::generate(),
        lease,
        scope,
        share: scope,
        fingerprint: Fingerprint::raw(None, &random()),
        started_at_ms: now_ms(),
    }
}

/// Another owner's claim of the same intent: its token, scope, fingerprint and start differ.
pub(super) fn rival(first: &ClaimRequest) -> ClaimRequest {
    ClaimRequest {
        started_at_ms: first.started_at_ms + 1,
        ..request(HELD)
    }
}

/// The record of `owner`'s execution, kept for `retention` from now.
pub(super) fn record(
    owner: &ClaimRequest,
    response: KeptResponse,
    retention: Duration,
) -> Arc<Record> {
    let now = now_ms();
    Arc::new(Record {
        scope: owner.scope,
        fingerprint: owner.fingerprint,
        started_at_ms: owner.started_at_ms,
        completed_at_ms: now,
        expires_at_ms: now.saturating_add(millis(retention)),
        response,
        // Not the defaults, so that a store that drops them is seen to.
        protocol: Protocol::Mcp,
        operation: Some(Arc::from("POST /tools/conformance")),
        share: Some(owner.share),
        note: Some(Arc::from("kept by the conformance suite")),
        history: story(owner),
    })
}

/// A story of every kind of transition, made by another instance: what a store keeps of a
/// record's or a tombstone's history must come back as it went in.
fn story(owner: &ClaimRequest) -> Vec<Transition> {
    let other = Instance::from_bytes([0xc0, 0x4f, 0x0e, 0x17]);
    let at = owner.started_at_ms;
    let events = [
        Event::Claimed,
        Event::Released {
            status: Some(StatusCode::SERVICE_UNAVAILABLE),
            cause: ReleaseCause::Status,
            duration_ms: 12,
        },
        Event::Claimed,
        Event::Released {
            status: None,
            cause: ReleaseCause::Panic,
            duration_ms: 3,
        },
        Event::Claimed,
        Event::Abandoned { duration_ms: 9_000 },
        Event::Resolved {
            note: Some(Arc::from("checked: it ran")),
        },
        Event::Claimed,
        Event::Executed {
            status: StatusCode::CREATED,
            duration_ms: 40,
        },
    ];
    (events.into_iter().zip(0..))
        .map(|(event, n)| Transition::by(other, at.saturating_sub(10_000) + n * 100, event))
        .collect()
}

/// A response with repeated, empty and custom headers and a body that is not text.
pub(super) fn full_response() -> KeptResponse {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.append(SET_COOKIE, HeaderValue::from_static("a=1"));
    headers.append(SET_COOKIE, HeaderValue::from_static("b=2; Path=/"));
    headers.insert(
        HeaderName::from_static("x-empty"),
        HeaderValue::from_static(""),
    );
    headers.insert(
        HeaderName::from_static("x-run"),
        HeaderValue::from_static("7"),
    );
    KeptResponse::Full(StoredResponse {
        status: StatusCode::CREATED,
        headers,
        body: Bytes::from_static(b"{\"sent\":true}\n\x00\xff"),
    })
}

pub(super) fn plain_response() -> KeptResponse {
    KeptResponse::Full(StoredResponse {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: Bytes::from_static(b"ok"),
    })
}

/// The tombstone of `owner`'s failed attempt: every optional field set, or none.
pub(super) fn tombstone(owner: &ClaimRequest, bare: bool) -> Arc<Tombstone> {
    Arc::new(Tombstone {
        scope: owner.scope,
        fingerprint: owner.fingerprint,
        failed_at_ms: now_ms(),
        status: (!bare).then_some(StatusCode::SERVICE_UNAVAILABLE),
        cause: if bare {
            ReleaseCause::Panic
        } else {
            ReleaseCause::Status
        },
        retry_after_s: (!bare).then_some(7),
        share: (!bare).then_some(owner.share),
        failures: if bare { 1 } else { 3 },
        history: if bare { Vec::new() } else { story(owner) },
    })
}

/// Adds to `off` each named field whose value came back other than it went in.
macro_rules! differ {
    ($off:ident, $got:expr, $want:expr; $($field:ident),+) => {
        $(if $got.$field != $want.$field {
            $off.push(format!(
                concat!(stringify!($field), " {:?}, expected {:?}"),
                $got.$field, $want.$field
            ));
        })+
    };
}

pub(super) fn running_differences(got: &RunningInfo, want: &ClaimRequest) -> Vec<String> {
    let mut off = Vec::new();
    differ!(off, got, want; started_at_ms, scope, fingerprint);
    off
}

pub(super) fn response_kind(response: &KeptResponse) -> &'static str {
    match response {
        KeptResponse::Full(_) => "Full",
        KeptResponse::Omitted { .. } => "Omitted",
        KeptResponse::Abandoned => "Abandoned",
    }
}

pub(super) fn record_differences(got: &Record, want: &Record) -> Vec<String> {
    let mut off = Vec::new();
    differ!(off, got, want; scope, fingerprint, started_at_ms, completed_at_ms, expires_at_ms);
    differ!(off, got, want; protocol);
    differ!(off, got, want; operation);
    differ!(off, got, want; share);
    differ!(off, got, want; note);
    differ!(off, got, want; history);
    match (&got.response, &want.response) {
        (KeptResponse::Full(got), KeptResponse::Full(want)) => {
            differ!(off, got, want; status, headers, body);
        }
        (
            KeptResponse::Omitted { status, why },
            KeptResponse::Omitted {
                status: want_status,
                why: want_why,
            },
        ) => {
            if (status, why) != (want_status, want_why) {
                off.push(format!(
                    "omitted {status:?} {why:?}, expected {want_status:?} {want_why:?}"
                ));
            }
        }
        (KeptResponse::Abandoned, KeptResponse::Abandoned) => {}
        (got, want) => off.push(format!(
            "response {}, expected {}",
            response_kind(got),
            response_kind(want)
        )),
    }
    off
}

pub(super) fn tombstone_differences(got: &Tombstone, want: &Tombstone) -> Vec<String> {
    let mut off = Vec::new();
    differ!(off, got, want; scope, fingerprint, failed_at_ms, status, cause, retry_after_s, share, failures);
    differ!(off, got, want; history);
    off
}

pub(super) fn claim_kind(claim: &Claim) -> &'static str {
    match claim {
        Claim::Acquired(_) => "Acquired",
        Claim::AcquiredAfterFailure(..) => "AcquiredAfterFailure",
        Claim::Running(_) => "Running",
        Claim::Completed(_) => "Completed",
    }
}

pub(super) fn entry_kind(entry: Option<&Entry>) -> &'static str {
    match entry {
        None => "nothing",
        Some(Entry::Running(_)) => "Running",
        Some(Entry::Completed(_)) => "Completed",
        Some(Entry::Failed(_)) => "Failed",
    }
}
