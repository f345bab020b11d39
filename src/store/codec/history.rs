//! The history extension of records and tombstones: each transition as
//! `at_ms:u64 instance[4] kind:u8 length:u8 bytes`, one after another.
//!
//! ```text
//! b'c' claimed    (nothing)
//! b'x' executed   status:u16 duration_ms:u64
//! b'a' abandoned  duration_ms:u64
//! b'r' released   status:u16 (0 = none) cause:u8 duration_ms:u64
//! b'v' resolved   the operator's note, at most 240 bytes (cut at a character boundary)
//! ```
//!
//! A transition of a kind this reader does not know is skipped, so that kinds can be added.

use std::sync::Arc;

use http::StatusCode;

use super::{cause_byte, cause_of, DecodeError};
use crate::store::{Event, Instance, Transition, HISTORY_LIMIT};

/// The longest note a resolution's transition keeps, in bytes (the record keeps it whole).
const LONGEST_NOTE: usize = 240;

const CLAIMED: u8 = b'c';
const EXECUTED: u8 = b'x';
const ABANDONED: u8 = b'a';
const RELEASED: u8 = b'r';
const RESOLVED: u8 = b'v';

/// `note`, cut to at most [`LONGEST_NOTE`] bytes at a character boundary.
fn short(note: &str) -> &str {
    let mut end = note.len().min(LONGEST_NOTE);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    &note[..end]
}

/// The bytes of one transition's own fields.
fn payload_len(event: &Event) -> usize {
    match event {
        Event::Claimed => 0,
        Event::Executed { .. } => 2 + 8,
        Event::Abandoned { .. } => 8,
        Event::Released { .. } => 2 + 1 + 8,
        Event::Resolved { note } => note.as_deref().map_or(0, |note| short(note).len()),
    }
}

/// The length of the extension's value for `history`: at most 16 × 269 bytes, well within
/// an extension's 65 535.
pub(super) fn encoded_len(history: &[Transition]) -> usize {
    (history.iter())
        .map(|t| 8 + 4 + 1 + 1 + payload_len(&t.event))
        .sum()
}

pub(super) fn put(out: &mut Vec<u8>, history: &[Transition]) {
    for transition in history {
        out.extend_from_slice(&transition.at_ms.to_be_bytes());
        out.extend_from_slice(transition.instance.as_bytes());
        let event = &transition.event;
        out.push(match event {
            Event::Claimed => CLAIMED,
            Event::Executed { .. } => EXECUTED,
            Event::Abandoned { .. } => ABANDONED,
            Event::Released { .. } => RELEASED,
            Event::Resolved { .. } => RESOLVED,
        });
        out.push(payload_len(event) as u8);
        match event {
            Event::Claimed => {}
            Event::Executed {
                status,
                duration_ms,
            } => {
                out.extend_from_slice(&status.as_u16().to_be_bytes());
                out.extend_from_slice(&duration_ms.to_be_bytes());
            }
            Event::Abandoned { duration_ms } => out.extend_from_slice(&duration_ms.to_be_bytes()),
            Event::Released {
                status,
                cause,
                duration_ms,
            } => {
                out.extend_from_slice(&status.map_or(0, |s| s.as_u16()).to_be_bytes());
                out.push(cause_byte(*cause));
                out.extend_from_slice(&duration_ms.to_be_bytes());
            }
            Event::Resolved { note } => {
                out.extend_from_slice(note.as_deref().map_or("", short).as_bytes());
            }
        }
    }
}

/// Reads the extension's value back; a transition of an unknown kind is left out.
pub(super) fn read(mut value: &[u8]) -> Result<Vec<Transition>, DecodeError> {
    let mut history = Vec::new();
    while !value.is_empty() {
        let (head, rest) = split(value, 8 + 4 + 1 + 1)?;
        let (payload, rest) = split(rest, usize::from(head[13]))?;
        value = rest;
        let at_ms = u64::from_be_bytes(head[..8].try_into().expect("eight bytes"));
        let instance = Instance::from_bytes(head[8..12].try_into().expect("four bytes"));
        let event = match head[12] {
            CLAIMED => Event::Claimed,
            EXECUTED => Event::Executed {
                status: status(payload)?.ok_or(DecodeError("history status"))?,
                duration_ms: u64_at(payload, 2)?,
            },
            ABANDONED => Event::Abandoned {
                duration_ms: u64_at(payload, 0)?,
            },
            RELEASED => Event::Released {
                status: status(payload)?,
                cause: cause_of(*payload.get(2).ok_or(DecodeError("history"))?)?,
                duration_ms: u64_at(payload, 3)?,
            },
            RESOLVED => Event::Resolved {
                note: match payload {
                    [] => None,
                    note => Some(Arc::from(
                        std::str::from_utf8(note).map_err(|_| DecodeError("history note"))?,
                    )),
                },
            },
            // Added later than this reader: skipped.
            _ => continue,
        };
        history.push(Transition::by(instance, at_ms, event));
    }
    // Bytes that hold more than a record keeps, as no encoder here writes them: the last ones.
    let excess = history.len().saturating_sub(HISTORY_LIMIT);
    history.drain(..excess);
    Ok(history)
}

fn split(value: &[u8], n: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    if value.len() < n {
        return Err(DecodeError("history truncated"));
    }
    Ok(value.split_at(n))
}

/// The status in a payload's first two bytes; `None` for 0.
fn status(payload: &[u8]) -> Result<Option<StatusCode>, DecodeError> {
    let bytes: [u8; 2] =
        (payload.get(..2).and_then(|b| b.try_into().ok())).ok_or(DecodeError("history"))?;
    match u16::from_be_bytes(bytes) {
        0 => Ok(None),
        code => StatusCode::from_u16(code)
            .map(Some)
            .map_err(|_| DecodeError("history status")),
    }
}

fn u64_at(payload: &[u8], at: usize) -> Result<u64, DecodeError> {
    let bytes: [u8; 8] =
        (payload.get(at..at + 8).and_then(|b| b.try_into().ok())).ok_or(DecodeError("history"))?;
    Ok(u64::from_be_bytes(bytes))
}
