//! A protected call whose caller takes an event stream, attached to the relay of the
//! execution it runs or joins: where nothing is relayed before the answer, it is answered as
//! the engine decides, as any call; from the first event relayed, its answer is an event
//! stream, sent at once, that carries each event as it comes and then the answer.

use bytes::Bytes;
use http::{header, HeaderValue, Response};
use serde_json::Value;
use sse_stream::Sse;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::dialect::McpCall;
use super::message::{is_event_stream, Form};
use super::progress;
use super::relay::Attending;
use super::tool::ServerAnswer;
use crate::body::ResponseBody;
use crate::dialect::{Answer, Telling};
use crate::engine::path::Running;
use crate::engine::relay::Attachment;
use crate::engine::{self, Decision};
use crate::headers::with_intent;
use crate::store::Store;
use crate::telemetry;

/// A live call: its dialect, and what its answer is counted with, owned: its answer may be
/// written after the request's handler has returned, at the end of its stream.
pub(crate) struct Live<St> {
    pub(crate) mcp: McpCall<St>,
    pub(crate) telling: Telling,
}

type Ran<E> = Result<Decision<ServerAnswer>, E>;

impl<St> Live<St> {
    /// Records what the engine decided and writes it in `form`, as the dialect's driver does.
    fn written<E>(&self, ran: Ran<E>, form: Form) -> Result<Response<Bytes>, E> {
        let decided = ran;
        let telling = &self.telling;
        let _entered = telling.span.enter();
        engine::record(&telling.op, decided.as_ref().ok());
        let rendering = self.mcp.rendering(form);
        let written = decided.map(|decided| rendering.written(decided));
        let status = written.as_ref().ok().map(Response::status);
        telemetry::answered(&telling.op, status, telling.started);
        written
    }

    /// The answer as the last event of a stream; none where the tool's own error ended it.
    fn last_event<E>(&self, ran: Ran<E>) -> Option<Bytes> {
        let written = self.written(ran, Form::EventStream).ok()?;
        if is_event_stream(written.headers()) {
            return Some(written.into_body());
        }
        // The server's own refusal, which is not an event: its words as one.
        let text = String::from_utf8_lossy(written.body()).into_owned();
        Some(Bytes::from(Sse::default().event("message").data(text)))
    }
}

/// Answers a live call: `running` is its path through the engine, `attached` where the
/// engine hands over its attachment to the execution's relay, `slot` the call's as its
/// cancellation names it.
pub(crate) async fn answer<St, B, E>(
    live: Live<St>,
    slot: u128,
    running: Running<ServerAnswer, E>,
    attached: oneshot::Receiver<Attachment>,
) -> Answer<B, E>
where
    St: Store,
    E: Send + 'static,
{
    let mut running = running.instrument(live.telling.span.clone());
    let token = live.mcp.call.meta.progress_token.clone();
    let mut attached = Some(attached);
    let mut attachment = None;
    let mut attending = None;
    let first = loop {
        tokio::select! {
            biased;
            event = next(&mut attachment, token.as_ref()) => match event {
                Some(event) => break event,
                None => attachment = None,
            },
            ran = &mut running => {
                let written = live.written(ran, live.mcp.form)?;
                return Ok(written.map(ResponseBody::full));
            }
            got = async { attached.as_mut()?.await.ok() }, if attached.is_some() => {
                attached = None;
                if let Some(got) = got {
                    let place = got.place();
                    attending = Some(live.mcp.endpoint.relays.attending(slot, place));
                    attachment = Some(got);
                }
            }
        }
    };
    let intent = attachment.as_ref().and_then(|attachment| attachment.intent);
    let streaming = Streaming {
        live,
        running,
        attachment,
        _attending: attending,
        first: Some(first),
        token,
    };
    let chunks = futures_util::stream::unfold(Some(streaming), |streaming| async move {
        let mut streaming = streaming?;
        if let Some(first) = streaming.first.take() {
            return Some((first, Some(streaming)));
        }
        loop {
            tokio::select! {
                // What was relayed before the answer goes before it.
                biased;
                event = next(&mut streaming.attachment, streaming.token.as_ref()) => match event {
                    Some(event) => return Some((event, Some(streaming))),
                    None => streaming.attachment = None,
                },
                ran = &mut streaming.running => {
                    return streaming.live.last_event(ran).map(|last| (last, None));
                }
            }
        }
    });
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    let response = match intent {
        Some(intent) => with_intent(response, &intent),
        None => response,
    };
    Ok(response.map(|_| ResponseBody::streamed(Box::pin(chunks))))
}

/// A live call's stream once the first event is out.
struct Streaming<St, R> {
    live: Live<St>,
    running: R,
    attachment: Option<Attachment>,
    /// Kept while the stream is, so that the client's cancellation of the call finds it.
    _attending: Option<Attending>,
    first: Option<Bytes>,
    /// The caller's progress token.
    token: Option<Value>,
}

/// The next events handed to the caller (progress under its `token`), with those already
/// waiting behind the first in the same chunk: a server that wrote them together is relayed
/// in one write, not one a event; never, without an attachment.
async fn next(attachment: &mut Option<Attachment>, token: Option<&Value>) -> Option<Bytes> {
    let Some(attachment) = attachment else {
        return std::future::pending().await;
    };
    let first = loop {
        let event = attachment.next().await?;
        if let Some(event) = progress::fitted(event, token) {
            break event;
        }
    };
    let mut waiting = std::iter::from_fn(|| attachment.ready())
        .filter_map(|event| progress::fitted(event, token))
        .peekable();
    if waiting.peek().is_none() {
        return Some(first);
    }
    let mut chunk = bytes::BytesMut::from(&first[..]);
    waiting.for_each(|event| chunk.extend_from_slice(&event));
    Some(chunk.freeze())
}
