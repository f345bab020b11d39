//! Buffering a request body under a limit.

use bytes::Bytes;
use http::{header, HeaderMap};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::bounds::BoxError;
use crate::engine::Refusal;

/// Buffers the body under the limit; over it, 413 with nothing executed.
pub(crate) async fn read_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Refusal>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(Refusal::BodyTooLarge(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Refusal::BodyTooLarge(limit))
        }
        Err(_) => Err(Refusal::BodyUnreadable),
    }
}
