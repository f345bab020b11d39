//! JSON-RPC messages over Streamable HTTP: finding the answer to one request in a response
//! body (`application/json` or an SSE stream), and writing one answer in the form the
//! request's `Accept` asks for.

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderValue, Response};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use crate::body::BoxError;
use crate::classify::is_interrupted;

/// How an answer is written: the client's `Accept` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Json,
    EventStream,
}

impl Form {
    /// JSON when the request accepts it (Streamable HTTP clients accept both), else an SSE
    /// stream of one event when that is all it accepts.
    pub(crate) fn of(headers: &HeaderMap) -> Self {
        let accepts = |wanted: &str| {
            headers
                .get_all(header::ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|range| range.split(';').next().unwrap_or("").trim())
                .any(|range| range.eq_ignore_ascii_case(wanted))
        };
        let any = headers.get(header::ACCEPT).is_none()
            || accepts("*/*")
            || accepts("application/*")
            || accepts("application/json");
        if !any && accepts("text/event-stream") {
            Self::EventStream
        } else {
            Self::Json
        }
    }
}

/// Whether a response's body is an SSE stream.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Whether `message` is the answer (a result or an error) to the request with `id`.
pub(crate) fn is_answer_to(message: &Value, id: &Value) -> bool {
    message.get("id") == Some(id)
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// Why no answer could be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unreadable {
    /// The answer was larger than the layer reads: the tool answered, so it ran.
    TooLarge,
    /// The body broke off with an [`Interrupted`](crate::Interrupted): the answer was lost
    /// after the request reached the server.
    Interrupted,
    /// The event stream held a line its reader rejects (a field it does not know, say),
    /// where the answer may have been: the server has the call, and may have run it.
    Unparsable,
    /// The event stream ended, or broke off after an event with an id, without the answer.
    /// Where the stream had an event id (a priming event, [`Primed`]), the server means the
    /// client to resume it from there (2025-11-25, SEP-1699): the call goes on at the server.
    Ended,
    /// The body was an answer, but to another request: the server has the call, and may
    /// have run it.
    NotTheAnswer,
    /// The body broke off otherwise: why.
    Other(&'static str),
}

impl Unreadable {
    /// Why, in words.
    pub(crate) fn why(&self) -> &'static str {
        match self {
            Self::TooLarge => "an answer larger than the layer reads",
            Self::Interrupted => "the answer was lost after the request reached the server",
            Self::Unparsable => "the server's event stream could not be read",
            Self::Ended => "the event stream ended without the answer",
            Self::NotTheAnswer => "the server answered another request",
            Self::Other(why) => why,
        }
    }

    /// A body that broke off: an interruption, or `otherwise`.
    fn broken(error: &BoxError, otherwise: &'static str) -> Self {
        if is_interrupted(error) {
            Self::Interrupted
        } else {
            Self::Other(otherwise)
        }
    }
}

/// A body error as a `std::error::Error`, which the SSE reader asks for.
#[derive(Debug)]
struct BodyError(BoxError);

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

/// The bytes of the event being read, counted as they come: what the SSE reader holds before
/// it can hand the event over. A blank line ends an event; lines end with LF or CRLF (a
/// stream that ends its lines with a lone CR is counted as one event, and so bounded as one).
/// A chunk is searched from its end for the last blank line, where a stream's chunks usually
/// end, so that its bytes are not walked again beside the SSE reader.
#[derive(Debug, Default)]
struct Unfinished {
    held: usize,
    /// Whether the bytes before this chunk ended a line.
    at_line_start: bool,
}

impl Unfinished {
    /// Counts `chunk` in; the bytes of the event still unfinished after it.
    fn take(&mut self, chunk: &[u8]) -> usize {
        let ends_event = |at: usize| {
            let before = match chunk[..at] {
                [.., b'\r'] => at - 1,
                _ => at,
            };
            match before.checked_sub(1) {
                Some(previous) => chunk[previous] == b'\n',
                None => self.at_line_start,
            }
        };
        let last_blank = (0..chunk.len())
            .rev()
            .find(|&at| chunk[at] == b'\n' && ends_event(at));
        self.held = match last_blank {
            Some(at) => chunk.len() - 1 - at,
            None => self.held + chunk.len(),
        };
        if let Some(&last) = chunk.iter().rev().find(|&&byte| byte != b'\r') {
            self.at_line_start = last == b'\n';
        }
        self.held
    }
}

/// One event of a stream grew past the bound before it ended.
#[derive(Debug)]
struct PastTheBound;

impl std::fmt::Display for PastTheBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event larger than the layer reads")
    }
}

impl std::error::Error for PastTheBound {}

/// Whether the SSE reader's body error is an event passing its bound.
fn is_past_the_bound(error: &BoxError) -> bool {
    error
        .downcast_ref::<BodyError>()
        .is_some_and(|error| error.0.is::<PastTheBound>())
}

/// Where one call's event stream stands, across its resumptions: the last event id the
/// server gave (the place to resume from) and the wait it asked for before a reconnection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Primed {
    pub(crate) last_event_id: Option<String>,
    pub(crate) retry: Option<std::time::Duration>,
}

/// Reads the answer to the request `id` from a response body, up to `limit` bytes (for a
/// stream, per event). An SSE stream is read only up to that answer: progress notifications
/// before it are dropped, and a stream the server keeps open afterwards is let go.
pub(crate) async fn read_answer<B>(
    headers: &HeaderMap,
    body: B,
    id: &Value,
    limit: usize,
) -> Result<Value, Unreadable>
where
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    read_answer_from(headers, body, id, limit, &mut Primed::default()).await
}

/// [`read_answer`], for a stream that may resume an earlier one: `primed` holds where the
/// stream stood before, and learns the event ids and waits this one gives.
pub(crate) async fn read_answer_from<B>(
    headers: &HeaderMap,
    body: B,
    id: &Value,
    limit: usize,
    primed: &mut Primed,
) -> Result<Value, Unreadable>
where
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    if is_event_stream(headers) {
        // Events are read one at a time and those before the answer dropped, so the stream as
        // a whole may run as long as the tool does; what the reader holds is bounded per event.
        let mut unfinished = Unfinished::default();
        let chunks = body.into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(|error| BodyError(error.into()))?;
            if unfinished.take(&chunk) > limit {
                return Err(BodyError(Box::new(PastTheBound)));
            }
            Ok(chunk)
        });
        let mut events = std::pin::pin!(SseStream::from_bytes_stream(chunks));
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                // One event past the bound, still coming: the tool is answering, so it ran.
                Err(sse_stream::Error::Body(error)) if is_past_the_bound(&error) => {
                    return Err(Unreadable::TooLarge)
                }
                // Broken off after an event the client may resume from: resumed.
                Err(sse_stream::Error::Body(_)) if primed.last_event_id.is_some() => break,
                Err(sse_stream::Error::Body(error)) => {
                    return Err(Unreadable::broken(&error, "the event stream broke off"))
                }
                // The reader gives up on the rest of what it was given with it.
                Err(_) => return Err(Unreadable::Unparsable),
            };
            if let Some(id) = event.id {
                primed.last_event_id = Some(id);
            }
            if let Some(ms) = event.retry {
                primed.retry = Some(std::time::Duration::from_millis(ms));
            }
            let Some(data) = event.data else { continue };
            if data.len() > limit {
                return Err(Unreadable::TooLarge);
            }
            if let Ok(message) = serde_json::from_str::<Value>(&data) {
                if is_answer_to(&message, id) {
                    return Ok(message);
                }
            }
        }
        return Err(Unreadable::Ended);
    }
    let bytes = match Limited::new(body, limit).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) if error.is::<LengthLimitError>() => return Err(Unreadable::TooLarge),
        Err(error) => return Err(Unreadable::broken(&error, "the answer could not be read")),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(message) if is_answer_to(&message, id) => Ok(message),
        Ok(message) if message.get("result").is_some() || message.get("error").is_some() => {
            Err(Unreadable::NotTheAnswer)
        }
        _ => Err(Unreadable::Other(
            "the answer was not a JSON-RPC response to the call",
        )),
    }
}

/// One JSON-RPC message as a response in `form`, with `headers` kept (less the body's own).
pub(crate) fn write(message: &Value, form: Form, mut headers: HeaderMap) -> Response<Bytes> {
    headers.remove(header::CONTENT_LENGTH);
    let json = message.to_string();
    let (content_type, body) = match form {
        Form::Json => ("application/json", Bytes::from(json)),
        Form::EventStream => (
            "text/event-stream",
            Bytes::from(Sse::default().event("message").data(json)),
        ),
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let mut response = Response::new(body);
    *response.headers_mut() = headers;
    response
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use http_body::Frame;
    use http_body_util::{Full, StreamBody};
    use serde_json::json;

    fn headers(content_type: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, content_type.parse().unwrap());
        headers
    }

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, value.parse().unwrap());
        headers
    }

    #[tokio::test]
    async fn the_answer_is_found_after_priming_and_progress_events() {
        let stream = "data: \nid: 0\nretry: 3000\n\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
            data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\nid: 1/0\n\n";
        let body = Full::new(Bytes::from(stream));
        let found = read_answer(&headers("text/event-stream"), body, &json!(7), 1 << 20)
            .await
            .unwrap();
        assert_eq!(
            found,
            json!({"jsonrpc":"2.0","id":7,"result":{"content":[]}})
        );
    }

    #[tokio::test]
    async fn a_stream_that_ends_after_a_priming_event_names_where_to_resume() {
        let stream = "id: s1-0\nretry: 250\ndata: \n\n";
        let body = Full::new(Bytes::from(stream));
        let mut primed = Primed::default();
        let sse = headers("text/event-stream");
        let found = read_answer_from(&sse, body, &json!(7), 1 << 20, &mut primed).await;
        assert_eq!(found, Err(Unreadable::Ended));
        let expected = Primed {
            last_event_id: Some("s1-0".to_owned()),
            retry: Some(std::time::Duration::from_millis(250)),
        };
        assert_eq!(primed, expected);
        // A resumed stream that gives no new id keeps where the call stood.
        let body = Full::new(Bytes::from(": just a comment\n\n"));
        let found = read_answer_from(&sse, body, &json!(7), 1 << 20, &mut primed).await;
        assert_eq!(found, Err(Unreadable::Ended));
        assert_eq!(primed, expected);
    }

    #[tokio::test]
    async fn an_answer_to_another_id_is_not_taken() {
        let body = Full::new(Bytes::from(r#"{"jsonrpc":"2.0","id":8,"result":{}}"#));
        let found = read_answer(&headers("application/json"), body, &json!(7), 1 << 20).await;
        assert!(found.is_err());
        let stream = "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{}}\n\n";
        let body = Full::new(Bytes::from(stream));
        let found = read_answer(&headers("text/event-stream"), body, &json!(7), 1 << 20).await;
        assert!(found.is_err());
    }

    /// An event stream of `chunk`, repeated without end, counting the bytes read of it.
    fn endless(
        chunk: &'static str,
        read: Arc<AtomicUsize>,
    ) -> impl Body<Data = Bytes, Error = Infallible> + Send {
        let frames = futures_util::stream::repeat_with(move || {
            read.fetch_add(chunk.len(), Ordering::Relaxed);
            Ok::<_, Infallible>(Frame::data(Bytes::from_static(chunk.as_bytes())))
        });
        StreamBody::new(frames)
    }

    #[tokio::test]
    async fn a_tool_that_streams_notifications_past_the_bound_is_read_to_its_answer() {
        // Four times the bound and more of notifications, each within it, then the answer: the
        // notifications are dropped as they come, so the stream is read on to the answer.
        let note = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
        let answer = "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";
        let stream = format!("{}{answer}", note.repeat(64));
        let body = Full::new(Bytes::from(stream));
        let found = read_answer(
            &headers("text/event-stream"),
            body,
            &json!(7),
            4 * note.len(),
        )
        .await
        .unwrap();
        assert_eq!(found["result"], json!({"content": []}));
    }

    #[tokio::test]
    async fn one_event_that_never_ends_is_read_no_further_than_the_bound() {
        let read = Arc::new(AtomicUsize::new(0));
        let chunk = "data: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let body = endless(chunk, Arc::clone(&read));
        let bound = 64 * chunk.len();
        let found = read_answer(&headers("text/event-stream"), body, &json!(7), bound).await;
        assert_eq!(found, Err(Unreadable::TooLarge));
        let read = read.load(Ordering::Relaxed);
        assert!(
            read <= bound + chunk.len(),
            "{read} bytes read, bound {bound}"
        );
    }

    #[test]
    fn an_event_ends_at_a_blank_line_whichever_line_ends_it_uses() {
        let mut unfinished = Unfinished::default();
        assert_eq!(unfinished.take(b"data: a\r\n\r\ndata: bc"), 8);
        assert_eq!(unfinished.take(b"\n"), 9);
        assert_eq!(unfinished.take(b"\ndata: d\n"), 8);
        assert_eq!(unfinished.take(b"\n"), 0);
    }

    #[test]
    fn json_is_written_unless_only_an_event_stream_is_accepted() {
        assert_eq!(Form::of(&HeaderMap::new()), Form::Json);
        assert_eq!(
            Form::of(&accept("application/json, text/event-stream")),
            Form::Json
        );
        assert_eq!(Form::of(&accept("text/event-stream")), Form::EventStream);
        assert_eq!(
            Form::of(&accept("text/event-stream;q=1")),
            Form::EventStream
        );
    }

    #[test]
    fn an_event_stream_answer_is_one_message_event() {
        let message = json!({"jsonrpc":"2.0","id":1,"result":{}});
        let response = write(&message, Form::EventStream, HeaderMap::new());
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        let text = std::str::from_utf8(response.body()).unwrap();
        assert!(text.starts_with("event: message\ndata: {"), "{text}");
        assert!(text.ends_with("\n\n"), "{text}");
    }
}
