//! The server, as the protected path runs it: one `tools/call` in, its JSON-RPC answer out,
//! with an HTTP status that tells the layer whether to keep it. A JSON-RPC answer is told
//! from the layer's own answers by its `jsonrpc` member; only the transport's own refusal
//! (never kept) carries a private marker.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{json, Value};
use tower_service::Service;

use super::answers;
use super::envelope::ToolCall;
use super::message::{read_answer, Unreadable, TOO_LARGE};
use crate::BoxError;

/// Marks the server's own HTTP error (an unknown session, say), passed on as it is. It is
/// always released, so it never reaches a stored record, and the MCP service removes it
/// before anything reaches a client.
pub(crate) const MARK: HeaderName = HeaderName::from_static("x-tower-idempotency-mcp");
/// The value of [`MARK`].
pub(crate) const MARK_VERBATIM: &str = "verbatim";

/// Whether a JSON-RPC answer is kept for replay. A result is, `isError: true` included: it
/// is the tool's own answer. So are the deterministic refusals (an invalid request, an
/// unknown method, invalid params) and every code outside JSON-RPC's reserved range, which
/// servers define for their own refusals. The other reserved codes (internal error, parse
/// error, the -32000 to -32099 server errors) release the key for a retry, and so does a
/// server's answer to a call it cancelled: it says nothing of what the tool would answer.
pub(crate) fn keeps(answer: &Value) -> bool {
    let Some(error) = answer.get("error") else {
        return true;
    };
    if is_cancelled(error) {
        return false;
    }
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
    (-32602..=-32600).contains(&code) || !(-32768..=-32000).contains(&code)
}

/// Whether a JSON-RPC error is a server's answer to a cancelled call. Servers built on some
/// SDKs answer one with "Request cancelled" and a code outside the reserved range (0).
fn is_cancelled(error: &Value) -> bool {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let message = message.trim().trim_end_matches('.').to_ascii_lowercase();
    matches!(message.as_str(), "request cancelled" | "request canceled")
}

/// The inner service, answering the protected path.
#[derive(Clone)]
pub(crate) struct ServerPath<S> {
    pub(crate) inner: S,
    pub(crate) limit: usize,
}

type Answered<E> = Result<Response<Full<Bytes>>, E>;

impl<S, B, ResBody> Service<Request<B>> for ServerPath<S>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<Full<Bytes>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Answered<S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let id = request
            .extensions()
            .get::<ToolCall>()
            .map_or(Value::Null, |call| call.id.clone());
        let limit = self.limit;
        let answered = self.inner.call(request);
        Box::pin(async move {
            let response = answered.await?;
            Ok(answer_of(response, &id, limit).await)
        })
    }
}

async fn answer_of<B>(response: Response<B>, id: &Value, limit: usize) -> Response<Full<Bytes>>
where
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let (parts, body) = response.into_parts();
    if !parts.status.is_success() {
        // Not a JSON-RPC answer: the transport's own refusal, released and passed on.
        let bytes = match Limited::new(body, limit).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(_) => Bytes::new(),
        };
        let mut headers = HeaderMap::new();
        if let Some(content_type) = parts.headers.get(header::CONTENT_TYPE) {
            headers.insert(header::CONTENT_TYPE, content_type.clone());
        }
        headers.insert(MARK, HeaderValue::from_static(MARK_VERBATIM));
        return answered(parts.status, headers, bytes);
    }
    // An answer over the stored-response cap still reaches its caller whole, and is then
    // recorded as run without its response (the protected path sees a body over the cap);
    // only one past this ceiling is too large to read at all.
    let ceiling = limit.saturating_mul(16).max(16 << 20);
    let (status, answer) = match read_answer(&parts.headers, body, id, ceiling).await {
        Ok(answer) if keeps(&answer) => (StatusCode::OK, answer),
        Ok(answer) => (StatusCode::SERVICE_UNAVAILABLE, answer),
        // The tool answered, too much to read: it ran, and a repeat must not run it again.
        Err(Unreadable(TOO_LARGE)) => (StatusCode::OK, too_large(id, ceiling)),
        Err(unreadable) => (StatusCode::BAD_GATEWAY, unanswered(id, &unreadable)),
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    answered(status, headers, Bytes::from(answer.to_string()))
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

/// The JSON-RPC error for a call whose answer never came: whether the tool ran is unknown.
fn unanswered(id: &Value, unreadable: &Unreadable) -> Value {
    let message = format!(
        "This action may have run: its answer was lost ({}). Check whether it took effect \
         before calling the tool again: calling again with the same arguments would run it \
         again.",
        unreadable.0
    );
    let data = json!({ "outcome": "unknown", "retryable": false });
    answers::error(id, answers::INTERNAL_ERROR, &message, Some(data))
}

fn answered(status: StatusCode, headers: HeaderMap, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_larger_than_the_layer_reads_is_kept_as_ran() {
        let huge = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(17 << 20)
        );
        let mut response = Response::new(Full::new(Bytes::from(huge)));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let answered = answer_of(response, &json!(1), 1024).await;
        assert_eq!(answered.status(), StatusCode::OK, "kept, never released");
        let body = answered.into_body().collect().await.unwrap().to_bytes();
        let message: Value = serde_json::from_slice(&body).unwrap();
        let text = message["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("This action ran"), "{text}");
        assert_eq!(message["id"], 1);
    }

    #[test]
    fn results_and_deterministic_refusals_are_kept_internal_errors_released() {
        let kept = [
            json!({"id":1,"result":{"content":[],"isError":true}}),
            json!({"id":1,"error":{"code":-32602,"message":"unknown tool"}}),
            json!({"id":1,"error":{"code":-32601,"message":"no such method"}}),
            json!({"id":1,"error":{"code":4001,"message":"card declined"}}),
        ];
        for answer in kept {
            assert!(keeps(&answer), "{answer}");
        }
        let refusal = json!({"id":1,"error":{"code":0,"message":"account closed"}});
        assert!(keeps(&refusal), "code 0 alone is a server's own refusal");
        let released = [
            json!({"id":1,"error":{"code":-32603,"message":"internal"}}),
            json!({"id":1,"error":{"code":-32000,"message":"server error"}}),
            json!({"id":1,"error":{"code":-32700,"message":"parse error"}}),
            json!({"id":1,"error":{"message":"no code"}}),
            json!({"id":1,"error":{"code":0,"message":"Request cancelled"}}),
            json!({"id":1,"error":{"code":4002,"message":"Request canceled."}}),
        ];
        for answer in released {
            assert!(!keeps(&answer), "{answer}");
        }
    }
}
