//! A server's event stream that ends after a priming event, before the answer: not a lost
//! answer. In the handshake era (2025-11-25, SEP-1699) a server may prime its stream with an
//! event id and close it while the tool runs, for the client to reconnect with `GET` and
//! `Last-Event-ID`; the layer, which holds the call for every caller, resumes the stream
//! itself, through the inner service and in the same session, and keeps what it finds.
//! Where it cannot (the stateless era has no resumption, the server refuses it, the bounds
//! are spent), the call is recorded as "may have run", never released: the server has it.

use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, Uri};
use serde_json::Value;

use super::era::{METHOD_HEADER, NAME_HEADER};
use super::message::is_event_stream;
use super::tool::{self, Read, ServerAnswer};
use crate::bounds::{Bufferable, Keepable, Tool};
use crate::engine::Produced;

/// How many times one call's stream is resumed at most.
const MOST_RESUMPTIONS: u32 = 10;
/// The wait before a resumption where the server named none, and the longest honoured.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(30);

/// The header a resumption names the last event it saw in.
const LAST_EVENT_ID: &str = "last-event-id";

/// What resuming one call's stream sends: the request's URI and headers (its session, its
/// credentials, its version), less those of its body and its routing.
#[derive(Debug)]
pub(crate) struct Resumption {
    uri: Uri,
    headers: HeaderMap,
}

impl Resumption {
    pub(crate) fn of(parts: &Parts) -> Self {
        let mut headers = parts.headers.clone();
        for name in [
            header::CONTENT_TYPE,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
        ] {
            headers.remove(name);
        }
        headers.remove(METHOD_HEADER);
        headers.remove(NAME_HEADER);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        Self {
            uri: parts.uri.clone(),
            headers,
        }
    }

    fn request<B: From<Bytes>>(&self, last_event_id: &str) -> Option<Request<B>> {
        let mut request = Request::new(B::from(Bytes::new()));
        *request.method_mut() = Method::GET;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        let last = HeaderValue::from_str(last_event_id).ok()?;
        request.headers_mut().insert(LAST_EVENT_ID, last);
        Some(request)
    }
}

/// Reads the server's answer to the call `id`, resuming its stream (with `resumption`, where
/// the era has one) each time it ends after a priming event, within the bounds above.
pub(crate) async fn read_resuming<S, B, ResBody>(
    inner: &mut S,
    mut response: Response<ResBody>,
    id: &Value,
    limit: usize,
    resumption: Option<Resumption>,
) -> Produced<ServerAnswer>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let mut resumed = 0;
    loop {
        let (last_event_id, retry, status) = match tool::read(response, id, limit).await {
            Read::Answered(produced) => return produced,
            Read::Resumable {
                last_event_id,
                retry,
                status,
            } => (last_event_id, retry, status),
        };
        let may_have_run = || Produced::Answered(tool::lost(id, status));
        let Some(resumption) = &resumption else {
            return may_have_run();
        };
        if resumed == MOST_RESUMPTIONS {
            tracing::warn!(
                "an MCP server's event stream was resumed too often; kept as may have run"
            );
            return may_have_run();
        }
        resumed += 1;
        tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY).min(LONGEST_RETRY)).await;
        let Some(request) = resumption.request(&last_event_id) else {
            return may_have_run();
        };
        if futures_util::future::poll_fn(|cx| inner.poll_ready(cx))
            .await
            .is_err()
        {
            return may_have_run();
        }
        match inner.call(request).await {
            Ok(next) if next.status().is_success() && is_event_stream(next.headers()) => {
                tracing::debug!(resumed, "resumed an MCP server's event stream");
                response = next;
            }
            _ => return may_have_run(),
        }
    }
}
