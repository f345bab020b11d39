//! The one protected path, whatever the protocol: scope, operation, span, the scope's
//! decision (protect, pass through, refuse), the body, the engine, and the answer rendered
//! and counted. A protocol says only what differs, in its [`Dialect`].

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use tracing::Instrument;

use super::Tool;
use crate::body::{read_body, Bufferable, Keepable, ResponseBody};
use crate::engine::path::Running;
use crate::engine::{self, Beginning, Call, Decision, Engine, Reading, Refusal, ScopeDecision};
use crate::scope::{Scope, ScopeFault};
use crate::store::Store;
use crate::telemetry::{self, Op};

/// A protected request's answer, or the inner service's error.
pub(crate) type Answer<B, E> = Result<Response<ResponseBody<B>>, E>;

/// What a protocol does on the protected path: how it finds the request's scope and
/// operation, calls the tool and reads its answer for the engine, and renders what the engine
/// decided. [`protect`] does the rest.
pub(crate) trait Dialect<S, B, ResBody>: Send + Sized + 'static
where
    S: Tool<B, ResBody>,
{
    /// The store of the layer the request came through.
    type Store: Store;
    /// The tool's answer, as the dialect reads it for the engine and hands it on.
    type Answer: Send + 'static;

    /// The layer's engine.
    fn engine(&self) -> &Arc<Engine<Self::Store>>;

    /// Whose request it is: `None` where it names no caller.
    fn scope(&self, parts: &Parts) -> Result<Option<Scope>, ScopeFault>;

    /// The operation label of a request that has a scope.
    fn operation(&self, parts: &Parts) -> Op;

    /// What the engine is to know of the call beyond its request (its protocol, its
    /// deadlines, where what the server says mid-call goes); asked once, before it begins.
    fn call(&mut self, _parts: &Parts) -> Call {
        Call::default()
    }

    /// The call of the tool, and its answer read for the engine: what an execution runs.
    fn work(
        &self,
        inner: S,
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Reading<Self::Answer>, S::Error>> + Send + 'static;

    /// The engine's decision as the response the caller gets.
    fn render(&self, decided: Decision<Self::Answer>) -> Response<ResponseBody<ResBody>>;

    /// The answer of a request on its path through the engine: what it comes to, rendered and
    /// counted. A protocol that answers otherwise while the execution runs (an event stream)
    /// says so here.
    fn answer_running(
        self,
        running: Running<Self::Answer, S::Error>,
        telling: Telling,
    ) -> impl Future<Output = Answer<ResBody, S::Error>> + Send {
        async move {
            let decided = running.instrument(telling.span.clone()).await;
            finish(&self, &telling, decided)
        }
    }
}

/// A request's body: as it came, or already read by the dialect (to find what it calls).
pub(crate) enum Payload<B> {
    Unread(B),
    #[cfg_attr(
        not(feature = "mcp"),
        allow(dead_code, reason = "only MCP reads the body before the path")
    )]
    Read(Bytes),
}

/// What a request's answer is counted and logged with: its operation, its span, and when it
/// started.
pub(crate) struct Telling {
    pub(crate) op: Op,
    pub(crate) span: tracing::Span,
    pub(crate) started: telemetry::Stopwatch,
}

/// Runs a protected request (its parts and body) to its answer, in a span of its own, and
/// counts the answer.
///
/// What needs no waiting is done before the future is made, and the future is one async block
/// that uses what it captured in place: each step that logs runs inside the span, and only the
/// awaited futures are instrumented, so that the future every request carries holds one copy
/// of each value it keeps across a wait.
pub(crate) fn protect<D, S, B, ResBody>(
    mut dialect: D,
    mut inner: S,
    parts: Parts,
    body: Payload<B>,
) -> impl Future<Output = Answer<ResBody, S::Error>> + Send + 'static
where
    D: Dialect<S, B, ResBody>,
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    let started = telemetry::Stopwatch::start();
    let scope = dialect.scope(&parts);
    // Labelled after the scope check: callers without a scope share one label, so they cannot
    // grow the label set.
    let op = match &scope {
        Ok(Some(_)) => dialect.operation(&parts),
        _ => dialect.engine().runtime.ops.unscoped(),
    };
    let span = telemetry::request_span(&op);
    let scoped = span.in_scope(|| engine::scoped(&dialect.engine().settings, scope, &op));
    async move {
        let telling = Telling { op, span, started };
        // In a block of its own, so that what it held (the scope, what `begin` took) is not
        // kept across the execution's wait; a request refused before it, or passed through,
        // is answered from inside.
        let begun = {
            let scope = match scoped {
                ScopeDecision::Protect(scope) => scope,
                ScopeDecision::PassThrough => {
                    let body = match body {
                        Payload::Unread(body) => body,
                        Payload::Read(bytes) => B::from(bytes),
                    };
                    // Boxed: a path off the common one, whose future would widen every
                    // request's.
                    let passing = Box::pin(inner.call(Request::from_parts(parts, body)));
                    let response = passing.instrument(telling.span.clone()).await;
                    let answered = response.map(|r| r.map(ResponseBody::inner));
                    let status = answered.as_ref().ok().map(Response::status);
                    telemetry::answered(&telling.op, status, telling.started);
                    return answered;
                }
                ScopeDecision::Refuse(refusal) => {
                    let refused = Ok(Decision::Refused(refusal));
                    return finish(&dialect, &telling, refused);
                }
            };
            let bytes = match body {
                Payload::Read(bytes) => bytes,
                Payload::Unread(body) => {
                    let limit = dialect.engine().settings.body_limit;
                    match read_body(body, &parts.headers, limit).await {
                        Ok(bytes) => bytes,
                        Err(unread) => {
                            let refused = Ok(Decision::Refused(Refusal::from(unread)));
                            return finish(&dialect, &telling, refused);
                        }
                    }
                }
            };
            let call = dialect.call(&parts);
            let engine = dialect.engine();
            let work = |parts, bytes| dialect.work(inner, parts, bytes);
            let span = &telling.span;
            span.in_scope(|| engine.begin(parts, bytes, &scope, &telling.op, call, work))
        };
        // A decision the engine made at once (a refusal, a replay this process holds) is
        // answered here, with no future of the dialect's.
        match begun {
            Beginning::Decided(decided) => finish(&dialect, &telling, Ok(decided)),
            Beginning::Running(running) => dialect.answer_running(running, telling).await,
        }
    }
}

/// Records how the request ended (`Err`: the tool's own error ended it), renders it, and
/// counts the answer.
pub(crate) fn finish<D, S, B, ResBody>(
    dialect: &D,
    telling: &Telling,
    decided: Result<Decision<D::Answer>, S::Error>,
) -> Answer<ResBody, S::Error>
where
    D: Dialect<S, B, ResBody>,
    S: Tool<B, ResBody>,
{
    let _entered = telling.span.enter();
    engine::record(&telling.op, decided.as_ref().ok());
    let answered = decided.map(|decided| dialect.render(decided));
    let status = answered.as_ref().ok().map(Response::status);
    telemetry::answered(&telling.op, status, telling.started);
    answered
}
