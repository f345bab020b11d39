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
//! failed     scope[32] fingerprint[33] failed_ms:u64 status:u16 (0 = none) cause:u8
//!            [retry_after_s:u32, when the tool asked for a wait]
//! ```
//!
//! Integers are big-endian. The token sits at bytes 2..18 so that store scripts can compare it
//! without decoding anything else.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{
    KeptResponse, Omission, OwnerToken, Record, ReleaseCause, RunningInfo, StoredResponse,
    Tombstone,
};
use crate::key::{Fingerprint, ScopeHash};

pub(crate) const VERSION: u8 = 1;
pub(crate) const RUNNING: u8 = b'R';
pub(crate) const COMPLETED: u8 = b'C';
pub(crate) const FAILED: u8 = b'F';

/// What one intent's value decodes to.
#[derive(Debug)]
pub(crate) enum Stored {
    /// The owner token is left to the scripts, which compare it in place.
    Running(RunningInfo),
    Completed(Record),
    Failed(Tombstone),
}

/// The bytes are not a value this version wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeError(pub(crate) &'static str);

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
    let mut out = header(COMPLETED, 128 + record.weight());
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
            });
            out.extend_from_slice(&status.as_u16().to_be_bytes());
        }
        KeptResponse::Abandoned => out.push(b'A'),
    }
    out
}

pub(crate) fn encode_tombstone(tombstone: &Tombstone) -> Vec<u8> {
    let mut out = header(FAILED, 2 + 32 + 33 + 8 + 2 + 1);
    put_identity(&mut out, &tombstone.scope, &tombstone.fingerprint);
    out.extend_from_slice(&tombstone.failed_at_ms.to_be_bytes());
    out.extend_from_slice(&tombstone.status.map_or(0, |s| s.as_u16()).to_be_bytes());
    out.push(match tombstone.cause {
        ReleaseCause::Status => 1,
        ReleaseCause::NoStore => 2,
        ReleaseCause::Predicate => 3,
        ReleaseCause::InnerError => 4,
        ReleaseCause::Panic => 5,
        ReleaseCause::ResponseBody => 6,
    });
    if let Some(seconds) = tombstone.retry_after_s {
        out.extend_from_slice(&(seconds.min(u64::from(u32::MAX)) as u32).to_be_bytes());
    }
    out
}

/// Reads fields off a value; `Bytes` so that a stored body is sliced, not copied.
struct Reader {
    bytes: Bytes,
    at: usize,
}

impl Reader {
    fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len());
        let end = end.ok_or(DecodeError("truncated"))?;
        let out = self.bytes.slice(self.at..end);
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn identity(&mut self) -> Result<(ScopeHash, Fingerprint), DecodeError> {
        let scope = ScopeHash::from_bytes(self.array()?);
        let fingerprint =
            Fingerprint::from_bytes(&self.array()?).ok_or(DecodeError("fingerprint"))?;
        Ok((scope, fingerprint))
    }

    fn status(&mut self) -> Result<StatusCode, DecodeError> {
        StatusCode::from_u16(self.u16()?).map_err(|_| DecodeError("status"))
    }

    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

pub(crate) fn decode(bytes: Bytes) -> Result<Stored, DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    if r.u8()? != VERSION {
        return Err(DecodeError("unknown version"));
    }
    let stored = match r.u8()? {
        RUNNING => {
            r.take(16)?;
            let started_at_ms = r.u64()?;
            let (scope, fingerprint) = r.identity()?;
            Stored::Running(RunningInfo {
                started_at_ms,
                scope,
                fingerprint,
            })
        }
        COMPLETED => {
            let (scope, fingerprint) = r.identity()?;
            let started_at_ms = r.u64()?;
            let completed_at_ms = r.u64()?;
            let expires_at_ms = r.u64()?;
            let response = match r.u8()? {
                b'F' => {
                    let status = r.status()?;
                    let count = r.u32()?;
                    let mut headers = HeaderMap::with_capacity(count.min(64) as usize);
                    for _ in 0..count {
                        let name_len = r.u16()? as usize;
                        let name = HeaderName::from_bytes(&r.take(name_len)?)
                            .map_err(|_| DecodeError("header name"))?;
                        let value_len = r.u32()? as usize;
                        let value = HeaderValue::from_maybe_shared(r.take(value_len)?)
                            .map_err(|_| DecodeError("header value"))?;
                        headers.append(name, value);
                    }
                    let body_len = r.u32()? as usize;
                    let body = r.take(body_len)?;
                    KeptResponse::Full(StoredResponse {
                        status,
                        headers,
                        body,
                    })
                }
                b'O' => KeptResponse::Omitted {
                    status: r.status()?,
                    why: Omission::TooLarge,
                },
                b'S' => KeptResponse::Omitted {
                    status: r.status()?,
                    why: Omission::NoStore,
                },
                b'U' => KeptResponse::Omitted {
                    status: r.status()?,
                    why: Omission::Unclassified,
                },
                b'A' => KeptResponse::Abandoned,
                _ => return Err(DecodeError("response kind")),
            };
            Stored::Completed(Record {
                scope,
                fingerprint,
                started_at_ms,
                completed_at_ms,
                expires_at_ms,
                response,
            })
        }
        FAILED => {
            let (scope, fingerprint) = r.identity()?;
            let failed_at_ms = r.u64()?;
            let status = match r.u16()? {
                0 => None,
                code => Some(StatusCode::from_u16(code).map_err(|_| DecodeError("status"))?),
            };
            let cause = match r.u8()? {
                1 => ReleaseCause::Status,
                2 => ReleaseCause::NoStore,
                3 => ReleaseCause::Predicate,
                4 => ReleaseCause::InnerError,
                5 => ReleaseCause::Panic,
                6 => ReleaseCause::ResponseBody,
                _ => return Err(DecodeError("release cause")),
            };
            let retry_after_s = match r.remaining() {
                0 => None,
                _ => Some(u64::from(r.u32()?)),
            };
            Stored::Failed(Tombstone {
                scope,
                fingerprint,
                failed_at_ms,
                status,
                cause,
                retry_after_s,
            })
        }
        _ => return Err(DecodeError("unknown kind")),
    };
    r.end()?;
    Ok(stored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> (ScopeHash, Fingerprint) {
        (
            ScopeHash::of(b"s"),
            Fingerprint::raw(Some(b"text/plain"), b"b"),
        )
    }

    #[test]
    fn records_round_trip() {
        let (scope, fingerprint) = identity();
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.append("set-cookie", HeaderValue::from_static("a=1"));
        headers.append("set-cookie", HeaderValue::from_static("b=2"));
        let record = Record {
            scope,
            fingerprint,
            started_at_ms: 1,
            completed_at_ms: 2,
            expires_at_ms: 3,
            response: KeptResponse::Full(StoredResponse {
                status: StatusCode::CREATED,
                headers: headers.clone(),
                body: Bytes::from_static(b"{\"id\":1}"),
            }),
        };
        let Stored::Completed(back) = decode(Bytes::from(encode_record(&record))).unwrap() else {
            panic!("a record decodes as a record")
        };
        assert_eq!(back.scope, scope);
        assert_eq!(back.fingerprint, fingerprint);
        assert_eq!(
            (back.started_at_ms, back.completed_at_ms, back.expires_at_ms),
            (1, 2, 3)
        );
        let KeptResponse::Full(response) = back.response else {
            panic!("full")
        };
        assert_eq!(response.status, StatusCode::CREATED);
        assert_eq!(response.headers, headers);
        assert_eq!(&response.body[..], b"{\"id\":1}");
    }

    #[test]
    fn running_entries_and_tombstones_round_trip() {
        let (scope, fingerprint) = identity();
        let token = OwnerToken::generate();
        let info = RunningInfo {
            started_at_ms: 42,
            scope,
            fingerprint,
        };
        let bytes = encode_running(&token, &info);
        assert_eq!(
            &bytes[2..18],
            token.as_bytes(),
            "scripts read the token here"
        );
        let Stored::Running(back) = decode(Bytes::from(bytes)).unwrap() else {
            panic!("running")
        };
        assert_eq!(back.started_at_ms, 42);
        let tombstone = Tombstone {
            scope,
            fingerprint,
            failed_at_ms: 9,
            status: None,
            cause: ReleaseCause::Panic,
            retry_after_s: None,
        };
        let Stored::Failed(back) = decode(Bytes::from(encode_tombstone(&tombstone))).unwrap()
        else {
            panic!("failed")
        };
        assert_eq!(back.status, None);
        assert_eq!(back.cause, ReleaseCause::Panic);
        assert_eq!(back.retry_after_s, None);
        let busy = Tombstone {
            status: Some(StatusCode::TOO_MANY_REQUESTS),
            cause: ReleaseCause::Status,
            retry_after_s: Some(7),
            ..tombstone
        };
        let Stored::Failed(back) = decode(Bytes::from(encode_tombstone(&busy))).unwrap() else {
            panic!("failed")
        };
        assert_eq!(back.retry_after_s, Some(7));
    }

    #[test]
    fn responses_not_kept_say_why() {
        let (scope, fingerprint) = identity();
        for why in [
            Omission::TooLarge,
            Omission::NoStore,
            Omission::Unclassified,
        ] {
            let record = Record {
                scope,
                fingerprint,
                started_at_ms: 1,
                completed_at_ms: 2,
                expires_at_ms: 3,
                response: KeptResponse::Omitted {
                    status: StatusCode::OK,
                    why,
                },
            };
            let Stored::Completed(back) = decode(Bytes::from(encode_record(&record))).unwrap()
            else {
                panic!("a record decodes as a record")
            };
            assert!(matches!(back.response, KeptResponse::Omitted { why: w, .. } if w == why));
        }
    }

    #[test]
    fn damaged_values_are_errors_not_panics() {
        let (scope, fingerprint) = identity();
        let info = RunningInfo {
            started_at_ms: 1,
            scope,
            fingerprint,
        };
        let good = encode_running(&OwnerToken::generate(), &info);
        for cut in 0..good.len() {
            assert!(decode(Bytes::copy_from_slice(&good[..cut])).is_err());
        }
        let mut future = good.clone();
        future[0] = 2;
        assert_eq!(
            decode(Bytes::from(future)).err(),
            Some(DecodeError("unknown version"))
        );
    }
}
