//! The server's answer to one protected `tools/call`, read and judged for the engine: a
//! JSON-RPC answer is kept or released by what it says, the transport's own HTTP refusal is
//! passed on and released, and an answer that never came may have run.

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};
use serde_json::{json, Value};

use super::answers;
use super::judge::{said, Statement};
use super::message::{read_answer_from, StreamPosition, Unreadable};
use super::relay::Outlet;
use crate::body::BoxError;
use crate::classify::Verdict;
use crate::engine::{Judgement, Reading, ToolAnswer};
use crate::store::{ReleaseCause, StoredResponse};

/// What the server answered a protected call, as its first caller is given it.
#[derive(Debug)]
pub(crate) enum ServerAnswer {
    /// A JSON-RPC answer to the call (or the layer's words in place of one it could not
    /// read), and whether it is kept.
    Message { message: Value, kept: bool },
    /// The server's own HTTP refusal (an unknown session; in 2026-07-28 an unknown method as
    /// 404, invalid params, a header mismatch or a version it does not serve as 400), passed
    /// on as it came.
    Refused(Response<Bytes>),
}

/// The server's answer, read: judged, or a stream to resume before it can be.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "it lives for one match, on the stack; boxing the answer would cost every call an allocation"
)]
pub(crate) enum ServerReply {
    Answered(Reading<ServerAnswer>),
    /// The event stream ended after a priming event, without the answer: the server means
    /// it to be resumed from where [`StreamPosition`] says (2025-11-25, SEP-1699).
    Resumable {
        status: StatusCode,
    },
}

/// Reads and judges the server's answer to the call `id`, on a stream that stands where
/// `primed` says (a fresh one, or one resumed). One over the stored-response cap (`limit`)
/// still reaches its caller whole and is recorded as run without its answer; only one past a
/// ceiling of sixteen times the cap (for a stream, one event past it) is too large to read at
/// all, and is kept as ran too.
pub(crate) async fn read<B>(
    response: Response<B>,
    id: &Value,
    limit: usize,
    primed: &mut StreamPosition,
    outlet: Option<&Outlet>,
) -> ServerReply
where
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    if parts
        .extensions
        .get::<crate::classify::Interrupted>()
        .is_some()
    {
        // It stands in for an answer lost after the request reached the server.
        return ServerReply::Answered(Reading::Answered(lost(id, parts.status)));
    }
    if !parts.status.is_success() {
        // Not the tool's answer: the transport's own refusal, passed on as it came. It is
        // released, so that a retry runs (one of the credentials or preconditions without a
        // refusal handed to duplicates), except a gateway's 502 or 504: the server may have the
        // call, so whether the tool ran is not known.
        let bytes = match Limited::new(body, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let mut headers = HeaderMap::new();
        if let Some(content_type) = parts.headers.get(header::CONTENT_TYPE) {
            headers.insert(header::CONTENT_TYPE, content_type.clone());
        }
        let stored = StoredResponse {
            status: parts.status,
            headers: headers.clone(),
            body: bytes.clone(),
        };
        let mut refusal = Response::new(bytes);
        *refusal.status_mut() = parts.status;
        *refusal.headers_mut() = headers;
        let verdict =
            match crate::classify::DefaultClassify::verdict(parts.status, &HeaderMap::new()) {
                verdict @ (Verdict::Unknown | Verdict::Release(ReleaseCause::Credentials)) => {
                    verdict
                }
                _ => Verdict::Release(ReleaseCause::Status),
            };
        return ServerReply::Answered(Reading::Answered(ToolAnswer {
            judged: Judgement::Verdict(verdict),
            stored: Some(stored),
            status: Some(parts.status),
            retry_after_s: None,
            answer: ServerAnswer::Refused(refusal),
        }));
    }
    let ceiling = limit.saturating_mul(16).max(16 << 20);
    let read = read_answer_from(&parts.headers, body, id, ceiling, primed, outlet).await;
    let (verdict, message) = match read {
        Ok(answer) => match said(&answer) {
            Statement::Kept => (Verdict::Keep, answer),
            Statement::Released => (Verdict::Release(ReleaseCause::Status), answer),
            Statement::Cancelled => (Verdict::Release(ReleaseCause::Cancelled), answer),
            Statement::AsksForInput => (Verdict::Release(ReleaseCause::InputRequired), answer),
            // The first caller gets what the server said; a repeat is told it may have run.
            Statement::MayHaveRun => {
                let mut answered = lost(id, parts.status);
                answered.answer = ServerAnswer::Message {
                    message: answer,
                    kept: false,
                };
                return ServerReply::Answered(Reading::Answered(answered));
            }
        },
        // The tool answered, too much to read: it ran, and a repeat must not run it again.
        Err(Unreadable::TooLarge) => (Verdict::Keep, too_large(id, ceiling)),
        Err(Unreadable::Ended) if primed.last_event_id.is_some() => {
            return ServerReply::Resumable {
                status: parts.status,
            }
        }
        // The server has the call and answered something else, or ended or broke off after it
        // began (once it primed its stream, it had the call): whether the tool ran is not known.
        Err(
            Unreadable::Interrupted
            | Unreadable::Unparsable
            | Unreadable::NotTheAnswer
            | Unreadable::Ended,
        ) => return ServerReply::Answered(Reading::Answered(lost(id, parts.status))),
        Err(Unreadable::Other(_)) if primed.last_event_id.is_some() => {
            return ServerReply::Answered(Reading::Answered(lost(id, parts.status)))
        }
        Err(unreadable @ Unreadable::Other(_)) => (
            Verdict::Release(ReleaseCause::ResponseBody),
            unanswered(id, unreadable),
        ),
    };
    ServerReply::Answered(Reading::Answered(judged(verdict, message, limit)))
}

/// A JSON-RPC answer, judged: kept whole where it fits under the cap.
fn judged(verdict: Verdict, message: Value, limit: usize) -> ToolAnswer<ServerAnswer> {
    let bytes = Bytes::from(message.to_string());
    let stored = (bytes.len() <= limit).then(|| {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        StoredResponse {
            status: StatusCode::OK,
            headers,
            body: bytes,
        }
    });
    ToolAnswer {
        judged: Judgement::Verdict(verdict),
        stored,
        // A JSON-RPC answer has no status of its own to keep.
        status: None,
        retry_after_s: None,
        answer: ServerAnswer::Message {
            kept: verdict == Verdict::Keep,
            message,
        },
    }
}

/// The tool result for a call whose answer was larger than the layer reads: it ran, and this
/// is what is kept of it.
fn too_large(id: &Value, ceiling: usize) -> Value {
    let text = format!(
        "This action ran, but its answer was larger than {ceiling} bytes, more than the layer \
         reads, so it cannot be shown. It will not be run again: do not call it again \
         expecting it to run."
    );
    let result = json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": { "outcome": "already_executed", "retryable": false },
        "isError": true,
    });
    answers::result(id, result)
}

/// A call whose answer was lost after it reached the server ([`Interrupted`]
/// (crate::Interrupted)): the tool may have run, so it is kept as run with an unknown outcome.
pub(crate) fn lost(id: &Value, status: StatusCode) -> ToolAnswer<ServerAnswer> {
    ToolAnswer {
        judged: Judgement::Interrupted,
        stored: None,
        status: Some(status),
        retry_after_s: None,
        answer: ServerAnswer::Message {
            kept: false,
            message: interrupted(id),
        },
    }
}

/// The tool result for a call whose answer was lost after it reached the server: whether
/// the tool ran is unknown, and it is kept so. A tool result, not a JSON-RPC error, so that
/// every SDK hands the words to the model.
fn interrupted(id: &Value) -> Value {
    let text = "This action may have run: its request reached the server, but no complete \
                answer came back (the connection broke, the answer could not be read, or it did \
                not come in time), so whether it took effect is not known. Calling again with \
                the same arguments will not run it: check its effect first.";
    answers::may_have_run(id, text.to_owned())
}

/// The tool result for a call whose answer broke off: whether the tool ran is unknown.
fn unanswered(id: &Value, unreadable: Unreadable) -> Value {
    let text = format!(
        "This action may have run: its answer was lost ({}). Check whether it took effect \
         before calling the tool again: calling again with the same arguments would run it \
         again.",
        unreadable.why()
    );
    answers::may_have_run(id, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    /// A server's answer of `content_type` holding `body`.
    fn answering(body: impl Into<Bytes>, content_type: &'static str) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(body.into()));
        let content_type = HeaderValue::from_static(content_type);
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
        response
    }

    /// What the layer reads of `response` as the answer to the call `id`.
    async fn answered(response: Response<Full<Bytes>>, id: u64) -> ToolAnswer<ServerAnswer> {
        match read(
            response,
            &json!(id),
            1024,
            &mut StreamPosition::default(),
            None,
        )
        .await
        {
            ServerReply::Answered(Reading::Answered(answered)) => answered,
            _ => panic!("an answer"),
        }
    }

    #[tokio::test]
    async fn an_answer_larger_than_the_layer_reads_is_kept_as_ran() {
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(17 << 20)
        );
        let answered = answered(answering(huge, "application/json"), 1).await;
        assert_eq!(
            answered.judged,
            Judgement::Verdict(Verdict::Keep),
            "kept, never released"
        );
        let ServerAnswer::Message { message, .. } = answered.answer else {
            panic!("a JSON-RPC answer");
        };
        let text = message["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("This action ran"), "{text}");
        assert_eq!(message["id"], 1);
    }

    #[tokio::test]
    async fn an_answer_marked_interrupted_is_kept_as_may_have_run() {
        let mut response = Response::new(Full::new(Bytes::from_static(b"connection reset")));
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        response
            .extensions_mut()
            .insert(crate::classify::Interrupted);
        let ServerReply::Answered(Reading::Answered(answered)) = read(
            response,
            &json!(7),
            1024,
            &mut StreamPosition::default(),
            None,
        )
        .await
        else {
            panic!("an answer stands in for the lost one");
        };
        assert_eq!(
            answered.judged,
            Judgement::Interrupted,
            "kept, never released"
        );
        let ServerAnswer::Message { message, .. } = answered.answer else {
            panic!("a JSON-RPC answer");
        };
        assert_eq!(message["id"], 7);
        assert_eq!(message["result"]["isError"], true);
        assert_eq!(message["result"]["structuredContent"]["outcome"], "unknown");
        let text = message["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("This action may have run"), "{text}");
        assert!(text.contains("will not run it"), "{text}");
    }

    /// How an event stream that breaks off with `error` after a comment is judged.
    async fn judged_broken_stream(error: BoxError) -> Judgement {
        use http_body::Frame;
        let frames: Vec<Result<Frame<Bytes>, BoxError>> = vec![
            Ok(Frame::data(Bytes::from_static(b": still working\n\n"))),
            Err(error),
        ];
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(frames));
        let mut response = Response::new(body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        let ServerReply::Answered(Reading::Answered(answered)) = read(
            response,
            &json!(3),
            1024,
            &mut StreamPosition::default(),
            None,
        )
        .await
        else {
            panic!("an answer");
        };
        answered.judged
    }

    #[tokio::test]
    async fn an_event_stream_that_breaks_off_with_interrupted_is_kept_as_may_have_run() {
        let interrupted = judged_broken_stream(Box::new(crate::classify::Interrupted)).await;
        assert_eq!(interrupted, Judgement::Interrupted);
        // Any other break of the stream still releases.
        let other = judged_broken_stream(Box::new(std::io::Error::other("reset"))).await;
        assert_eq!(
            other,
            Judgement::Verdict(Verdict::Release(ReleaseCause::ResponseBody))
        );
    }

    #[tokio::test]
    async fn an_event_stream_the_layer_cannot_read_is_kept_as_may_have_run() {
        // A field the reader does not know, before the answer: the server has the call.
        let stream = "x-trace: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n";
        let answered = answered(answering(stream, "text/event-stream"), 3).await;
        assert_eq!(
            answered.judged,
            Judgement::Interrupted,
            "kept, never released"
        );
    }

    #[tokio::test]
    async fn a_task_the_server_made_of_a_protected_call_is_kept_as_may_have_run() {
        let task = r#"{"jsonrpc":"2.0","id":4,"result":{"resultType":"task","taskId":"t","status":"working"}}"#;
        let answered = answered(answering(task, "application/json"), 4).await;
        assert_eq!(answered.judged, Judgement::Interrupted, "never released");
        let ServerAnswer::Message { message, .. } = answered.answer else {
            panic!("a JSON-RPC answer");
        };
        assert_eq!(
            message["result"]["taskId"], "t",
            "the first caller gets the server's task"
        );
    }

    #[tokio::test]
    async fn an_answer_to_another_request_or_a_stream_that_ends_without_one_may_have_run() {
        let other = r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]}}"#;
        let ended = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n";
        for (body, content_type) in [(other, "application/json"), (ended, "text/event-stream")] {
            let answered = answered(answering(body, content_type), 4).await;
            assert_eq!(answered.judged, Judgement::Interrupted, "{body}");
        }
    }
}
