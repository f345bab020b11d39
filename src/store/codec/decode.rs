//! Reading values back.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{
    cause_of, history, DecodeError, StoredValue, COMPLETED, FAILED, FAILURES, HISTORY, NOTE,
    OPERATION, PROTOCOL, RUNNING, SHARE, VERSION, WAIT,
};
use crate::key::{Fingerprint, ScopeHash};
use crate::store::{
    KeptResponse, Omission, OwnerToken, Protocol, Record, RunningInfo, StoredResponse, Tombstone,
};

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

    /// Hands `each` every extension left (its tag and its value), to the end: a tag this
    /// reader does not know is the caller's to skip.
    fn extensions(
        &mut self,
        mut each: impl FnMut(u8, Bytes) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        while self.remaining() > 0 {
            let tag = self.u8()?;
            let length = self.u16()? as usize;
            each(tag, self.take(length)?)?;
        }
        Ok(())
    }

    /// The next byte, left to be read.
    fn next_byte(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn end(&self) -> Result<(), DecodeError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

pub(crate) fn decode(bytes: Bytes) -> Result<StoredValue, DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    if r.u8()? != VERSION {
        return Err(DecodeError("unknown version"));
    }
    let stored = match r.u8()? {
        RUNNING => {
            let token = OwnerToken::from_bytes(r.array()?);
            let started_at_ms = r.u64()?;
            let (scope, fingerprint) = r.identity()?;
            let info = RunningInfo {
                started_at_ms,
                scope,
                fingerprint,
            };
            StoredValue::Running(token, info)
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
                        // A map holds at most 32 768 names: past them, an error, not a panic.
                        headers
                            .try_append(name, value)
                            .map_err(|_| DecodeError("too many headers"))?;
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
                b'I' => KeptResponse::Omitted {
                    status: r.status()?,
                    why: Omission::Interrupted,
                },
                b'R' => KeptResponse::Omitted {
                    status: r.status()?,
                    why: Omission::Resolved,
                },
                b'A' => KeptResponse::Abandoned,
                _ => return Err(DecodeError("response kind")),
            };
            let mut protocol = Protocol::Http;
            let (mut operation, mut share, mut note) = (None, None, None);
            let mut story = Vec::new();
            let text = |value: &[u8]| {
                std::str::from_utf8(value)
                    .map(std::sync::Arc::<str>::from)
                    .map_err(|_| DecodeError("text"))
            };
            r.extensions(|tag, value| {
                match tag {
                    PROTOCOL => {
                        protocol = match &value[..] {
                            b"M" => Protocol::Mcp,
                            b"H" => Protocol::Http,
                            _ => return Err(DecodeError("protocol")),
                        };
                    }
                    OPERATION => operation = Some(text(&value)?),
                    SHARE => share = Some(share_of(&value)?),
                    NOTE => note = Some(text(&value)?),
                    HISTORY => story = history::read(&value)?,
                    // Added later than this reader: skipped.
                    _ => {}
                }
                Ok(())
            })?;
            StoredValue::Completed(Record {
                scope,
                fingerprint,
                started_at_ms,
                completed_at_ms,
                expires_at_ms,
                response,
                protocol,
                operation,
                share,
                note,
                history: story,
            })
        }
        FAILED => {
            let (scope, fingerprint) = r.identity()?;
            let failed_at_ms = r.u64()?;
            let status = match r.u16()? {
                0 => None,
                code => Some(StatusCode::from_u16(code).map_err(|_| DecodeError("status"))?),
            };
            let cause = cause_of(r.u8()?)?;
            let (mut retry_after_s, mut share) = (None, None);
            let mut story = Vec::new();
            let mut failures = u32::from(cause.counts_as_failure());
            // As versions before the extensions wrote a wait: four bytes, the first below any
            // tag (every tag is a letter; a wait that long would be over 17 years).
            if r.remaining() == 4 && r.next_byte().is_some_and(|b| b < b'A') {
                retry_after_s = Some(u64::from(r.u32()?));
            }
            r.extensions(|tag, value| {
                match tag {
                    WAIT => {
                        let bytes =
                            <[u8; 4]>::try_from(&value[..]).map_err(|_| DecodeError("wait"))?;
                        retry_after_s = Some(u64::from(u32::from_be_bytes(bytes)));
                    }
                    SHARE => share = Some(share_of(&value)?),
                    FAILURES => {
                        let bytes =
                            <[u8; 4]>::try_from(&value[..]).map_err(|_| DecodeError("failures"))?;
                        failures = u32::from_be_bytes(bytes);
                    }
                    HISTORY => story = history::read(&value)?,
                    // Added later than this reader: skipped.
                    _ => {}
                }
                Ok(())
            })?;
            StoredValue::Failed(Tombstone {
                failures,
                scope,
                fingerprint,
                failed_at_ms,
                status,
                cause,
                retry_after_s,
                share,
                history: story,
            })
        }
        _ => return Err(DecodeError("unknown kind")),
    };
    r.end()?;
    Ok(stored)
}

/// A share's extension: its 32 bytes.
fn share_of(value: &[u8]) -> Result<ScopeHash, DecodeError> {
    let bytes = <[u8; 32]>::try_from(value).map_err(|_| DecodeError("share"))?;
    Ok(ScopeHash::from_bytes(bytes))
}
