//! Every call traceable: its request id read, or minted as a UUID v7, and given back; its W3C
//! trace context (`traceparent`, `tracestate`) continued by a span of the proxy's own, which
//! the upstream is sent as the parent of its work; and one log line when it is answered, in
//! that span, with the intent's first characters.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tower::{Service, ServiceExt};
use tower_http::request_id::{MakeRequestId, RequestId};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::body::{Answering, Inbound, Outbound};
use crate::routes::Routes;

/// The longest request id taken from a client, as the layer writes ids.
const REQUEST_ID_MAX: usize = 128;

/// Mints a request id where a request has none: a UUID v7, which sorts by time.
#[derive(Debug, Clone, Copy)]
pub struct MintV7;

impl MakeRequestId for MintV7 {
    fn make_request_id<B>(&mut self, _request: &Request<B>) -> Option<RequestId> {
        let id = uuid::Uuid::now_v7().to_string();
        HeaderValue::from_str(&id).ok().map(RequestId::new)
    }
}

/// Drops a client's request id that cannot be logged and written as it is (more than one,
/// longer than 128 bytes, or not visible ASCII), so that a new one is minted in its place.
pub fn drop_unusable_request_id(headers: &mut HeaderMap, name: &HeaderName) {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return;
    };
    let bytes = first.as_bytes();
    let usable = !bytes.is_empty()
        && bytes.len() <= REQUEST_ID_MAX
        && bytes.iter().all(u8::is_ascii_graphic)
        && values.next().is_none();
    if !usable {
        headers.remove(name);
    }
}

/// The routes, each call in a span that continues its trace.
#[derive(Clone)]
pub struct Traced {
    inner: Routes,
    request_id: Arc<HeaderName>,
}

impl Traced {
    pub fn new(inner: Routes, request_id: HeaderName) -> Self {
        Self {
            inner,
            request_id: Arc::new(request_id),
        }
    }
}

static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

impl Service<Request<Inbound>> for Traced {
    type Response = Response<Outbound>;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Inbound>) -> Self::Future {
        let started = Instant::now();
        let propagator = TraceContextPropagator::new();
        let parent = propagator.extract(&HeaderExtractor(request.headers()));
        let id = request.headers().get(&*self.request_id);
        let id = id.and_then(|id| id.to_str().ok()).unwrap_or_default();
        let span = tracing::info_span!(
            "request",
            request_id = id,
            trace_id = tracing::field::Empty,
            intent = tracing::field::Empty,
        );
        // The client's span is this one's parent; without one, this span starts a trace.
        let _ = span.set_parent(parent);
        let context = span.context();
        let own = context.span().span_context().clone();
        if own.is_valid() {
            span.record("trace_id", own.trace_id().to_string());
        }
        // The upstream hears this span as the parent of its work, in place of the client's.
        let headers = request.headers_mut();
        headers.remove(&TRACEPARENT);
        headers.remove(&TRACESTATE);
        propagator.inject_context(&context, &mut HeaderInjector(headers));
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let answering = self.inner.clone().oneshot(request);
        let logged = span.clone();
        Box::pin(
            async move {
                let answered = answering.await;
                if let Ok(response) = &answered {
                    let intent = response.headers().get(tower_idempotency::INTENT_HEADER);
                    if let Some(prefix) = intent.and_then(|v| v.to_str().ok()?.get(..12)) {
                        logged.record("intent", prefix);
                    }
                    tracing::info!(
                        %method,
                        path,
                        status = response.status().as_u16(),
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "answered"
                    );
                }
                answered
            }
            .instrument(span),
        )
    }
}
