//! Reading the tool's HTTP response for the engine: buffered up to the stored-response cap,
//! judged by the classification rule.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, Response, StatusCode};
use http_body::Body;
use http_body_util::BodyExt;

use super::answer::written;
use super::replay::storable_headers;
use crate::body::BoxError;
use crate::body::GatheredBody;
use crate::body::ResponseBody;
use crate::classify::{is_interrupted, Interrupted};
use crate::classify::{Classify, Verdict};
use crate::engine::{Judgement, Reading, ToolAnswer};
use crate::store::StoredResponse;
use crate::user_code::guarded;
use crate::wording;

/// The tool's response as its first caller is given it.
pub(crate) type FirstResponse<B> = Response<ResponseBody<B>>;

/// Reads `response` up to `limit` bytes, without copying a body that came in one piece, and
/// judges it. One over the cap still reaches its first caller whole, and is recorded as run
/// without its response; one that breaks off is told as kept for `unknown_kept`. The
/// `request_id` header is not kept: it names the first caller's request, not a replay's.
pub(crate) async fn read<B>(
    response: Response<B>,
    limit: usize,
    rule: &Arc<dyn Classify>,
    unknown_kept: Duration,
    request_id: &HeaderName,
) -> Reading<FirstResponse<B>>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    // The tool has answered: a rule that panics leaves the outcome unknown, which is
    // recorded, never released into a second run. An answer that stands in for a lost one
    // is not the tool's to classify.
    let judged = if parts.extensions.get::<Interrupted>().is_some() {
        Judgement::Interrupted
    } else {
        Judgement::Verdict(
            guarded("classify", || rule.classify(parts.status, &parts.headers))
                .unwrap_or(Verdict::Unknown),
        )
    };
    // The wait a tool asks for matters only to a retry of an attempt that is released.
    let released = matches!(judged, Judgement::Verdict(Verdict::Release(_)));
    let wait = released.then(|| retry_after_s(&parts.headers)).flatten();
    let status = parts.status;
    let answered = |stored, answer| ToolAnswer {
        judged,
        stored,
        status: Some(status),
        retry_after_s: wait,
        answer,
    };
    // Pinned in a box so that, over the cap, the partly read body can move to the caller.
    let mut body = Box::pin(body);
    let mut gathered = GatheredBody::default();
    loop {
        match body.frame().await {
            None => {
                let body = gathered.into_bytes();
                let stored = StoredResponse {
                    status: parts.status,
                    headers: storable_headers(&parts.headers, request_id),
                    body: body.clone(),
                };
                let response = Response::from_parts(parts, ResponseBody::full(body));
                return Reading::Answered(answered(Some(stored), response));
            }
            Some(Ok(frame)) => {
                // Trailers are not kept.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                gathered.push(data);
                if gathered.len() > limit {
                    let head = gathered.into_bytes();
                    let response = Response::from_parts(parts, ResponseBody::chained(head, body));
                    return Reading::Answered(answered(None, response));
                }
            }
            Some(Err(error)) => {
                if !is_interrupted(&error.into()) {
                    return Reading::Broken;
                }
                // It broke off after it began: the tool has the request, and may have acted.
                return Reading::Answered(ToolAnswer {
                    judged: Judgement::Interrupted,
                    stored: None,
                    status: Some(StatusCode::BAD_GATEWAY),
                    retry_after_s: None,
                    answer: written(
                        StatusCode::BAD_GATEWAY,
                        &wording::answer_broke_off(unknown_kept),
                    ),
                });
            }
        }
    }
}

/// The wait a response asks for in seconds (`retry-after: 7`; the date form is not read).
fn retry_after_s(headers: &HeaderMap) -> Option<u64> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse().ok()
}
