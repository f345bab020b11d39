//! Observe mode over HTTP: every call of a protected route is keyed and counted, then passed
//! to the service as it came, and its answer passed back as the service gave it.

use std::future::Future;
use std::sync::Arc;

use http::request::Parts;
use http::{Request, Response};

use super::answer::with_request_id;
use super::render::render;
use crate::body::{peek_body, Bufferable, Peek, ResponseBody};
use crate::dialect::{Answer, Tool};
use crate::engine::{Call, Decision, Engine, Refusal};
use crate::headers::RequestId;
use crate::store::Store;
use crate::telemetry;

/// Counts the call (see [`Engine::observe`]) and passes it on. Nothing is refused, replayed,
/// coalesced or rewritten; the layer answers only a body that broke off, or one of no declared
/// length past four times the limit, which leave nothing whole to pass on.
pub(crate) fn observe<S, St, B, ResBody>(
    engine: Arc<Engine<St>>,
    mut inner: S,
    parts: Parts,
    body: B,
) -> impl Future<Output = Answer<ResBody, S::Error>> + Send + 'static
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Send + 'static,
    St: Store,
{
    let started = telemetry::Stopwatch::start();
    let settings = &engine.settings;
    let scope = settings.scope.scope_of(&parts).ok().flatten();
    let ops = &engine.runtime.ops;
    let op = match &scope {
        Some(_) => ops.of(settings.route_label.as_ref(), &parts),
        None => ops.unscoped(),
    };
    async move {
        let settings = &engine.settings;
        let peeked = match &scope {
            Some(_) => peek_body(body, &parts.headers, settings.body_limit).await,
            None => Ok(Peek {
                body,
                keyable: None,
            }),
        };
        let keyable = peeked.as_ref().ok().and_then(|p| p.keyable.as_ref());
        engine.observe(&parts, scope.as_ref(), keyable, &op, Call::default());
        let body = match peeked {
            Ok(peeked) => peeked.body,
            Err(unread) => {
                let answer = render(settings, Decision::Refused(Refusal::from(unread)));
                let id = RequestId::of(&parts.headers, &settings.request_id_header);
                let answer = with_request_id(answer, id.as_ref());
                telemetry::answered(&op, Some(answer.status()), started);
                return Ok(answer);
            }
        };
        let answered = inner.call(Request::from_parts(parts, body)).await;
        let answered = answered.map(|response| response.map(ResponseBody::inner));
        let status = answered.as_ref().ok().map(Response::status);
        telemetry::answered(&op, status, started);
        telemetry::observed(&op);
        answered
    }
}
