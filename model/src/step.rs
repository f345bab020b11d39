//! One step of a trace: a call of the `Store` trait as the engine makes it, a tick of the
//! clock, or the store's restart. A trace is a list of steps, and replaying it on a fresh
//! store in a fresh paused runtime rebuilds the store exactly: every value a step writes is
//! a function of the step and the tick it runs at.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tower_idempotency::store::{
    ClaimRequest, KeptResponse, Omission, OwnerToken, Record, ReleaseCause, StoredResponse,
    Tombstone,
};

use crate::intents::Intent;

/// The model's clock ticks in whole seconds.
pub const TICK: Duration = Duration::from_secs(1);
/// How long a claim or a renewal holds, in ticks.
pub const LEASE: u8 = 2;
/// How long a kept record lives, in ticks.
pub const RETENTION: u8 = 3;
/// How long a failure's tombstone lives, in ticks.
pub const FAILURE_TTL: u8 = 1;
/// How long a caller waits for an execution elsewhere, in ticks from its call.
pub const DEADLINE: u8 = 2;

/// Milliseconds since the Unix epoch at tick 0: records carry wall-clock times.
const EPOCH_MS: u64 = 1_750_000_000_000;

/// The wall-clock milliseconds of `tick`.
pub fn ms(tick: u8) -> u64 {
    EPOCH_MS + u64::from(tick) * 1000
}

/// The tick of wall-clock milliseconds written by [`ms`].
pub fn tick_of(ms: u64) -> u8 {
    u8::try_from(ms.saturating_sub(EPOCH_MS) / 1000).unwrap_or(u8::MAX)
}

/// `ticks` as a duration.
pub fn ticks(ticks: u8) -> Duration {
    TICK * u32::from(ticks)
}

/// The owner token of the model's `n`th claim: the same on every replay.
pub fn token(n: u8) -> OwnerToken {
    let mut bytes = [0u8; 16];
    bytes[15] = n;
    bytes[0] = 0x5e;
    OwnerToken::from_bytes(bytes)
}

/// The token number written by [`token`].
pub fn token_number(token: &OwnerToken) -> u8 {
    token.as_bytes()[15]
}

/// A store call, a tick or a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `Store::claim` of an intent under a fresh token, as `engine::claim` asks it.
    Claim { intent: u8, token: u8 },
    /// `Store::complete` of an execution that started at `started`, its answer kept.
    Complete { intent: u8, token: u8, started: u8 },
    /// `Store::release` after a real failure, the tombstone counting `failures` in a row.
    Release {
        intent: u8,
        token: u8,
        started: u8,
        failures: u32,
    },
    /// `Store::extend`: the execution's renewal of its lease.
    Extend { intent: u8, token: u8 },
    /// `Store::abandon`: a claim whose answer never reached its caller is given back.
    Abandon { intent: u8, token: u8 },
    /// `Store::get`: a caller waiting on another instance polls.
    Get { intent: u8 },
    /// `Store::remove`: an operator removes what is kept.
    Remove { intent: u8 },
    /// `Store::put`: an operator resolves the intent as run.
    Put { intent: u8 },
    /// One tick of the clock.
    Tick,
    /// The store restarts with nothing it held.
    Restart,
}

impl Step {
    /// The intent the step's call names; none for a tick or a restart.
    pub fn intent(&self) -> Option<u8> {
        match *self {
            Step::Claim { intent, .. }
            | Step::Complete { intent, .. }
            | Step::Release { intent, .. }
            | Step::Extend { intent, .. }
            | Step::Abandon { intent, .. }
            | Step::Get { intent }
            | Step::Remove { intent }
            | Step::Put { intent } => Some(intent),
            Step::Tick | Step::Restart => None,
        }
    }
}

/// The claim of `intent` under token `n` at `tick`, as the engine builds it.
pub fn claim_request(intent: &Intent, n: u8, tick: u8) -> ClaimRequest {
    ClaimRequest::new(
        token(n),
        ticks(LEASE),
        intent.scope,
        intent.scope,
        intent.fingerprint,
        ms(tick),
    )
}

/// The record of token `n`'s execution, started at `started` and completed at `now`: its
/// body names the token, so that a reader can tell whose record it holds.
pub fn record(intent: &Intent, n: u8, started: u8, now: u8) -> Arc<Record> {
    let answer = StoredResponse::new(StatusCode::OK, HeaderMap::new(), Bytes::from(vec![n]));
    Arc::new(Record::new(
        intent.scope,
        intent.fingerprint,
        ms(started),
        ms(now),
        ms(now.saturating_add(RETENTION)),
        KeptResponse::Full(answer),
    ))
}

/// The operator's record of an intent resolved as run at `now`.
pub fn resolution(intent: &Intent, now: u8) -> Arc<Record> {
    let resolved = KeptResponse::Omitted {
        status: StatusCode::OK,
        why: Omission::Resolved,
    };
    Arc::new(Record::new(
        intent.scope,
        intent.fingerprint,
        ms(now),
        ms(now),
        ms(now.saturating_add(RETENTION)),
        resolved,
    ))
}

/// The tombstone of an execution that failed at `now` (a 500), `failures` in a row.
pub fn tombstone(intent: &Intent, now: u8, failures: u32) -> Arc<Tombstone> {
    let mut tombstone = Tombstone::new(
        intent.scope,
        intent.fingerprint,
        ms(now),
        Some(StatusCode::INTERNAL_SERVER_ERROR),
        ReleaseCause::Status,
        None,
    );
    tombstone.failures = failures;
    Arc::new(tombstone)
}
