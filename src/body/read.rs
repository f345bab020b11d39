//! Buffering bodies: a request's under a limit, and the chunks of any body gathered into one.

use bytes::{Buf, Bytes, BytesMut};
use http::{header, HeaderMap};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use super::BoxError;

/// Why a request body was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unread {
    /// It is over this limit, declared or as it came.
    TooLarge(usize),
    /// It broke off.
    Broken,
}

/// Buffers the body under the limit; over it, nothing is executed.
///
/// Written out rather than with `BodyExt::collect`, which keeps every chunk in a queue: a body
/// that arrives in one chunk (the common case) is handed on as that chunk, with no allocation
/// ([`GatheredBody`]).
pub(crate) async fn read_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Unread>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    if declares_more(headers, limit) {
        return Err(Unread::TooLarge(limit));
    }
    let mut body = std::pin::pin!(Limited::new(body, limit));
    let mut gathered = GatheredBody::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| match error.downcast_ref::<LengthLimitError>() {
            Some(_) => Unread::TooLarge(limit),
            None => Unread::Broken,
        })?;
        // Trailers carry nothing the key or the tool reads here.
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        gathered.push(data.copy_to_bytes(data.remaining()));
    }
    Ok(gathered.into_bytes())
}

/// A request body as observe mode read it: the body to pass on unchanged, and the bytes to key
/// the call by where it was read whole within the limit.
pub(crate) struct Peek<B> {
    pub(crate) body: B,
    pub(crate) keyable: Option<Bytes>,
}

/// How far past the limit observe mode reads a body that declares no length: a body is only
/// passed on whole, and past this it is not held.
pub(crate) const OBSERVED_CEILING: usize = 4;

/// Reads a body for observe mode: whole where it is within `limit` (keyable); not at all where
/// it declares more; to its end where it declares no length and runs past the limit, as the
/// service's body is rebuilt from bytes, up to [`OBSERVED_CEILING`] times `limit` (past that,
/// and where it breaks off, there is nothing whole to pass on).
pub(crate) async fn peek_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Peek<B>, Unread>
where
    B: Body + From<Bytes>,
    B::Error: Into<BoxError>,
{
    if declares_more(headers, limit) {
        let keyable = None;
        return Ok(Peek { body, keyable });
    }
    let ceiling = limit.saturating_mul(OBSERVED_CEILING);
    let mut body = std::pin::pin!(body);
    let mut gathered = GatheredBody::default();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Unread::Broken)?;
        // Trailers are dropped, as when enforcing: the service's body is rebuilt from bytes.
        if let Ok(mut data) = frame.into_data() {
            gathered.push(data.copy_to_bytes(data.remaining()));
        }
        if gathered.len() > ceiling {
            return Err(Unread::TooLarge(ceiling));
        }
    }
    let within = gathered.len() <= limit;
    let bytes = gathered.into_bytes();
    // A clone of `Bytes` shares the buffer: the body is not copied.
    let keyable = within.then(|| bytes.clone());
    Ok(Peek {
        body: B::from(bytes),
        keyable,
    })
}

/// Whether the request's `Content-Length` is over `limit`.
fn declares_more(headers: &HeaderMap, limit: usize) -> bool {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|length| length > limit as u64)
}

/// A body's chunks, gathered: one chunk stays as it came, with no copy; more are joined.
#[derive(Debug, Default)]
pub(crate) struct GatheredBody {
    first: Option<Bytes>,
    joined: Option<BytesMut>,
}

impl GatheredBody {
    pub(crate) fn push(&mut self, chunk: Bytes) {
        match (&mut self.joined, self.first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&chunk),
            (None, Some(earlier)) => {
                let mut both = BytesMut::with_capacity(earlier.len() + chunk.len());
                both.extend_from_slice(&earlier);
                both.extend_from_slice(&chunk);
                self.joined = Some(both);
            }
            (None, None) => self.first = Some(chunk),
        }
    }

    /// Bytes gathered so far.
    pub(crate) fn len(&self) -> usize {
        match (&self.joined, &self.first) {
            (Some(joined), _) => joined.len(),
            (None, Some(first)) => first.len(),
            (None, None) => 0,
        }
    }

    pub(crate) fn into_bytes(self) -> Bytes {
        match self.joined {
            Some(joined) => joined.freeze(),
            None => self.first.unwrap_or_default(),
        }
    }
}
