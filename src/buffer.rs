//! Buffering a request body under a limit.

use bytes::Bytes;
use http::{header, HeaderMap};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::answer::{self, Answer};
use crate::BoxError;

/// Buffers the body under the limit; over it, 413 with nothing executed.
pub(crate) async fn read_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Answer>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(answer::body_too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(answer::body_too_large(limit))
        }
        Err(_) => Err(answer::body_unreadable()),
    }
}
