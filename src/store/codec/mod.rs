//! The versioned binary encoding of what a network store keeps per intent.
//!
//! ```text
//! byte 0     version (1)
//! byte 1     kind: b'R' running, b'C' completed, b'F' failed
//! running    token[16] started_ms:u64 scope[32] fingerprint[33]
//! completed  scope[32] fingerprint[33] started_ms:u64 completed_ms:u64 expires_ms:u64
//!            b'F' status:u16 headers:u32 (name:u16 bytes value:u32 bytes)* body:u32 bytes
//!          | b'O' status:u16 (over the size cap) | b'S' status:u16 (marked no-store)
//!          | b'U' status:u16 (not classified) | b'A' (abandoned at its execution bound)
//!            then extensions, each tag:u8 length:u16 bytes, skipped when unknown:
//!            b'D' protocol:u8 (b'M' MCP; absent for HTTP), b'N' the operation's label,
//!            b'H' share[32] (where it is not the scope), b'T' an operator's note,
//!            b'E' the intent's history (see `history.rs`; absent when empty)
//!          | b'R' status:u16 (resolved by an operator as run)
//! failed     scope[32] fingerprint[33] failed_ms:u64 status:u16 (0 = none) cause:u8
//!            then extensions as a completed record's: b'W' retry_after_s:u32 (when the tool
//!            asked for a wait), b'H' share[32] (where it is not the scope), b'K' failures:u32
//!            (the failures in a row; absent: 1 if the cause counts, else 0), b'E' the
//!            intent's history as a record's; exactly four bytes
//!            instead are a retry_after_s:u32 as earlier versions wrote it
//! ```
//!
//! Integers are big-endian. The token sits at bytes 2..18 so that store scripts can compare it
//! without decoding anything else. A record of an HTTP call is written as versions before the
//! extensions wrote it; later fields are added as extensions, which a reader that does not
//! know them skips, so records survive additions.

mod decode;
#[cfg(fuzzing)]
pub(crate) mod fuzzing;
mod history;
#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod tests;

use super::{
    KeptResponse, Omission, OwnerToken, Protocol, Record, ReleaseCause, RunningInfo, Tombstone,
};
use crate::key::{Fingerprint, ScopeHash};

pub(crate) use decode::decode;

pub(crate) const VERSION: u8 = 1;
pub(crate) const RUNNING: u8 = b'R';
pub(crate) const COMPLETED: u8 = b'C';
pub(crate) const FAILED: u8 = b'F';

/// What one intent's value decodes to.
#[derive(Debug)]
pub(crate) enum StoredValue {
    /// A running entry, with the token of its owner.
    Running(OwnerToken, RunningInfo),
    Completed(Record),
    Failed(Tombstone),
}

#[cfg(any(feature = "redis", feature = "postgres"))]
impl StoredValue {
    /// What `get` answers of it: the running entry without its owner's token.
    pub(crate) fn into_entry(self) -> super::Entry {
        match self {
            Self::Running(_, info) => super::Entry::Running(info),
            Self::Completed(record) => super::Entry::Completed(std::sync::Arc::new(record)),
            Self::Failed(tombstone) => super::Entry::Failed(std::sync::Arc::new(tombstone)),
        }
    }
}

/// The extension that names a record's dialect.
const PROTOCOL: u8 = b'D';
/// The extension of a record's operation label.
const OPERATION: u8 = b'N';
/// The extension of a record's share, where it is not its scope.
const SHARE: u8 = b'H';
/// The extension of an operator's note.
const NOTE: u8 = b'T';
/// The extension of a failed attempt's wait, in seconds.
const WAIT: u8 = b'W';
/// The extension of a failed attempt's count of failures in a row, where it is not the one
/// its cause implies.
const FAILURES: u8 = b'K';
/// The extension of the intent's history.
const HISTORY: u8 = b'E';

/// Labels and notes longer than this are cut (at a character boundary) when encoded.
const LONGEST_TEXT: usize = 1024;

/// `text`, cut to at most [`LONGEST_TEXT`] bytes at a character boundary.
fn bounded(text: &str) -> &str {
    let mut end = text.len().min(LONGEST_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn put_extension(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(value.len() as u16).to_be_bytes());
    out.extend_from_slice(value);
}

/// The bytes are not a value this version of the encoding can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub(crate) &'static str);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "undecodable idempotency record: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

fn header(kind: u8, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.push(VERSION);
    out.push(kind);
    out
}

fn put_identity(out: &mut Vec<u8>, scope: &ScopeHash, fingerprint: &Fingerprint) {
    out.extend_from_slice(scope.as_bytes());
    out.extend_from_slice(&fingerprint.to_bytes());
}

pub(crate) fn encode_running(token: &OwnerToken, info: &RunningInfo) -> Vec<u8> {
    let mut out = header(RUNNING, 2 + 16 + 8 + 32 + 33);
    out.extend_from_slice(token.as_bytes());
    out.extend_from_slice(&info.started_at_ms.to_be_bytes());
    put_identity(&mut out, &info.scope, &info.fingerprint);
    out
}

pub(crate) fn encode_record(record: &Record) -> Vec<u8> {
    let mut out = header(COMPLETED, encoded_record_len(record));
    put_identity(&mut out, &record.scope, &record.fingerprint);
    out.extend_from_slice(&record.started_at_ms.to_be_bytes());
    out.extend_from_slice(&record.completed_at_ms.to_be_bytes());
    out.extend_from_slice(&record.expires_at_ms.to_be_bytes());
    match &record.response {
        KeptResponse::Full(response) => {
            out.push(b'F');
            out.extend_from_slice(&response.status.as_u16().to_be_bytes());
            out.extend_from_slice(&(response.headers.len() as u32).to_be_bytes());
            for (name, value) in &response.headers {
                out.extend_from_slice(&(name.as_str().len() as u16).to_be_bytes());
                out.extend_from_slice(name.as_str().as_bytes());
                out.extend_from_slice(&(value.len() as u32).to_be_bytes());
                out.extend_from_slice(value.as_bytes());
            }
            out.extend_from_slice(&(response.body.len() as u32).to_be_bytes());
            out.extend_from_slice(&response.body);
        }
        KeptResponse::Omitted { status, why } => {
            out.push(match why {
                Omission::TooLarge => b'O',
                Omission::NoStore => b'S',
                Omission::Unclassified => b'U',
                Omission::Interrupted => b'I',
                Omission::Resolved => b'R',
            });
            out.extend_from_slice(&status.as_u16().to_be_bytes());
        }
        KeptResponse::Abandoned => out.push(b'A'),
    }
    match record.protocol {
        Protocol::Http => {}
        Protocol::Mcp => put_extension(&mut out, PROTOCOL, b"M"),
    }
    if let Some(operation) = &record.operation {
        put_extension(&mut out, OPERATION, bounded(operation).as_bytes());
    }
    if let Some(share) = &record.share {
        put_extension(&mut out, SHARE, share.as_bytes());
    }
    if let Some(note) = &record.note {
        put_extension(&mut out, NOTE, bounded(note).as_bytes());
    }
    put_history(&mut out, &record.history);
    out
}

/// The last [`HISTORY_LIMIT`](super::HISTORY_LIMIT) transitions of `history`: all an encoding
/// keeps, which bounds the extension's length well within its two bytes.
fn kept(history: &[super::Transition]) -> &[super::Transition] {
    &history[history.len().saturating_sub(super::HISTORY_LIMIT)..]
}

/// The history extension, where there is a history.
fn put_history(out: &mut Vec<u8>, history: &[super::Transition]) {
    let history = kept(history);
    if history.is_empty() {
        return;
    }
    out.push(HISTORY);
    out.extend_from_slice(&(history::encoded_len(history) as u16).to_be_bytes());
    history::put(out, history);
}

/// The bytes of [`put_history`]'s extension.
fn history_len(history: &[super::Transition]) -> usize {
    match kept(history) {
        [] => 0,
        history => 3 + history::encoded_len(history),
    }
}

/// The exact length of [`encode_record`]'s bytes, so that they are written into one allocation
/// of their size: the memory store keeps them as they are.
fn encoded_record_len(record: &Record) -> usize {
    let response = match &record.response {
        KeptResponse::Full(response) => {
            let headers: usize = response
                .headers
                .iter()
                .map(|(name, value)| 2 + name.as_str().len() + 4 + value.len())
                .sum();
            1 + 2 + 4 + headers + 4 + response.body.len()
        }
        KeptResponse::Omitted { .. } => 1 + 2,
        KeptResponse::Abandoned => 1,
    };
    let protocol = match record.protocol {
        Protocol::Http => 0,
        Protocol::Mcp => 1 + 2 + 1,
    };
    let text =
        |text: &Option<std::sync::Arc<str>>| text.as_ref().map_or(0, |t| 3 + bounded(t).len());
    let share = record.share.map_or(0, |_| 3 + 32);
    2 + 32
        + 33
        + 3 * 8
        + response
        + protocol
        + text(&record.operation)
        + share
        + text(&record.note)
        + history_len(&record.history)
}

pub(crate) fn encode_tombstone(tombstone: &Tombstone) -> Vec<u8> {
    let mut out = header(FAILED, 2 + 32 + 33 + 8 + 2 + 1);
    put_identity(&mut out, &tombstone.scope, &tombstone.fingerprint);
    out.extend_from_slice(&tombstone.failed_at_ms.to_be_bytes());
    out.extend_from_slice(&tombstone.status.map_or(0, |s| s.as_u16()).to_be_bytes());
    out.push(cause_byte(tombstone.cause));
    if let Some(seconds) = tombstone.retry_after_s {
        let seconds = seconds.min(u64::from(u32::MAX)) as u32;
        put_extension(&mut out, WAIT, &seconds.to_be_bytes());
    }
    if let Some(share) = &tombstone.share {
        put_extension(&mut out, SHARE, share.as_bytes());
    }
    if tombstone.failures != u32::from(tombstone.cause.counts_as_failure()) {
        put_extension(&mut out, FAILURES, &tombstone.failures.to_be_bytes());
    }
    put_history(&mut out, &tombstone.history);
    out
}

/// A release cause's byte.
fn cause_byte(cause: ReleaseCause) -> u8 {
    match cause {
        ReleaseCause::Status => 1,
        ReleaseCause::NoStore => 2,
        ReleaseCause::Predicate => 3,
        ReleaseCause::InnerError => 4,
        ReleaseCause::Panic => 5,
        ReleaseCause::ResponseBody => 6,
        ReleaseCause::Credentials => 7,
        ReleaseCause::Cancelled => 8,
        ReleaseCause::InputRequired => 9,
        ReleaseCause::RolledBack => 10,
    }
}

/// The release cause of a byte [`cause_byte`] wrote.
fn cause_of(byte: u8) -> Result<ReleaseCause, DecodeError> {
    Ok(match byte {
        1 => ReleaseCause::Status,
        2 => ReleaseCause::NoStore,
        3 => ReleaseCause::Predicate,
        4 => ReleaseCause::InnerError,
        5 => ReleaseCause::Panic,
        6 => ReleaseCause::ResponseBody,
        7 => ReleaseCause::Credentials,
        8 => ReleaseCause::Cancelled,
        9 => ReleaseCause::InputRequired,
        10 => ReleaseCause::RolledBack,
        _ => return Err(DecodeError("release cause")),
    })
}
