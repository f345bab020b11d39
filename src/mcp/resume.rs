//! A server's event stream that ends after a priming event, before the answer: not a lost
//! answer. In the handshake era (2025-11-25, SEP-1699) a server may prime its stream with an
//! event id and close it while the tool runs, for the client to reconnect with `GET` and
//! `Last-Event-ID`; the layer, which holds the call for every caller, resumes the stream
//! itself, through the inner service and with the call's session and credentials, and keeps
//! what it finds. Where it cannot (the stateless era has no resumption, the server refuses it,
//! the bounds are spent), the call is recorded as "may have run", never released: once the
//! server primed the stream, it had the call.

use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use serde_json::Value;

use super::era::{METHOD_HEADER, NAME_HEADER};
use super::message::{is_event_stream, StreamPosition};
use super::relay::Outlet;
use super::tool::{self, ServerAnswer, ServerReply};
use crate::body::{Bufferable, Keepable};
use crate::dialect::Tool;
use crate::engine::Reading;

/// How many times in a row one call's stream is resumed without the server giving a new event
/// id; a stream that moves on (a new id) starts the count again.
const MOST_RESUMPTIONS: u32 = 10;
/// The wait before a resumption where the server named none, and the longest honoured.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
const LONGEST_RETRY: Duration = Duration::from_secs(30);

/// The header a resumption names the last event it saw in.
const LAST_EVENT_ID: &str = "last-event-id";

/// Headers of the call that a resumption does not send: those of its body, its routing and
/// its conditions, and those of its hop.
const NOT_RESENT: [&str; 15] = [
    "content-type",
    "content-length",
    "content-encoding",
    "transfer-encoding",
    "expect",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "upgrade",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
];

/// The headers of a call that a request the layer sends on the call's behalf keeps: its
/// session, credentials and version, without those of its body, routing, conditions and hop.
pub(crate) fn resent_headers(parts: &Parts) -> HeaderMap {
    let mut headers = parts.headers.clone();
    // What the call's `Connection` header names is of its hop too.
    let named: Vec<HeaderName> = parts
        .headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| name.trim().parse().ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in NOT_RESENT.into_iter().chain([METHOD_HEADER, NAME_HEADER]) {
        headers.remove(name);
    }
    headers
}

/// What resuming one call's stream sends: the call's request without its body, with its
/// session, credentials, version and extensions.
#[derive(Debug)]
pub(crate) struct Resumption {
    parts: Parts,
}

impl Resumption {
    pub(crate) fn of(parts: &Parts) -> Self {
        let mut headers = resent_headers(parts);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let mut request = Request::new(());
        *request.method_mut() = Method::GET;
        *request.uri_mut() = parts.uri.clone();
        *request.version_mut() = parts.version;
        *request.headers_mut() = headers;
        *request.extensions_mut() = parts.extensions.clone();
        Self {
            parts: request.into_parts().0,
        }
    }

    fn request<B: From<Bytes>>(&self, last_event_id: &str) -> Option<Request<B>> {
        let mut parts = self.parts.clone();
        let last = HeaderValue::from_str(last_event_id).ok()?;
        parts.headers.insert(LAST_EVENT_ID, last);
        Some(Request::from_parts(parts, B::from(Bytes::new())))
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
    outlet: Option<&Outlet>,
) -> Reading<ServerAnswer>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let mut primed = StreamPosition::default();
    let mut in_a_row = 0;
    loop {
        let resumed_from = primed.last_event_id.clone();
        let status = match tool::read(response, id, limit, &mut primed, outlet).await {
            ServerReply::Answered(produced) => return produced,
            ServerReply::Resumable { status } => status,
        };
        let may_have_run = || Reading::Answered(tool::lost(id, status));
        let (Some(resumption), Some(last_event_id)) = (&resumption, &primed.last_event_id) else {
            return may_have_run();
        };
        in_a_row = if primed.last_event_id == resumed_from {
            in_a_row + 1
        } else {
            1
        };
        if in_a_row > MOST_RESUMPTIONS {
            tracing::warn!(
                "an MCP server's event stream was resumed too often; kept as may have run"
            );
            return may_have_run();
        }
        tokio::time::sleep(primed.retry.unwrap_or(DEFAULT_RETRY).min(LONGEST_RETRY)).await;
        let Some(request) = resumption.request(last_event_id) else {
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
                tracing::debug!("resumed an MCP server's event stream");
                response = next;
            }
            _ => return may_have_run(),
        }
    }
}

/// The headers a resumption keeps, for the tests.
#[cfg(test)]
fn kept(resumption: &Resumption) -> &http::HeaderMap {
    &resumption.parts.headers
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http_body_util::{BodyExt, Full};
    use serde_json::json;

    use super::*;
    use crate::engine::Judgement;

    type IntentView = Arc<Mutex<Vec<Request<Full<Bytes>>>>>;

    fn sse(events: &str) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(Bytes::from(events.to_owned())));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        response
    }

    /// A server that answers each resumption with the next of `answers`, and what it was sent.
    fn server(
        answers: Vec<Response<Full<Bytes>>>,
    ) -> (
        impl Tool<Full<Bytes>, Full<Bytes>, Error = Infallible>,
        IntentView,
    ) {
        let seen = IntentView::default();
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let record = Arc::clone(&seen);
        let service = tower::service_fn(move |request: Request<Full<Bytes>>| {
            record.lock().unwrap().push(request);
            let next = answers.lock().unwrap().next();
            async move { Ok::<_, Infallible>(next.unwrap_or_else(|| sse(""))) }
        });
        (service, seen)
    }

    fn call() -> Resumption {
        let request = Request::post("http://tools.test/mcp")
            .header("mcp-session-id", "s1")
            .header("authorization", "Bearer t")
            .header("content-type", "application/json")
            .header("content-length", "120")
            .header("connection", "x-hop")
            .header("x-hop", "1")
            .header("mcp-method", "tools/call")
            .header("x-user", "alice")
            .body(())
            .unwrap();
        Resumption::of(&request.into_parts().0)
    }

    const PRIMED: &str = "id: e1\nretry: 1\ndata: \n\n";
    const ANSWER: &str =
        "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n";

    fn judged(produced: Reading<ServerAnswer>) -> Judgement {
        match produced {
            Reading::Answered(answered) => answered.judged,
            Reading::Broken => panic!("an answer"),
        }
    }

    /// How the answer to request 7, whose stream the server primed and closed, is judged once
    /// `inner` is asked to resume it as `resumption` says (`None`: it cannot be).
    async fn judged_resuming<S>(inner: &mut S, resumption: Option<Resumption>) -> Judgement
    where
        S: Tool<Full<Bytes>, Full<Bytes>>,
    {
        let produced =
            read_resuming(inner, sse(PRIMED), &json!(7), 1 << 20, resumption, None).await;
        judged(produced)
    }

    #[tokio::test]
    async fn the_stream_is_resumed_with_a_get_that_keeps_the_session_and_credentials() {
        let (mut inner, seen) = server(vec![sse(ANSWER)]);
        let judged_as = judged_resuming(&mut inner, Some(call())).await;
        assert!(matches!(
            judged_as,
            Judgement::Verdict(crate::classify::Verdict::Keep)
        ));
        let get = seen.lock().unwrap().remove(0);
        assert_eq!(get.method(), Method::GET);
        assert_eq!(get.headers()["last-event-id"], "e1");
        for name in ["mcp-session-id", "authorization", "x-user"] {
            assert!(get.headers().contains_key(name), "{name} kept");
        }
        for name in [
            "content-type",
            "content-length",
            "x-hop",
            "mcp-method",
            "connection",
        ] {
            assert!(!get.headers().contains_key(name), "{name} left out");
        }
        let body = get.into_body().collect().await.unwrap().to_bytes();
        assert!(body.is_empty());
        assert_eq!(kept(&call())["accept"], "text/event-stream");
    }

    #[tokio::test]
    async fn a_resumed_stream_that_breaks_off_or_ends_without_a_new_id_is_resumed_again() {
        let (mut inner, seen) = server(vec![sse(": still working\n\n"), sse(ANSWER)]);
        let judged_as = judged_resuming(&mut inner, Some(call())).await;
        assert!(matches!(
            judged_as,
            Judgement::Verdict(crate::classify::Verdict::Keep)
        ));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(
            seen[1].headers()["last-event-id"],
            "e1",
            "resumed from where it stood"
        );
    }

    #[tokio::test]
    async fn a_stream_that_cannot_be_resumed_may_have_run_and_is_never_released() {
        // The server refuses the GET.
        let mut refused = Response::new(Full::new(Bytes::new()));
        *refused.status_mut() = http::StatusCode::METHOD_NOT_ALLOWED;
        let (mut inner, _) = server(vec![refused]);
        let judged_as = judged_resuming(&mut inner, Some(call())).await;
        assert_eq!(judged_as, Judgement::Interrupted);
        // The stateless era has no resumption: no GET is sent.
        let (mut inner, seen) = server(vec![]);
        let judged_as = judged_resuming(&mut inner, None).await;
        assert_eq!(judged_as, Judgement::Interrupted);
        assert!(seen.lock().unwrap().is_empty());
        // A server that primes and closes forever, never moving on: bounded.
        let (mut inner, seen) = server((0..20).map(|_| sse(PRIMED)).collect());
        let judged_as = judged_resuming(&mut inner, Some(call())).await;
        assert_eq!(judged_as, Judgement::Interrupted);
        assert_eq!(seen.lock().unwrap().len(), MOST_RESUMPTIONS as usize);
    }
}
