//! JSON-RPC messages over Streamable HTTP: finding the answer to one request in a response
//! body (`application/json` or an SSE stream), and writing one answer in the form the
//! request's `Accept` asks for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderMap, HeaderValue, Response};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::Value;
use sse_stream::{Sse, SseStream};

use super::relay::Outlet;
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
        let accepts = |wanted: &str| accepts(headers, wanted);
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

/// Whether the request's `Accept` names the media range `wanted` itself.
pub(crate) fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|range| range.split(';').next().unwrap_or("").trim())
        .any(|range| range.eq_ignore_ascii_case(wanted))
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
    /// Where the stream had an event id (a priming event, [`StreamPosition`]), the server means the
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
struct PartialEvent {
    held: usize,
    /// The last two bytes of the chunks before this one (zero before the first): whether a
    /// line feed at the start of a chunk ends a blank line depends on them.
    tail: [u8; 2],
}

impl PartialEvent {
    /// Counts `chunk` in; the bytes of the event still unfinished after it.
    fn take(&mut self, chunk: &[u8]) -> usize {
        let tail = self.tail;
        // The byte `back` places before `at`, in this chunk or the ones before it.
        let before = |at: usize, back: usize| match at.checked_sub(back) {
            Some(place) => chunk[place],
            None => tail[2 - (back - at)],
        };
        // A line feed ends a blank line where the line before it ended: LF, or LF CR.
        let ends_event = |at: usize| match before(at, 1) {
            b'\n' => true,
            b'\r' => before(at, 2) == b'\n',
            _ => false,
        };
        let last_blank = (0..chunk.len())
            .rev()
            .find(|&at| chunk[at] == b'\n' && ends_event(at));
        self.held = match last_blank {
            Some(at) => chunk.len() - 1 - at,
            None => self.held + chunk.len(),
        };
        self.tail = match chunk {
            [.., second, last] => [*second, *last],
            [last] => [tail[1], *last],
            [] => tail,
        };
        self.held
    }
}

/// The bytes of the unfinished event counted once `chunks` have arrived, for the fuzz targets.
#[cfg(fuzzing)]
pub(crate) fn unfinished_after(chunks: &[&[u8]]) -> usize {
    let mut unfinished = PartialEvent::default();
    chunks.iter().fold(0, |_, chunk| unfinished.take(chunk))
}

/// One event of a stream grew past the bound before it ended.
#[derive(Debug)]
struct OverLimit;

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an event larger than the layer reads")
    }
}

impl std::error::Error for OverLimit {}

/// Whether the SSE reader's body error is an event passing its bound.
fn is_past_the_bound(error: &BoxError) -> bool {
    error
        .downcast_ref::<BodyError>()
        .is_some_and(|error| error.0.is::<OverLimit>())
}

/// Where one call's event stream stands, across its resumptions: the last event id the
/// server gave (the place to resume from) and the wait it asked for before a reconnection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StreamPosition {
    pub(crate) last_event_id: Option<String>,
    pub(crate) retry: Option<std::time::Duration>,
}

/// Reads the answer to the request `id` from a response body, up to `limit` bytes (for a
/// stream, per event). An SSE stream is read only up to that answer: the messages before it
/// are dropped, and a stream the server keeps open afterwards is let go.
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
    read_answer_from(
        headers,
        body,
        id,
        limit,
        &mut StreamPosition::default(),
        None,
    )
    .await
}

/// [`read_answer`], for a stream that may resume an earlier one: `primed` holds where the
/// stream stood before, and learns the event ids and waits this one gives. The messages
/// before the answer go to `outlet` where there is one, as they come.
pub(crate) async fn read_answer_from<B>(
    headers: &HeaderMap,
    body: B,
    id: &Value,
    limit: usize,
    primed: &mut StreamPosition,
    outlet: Option<&Outlet>,
) -> Result<Value, Unreadable>
where
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    if is_event_stream(headers) {
        // Events are read one at a time and those before the answer relayed or dropped, so the
        // stream as a whole may run as long as the tool does; what the reader holds is bounded
        // per event.
        let mut unfinished = PartialEvent::default();
        let mut data = Box::pin(body.into_data_stream().map(move |chunk| {
            let chunk = chunk.map_err(|error| BodyError(error.into()))?;
            if unfinished.take(&chunk) > limit {
                return Err(BodyError(Box::new(OverLimit)));
            }
            Ok(chunk)
        }));
        // Once the reader rejects a line, the body is let go: the events it finished before
        // that line still count, whichever chunk they came in with, and nothing after it.
        let rejected = Arc::new(AtomicBool::new(false));
        let let_go = Arc::clone(&rejected);
        let chunks = futures_util::stream::poll_fn(move |cx| {
            if let_go.load(Ordering::Relaxed) {
                Poll::Ready(None)
            } else {
                data.poll_next_unpin(cx)
            }
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
                // The reader gives up on the chunk it was given: the events it finished before
                // the line it rejects come next, then the stream ends.
                Err(_) => {
                    rejected.store(true, Ordering::Relaxed);
                    continue;
                }
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
                if let Some(outlet) = outlet {
                    outlet.pass(&message, &data);
                }
            }
        }
        if rejected.load(Ordering::Relaxed) {
            return Err(Unreadable::Unparsable);
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
mod tests;
