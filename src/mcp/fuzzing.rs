//! What the fuzz targets reach of the MCP readers: the POST body's envelope and the event
//! stream an answer comes on. Built only with `--cfg fuzzing`.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue};
use http_body::Frame;
use http_body_util::StreamBody;
use serde_json::{json, Value};

use super::envelope::{self, Envelope, EnvelopeRefusal};
use super::era::RequestMeta;
use super::message::{self, StreamPosition};

/// Reads `body` as a POST body and checks the envelope against serde_json's reading of the
/// same bytes, as a server reads them: a tool call carries the id, the tool and the `_meta`
/// the server sees; a message the server would take for a tool call is never let through
/// as anything else; what the strict parser refuses is refused.
///
/// # Panics
///
/// Where the envelope and the server's reading disagree.
pub fn check_envelope(body: &[u8]) {
    let envelope = envelope::read(body);
    let strict = crate::canonical::parse(body).is_ok();
    let lenient = serde_json::from_slice::<Value>(body).ok();
    if !strict || lenient.is_none() {
        assert!(
            matches!(
                envelope,
                Envelope::Refused(
                    EnvelopeRefusal::Unparsable { .. } | EnvelopeRefusal::Ambiguous { .. }
                )
            ),
            "a body the strict parser or serde_json refuses was read as {envelope:?}"
        );
        return;
    }
    match lenient {
        Some(Value::Object(message)) => {
            let is_call =
                message.get("method").and_then(Value::as_str) == Some(envelope::TOOLS_CALL);
            let params = message.get("params");
            match &envelope {
                Envelope::ToolCall(call) => {
                    assert!(is_call, "a tool call of another method");
                    assert_eq!(message.get("id"), Some(&call.id), "the call's id");
                    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
                    assert_eq!(name, Some(call.name.as_str()), "the tool's name");
                    assert_eq!(call.meta, RequestMeta::of(params), "the call's _meta");
                }
                Envelope::Refused(
                    EnvelopeRefusal::Notification
                    | EnvelopeRefusal::BadId
                    | EnvelopeRefusal::NoToolName { .. },
                ) => assert!(is_call, "a refusal of a tool call that is not one"),
                other => assert!(!is_call, "a tool call read as {other:?}"),
            }
        }
        Some(Value::Array(batch)) => {
            let holds_call = batch.iter().any(|m| {
                let method = m.get("method").and_then(Value::as_str);
                method == Some(envelope::TOOLS_CALL) || method == Some(envelope::CANCELLED)
            });
            let refused = matches!(envelope, Envelope::Refused(EnvelopeRefusal::Batch));
            assert_eq!(holds_call, refused, "a batch read as {envelope:?}");
        }
        _ => assert!(
            matches!(envelope, Envelope::Other { id: None }),
            "a body that is not a message read as {envelope:?}"
        ),
    }
}

/// Reads the answer to the request with id `1` from an event stream that arrives in
/// `chunks`, holding at most `limit` bytes of an event: what was read and where the stream
/// stood at the end, in words.
pub async fn read_event_stream(chunks: Vec<Bytes>, limit: usize) -> String {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    let frames = chunks
        .into_iter()
        .map(|chunk| Ok::<_, Infallible>(Frame::data(chunk)));
    let body = StreamBody::new(futures_util::stream::iter(frames));
    let mut position = StreamPosition::default();
    let id = json!(1);
    let read = message::read_answer_from(&headers, body, &id, limit, &mut position, None).await;
    format!("{read:?} {position:?}")
}

/// The bytes of the unfinished event that the per-event bound counts once `chunks` have
/// arrived.
pub fn unfinished_event(chunks: &[&[u8]]) -> usize {
    message::unfinished_after(chunks)
}
