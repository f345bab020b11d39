//! Observe mode on an MCP endpoint: every message is passed to the server as it came and
//! answered by it; a protected `tools/call` is keyed as when enforcing and counted.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};

use super::call::op_of;
use super::endpoint::Endpoint;
use super::envelope::{self, Envelope, ToolCall};
use super::era::Era;
use crate::body::{peek_body, Bufferable, ResponseBody};
use crate::dialect::{Answer, Tool};
use crate::engine::{Call, Refusal};
use crate::idempotency::refused;
use crate::store::{Protocol, Store};
use crate::telemetry::{self, Op};

/// Passes one POST on, counting the tool call it carries; cancellations, listings and task
/// queries go to the server as they are. The layer answers only a body that broke off, or one
/// of no declared length past four times the limit, which leave nothing whole to pass on.
pub(crate) async fn observe_post<St: Store, S, B, ResBody>(
    endpoint: Arc<Endpoint<St>>,
    mut inner: S,
    request: Request<B>,
) -> Answer<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Send + 'static,
{
    let started = telemetry::Stopwatch::start();
    let (parts, body) = request.into_parts();
    let engine = &endpoint.engine;
    let settings = &engine.settings;
    let peeked = peek_body(body, &parts.headers, settings.body_limit).await;
    // A message read whole is counted if it is a protected tool call; one that is not whole,
    // or not one JSON document naming each member once, cannot be told apart, and counts as
    // not keyable.
    let not_keyable = || {
        let op = engine.runtime.ops.of(settings.route_label.as_ref(), &parts);
        engine.observe(&parts, None, None, &op, Call::default());
        None
    };
    let op = match peeked.as_ref().map(|peeked| peeked.keyable.as_ref()) {
        Ok(Some(bytes)) => match envelope::read(bytes) {
            Envelope::ToolCall(call) => {
                let server = endpoint.policy.listings.server(&parts);
                (!endpoint.policy.passes_through(server, &call.name))
                    .then(|| count(&endpoint, &parts, bytes, &call))
            }
            Envelope::Refused(
                envelope::EnvelopeRefusal::Unparsable { .. }
                | envelope::EnvelopeRefusal::Ambiguous { .. },
            ) => not_keyable(),
            _ => None,
        },
        _ => not_keyable(),
    };
    let body = match peeked {
        Ok(peeked) => peeked.body,
        Err(unread) => return Ok(refused(settings, &Refusal::from(unread))),
    };
    let answered = inner.call(Request::from_parts(parts, body)).await;
    if let Some(op) = op {
        telemetry::answered(&op, answered.as_ref().ok().map(Response::status), started);
        telemetry::observed(&op);
    }
    Ok(answered?.map(ResponseBody::inner))
}

/// Counts a tool call under its operation, keyed as when enforcing: its scope narrowed as its
/// protocol era narrows it, its tool's own retention as the window.
fn count<St: Store>(
    endpoint: &Arc<Endpoint<St>>,
    parts: &Parts,
    bytes: &Bytes,
    call: &ToolCall,
) -> Op {
    let engine = &endpoint.engine;
    let era = Era::of(&parts.headers, call.meta.version.as_deref()).ok();
    let scope = era.and_then(|era| {
        let scope = engine.settings.scope.scope_in(parts, era.narrowing());
        scope.ok().flatten()
    });
    let op = match &scope {
        Some(_) => op_of(endpoint, parts, call),
        None => engine.runtime.ops.unscoped(),
    };
    let call = Call {
        protocol: Protocol::Mcp,
        timing: endpoint.policy.timing(&call.name),
        relaying: None,
    };
    engine.observe(parts, scope.as_ref(), Some(bytes), &op, call);
    op
}
