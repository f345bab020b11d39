//! The protected path over HTTP: scope, body, then the engine; its outcome rendered.

use std::future::Future;
use std::sync::Arc;

use http::request::Parts;
use http::{Request, Response};
use tracing::Instrument;

use super::read::read;
use super::render::render;
use crate::body::read_body;
use crate::body::ResponseBody;
use crate::body::{Bufferable, Keepable};
use crate::dialect::Tool;
use crate::engine::{self, Begun, Call, Decided, Engine, Refusal, Scoped};
use crate::settings::Settings;
use crate::store::Store;
use crate::telemetry::{self, Op};

type Answered<B, E> = Result<Response<ResponseBody<B>>, E>;

/// Where a protected request went.
#[allow(
    clippy::large_enum_variant,
    reason = "it lives for one match, on the stack; boxing would cost every request an allocation"
)]
enum Went<B, E> {
    /// To the engine, which decided (or the tool's error ended it).
    Decided(Result<Decided<Response<ResponseBody<B>>>, E>),
    /// Past it: no scope, and the layer lets such requests through unprotected.
    Past(Answered<B, E>),
}

impl<B, E> Went<B, E> {
    /// Refused before the engine decided anything: nothing ran.
    fn refused(refusal: Refusal) -> Self {
        Self::Decided(Ok(Decided::Refused(refusal)))
    }
}

/// Runs a protected request (its parts and body) to its answer, in a span of its own, and
/// counts the answer.
///
/// What needs no waiting is done before the future is made, and the future is one async block
/// that uses what it captured in place: each step that logs runs inside the span, and only the
/// awaited futures are instrumented, so that the future every request carries holds one copy
/// of each value it keeps across a wait.
pub(crate) fn protect<S, St, B, ResBody>(
    engine: Arc<Engine<St>>,
    mut inner: S,
    parts: Parts,
    body: B,
) -> impl Future<Output = Answered<ResBody, S::Error>> + Send + 'static
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
    St: Store,
{
    let started = telemetry::Stopwatch::start();
    let settings = &engine.settings;
    let scope = settings.scope.scope_of(&parts);
    // Labelled after the scope check: callers without a scope share one label, so they cannot
    // grow the label set.
    let ops = &engine.runtime.ops;
    let op = match &scope {
        Ok(Some(_)) => ops.of(settings.route_label.as_ref(), &parts),
        _ => ops.unscoped(),
    };
    let span = telemetry::request_span(&op);
    let scoped = span.in_scope(|| engine::scoped(settings, scope, &op));
    async move {
        let settings = &engine.settings;
        // Every answer of a request that reached the engine leaves this block (one refused
        // before it, or passed through, returns at once), and nothing the block held is kept
        // across the yield after it.
        'protected: {
            // In a block of its own, so that what it held (the scope, what `begin` took and
            // returned) is not kept across the execution's wait.
            let execution = {
                let scope = match scoped {
                    Scoped::Protect(scope) => scope,
                    Scoped::PassThrough => {
                        // Boxed: a path off the common one, whose future would widen every
                        // request's.
                        let passing = Box::pin(inner.call(Request::from_parts(parts, body)));
                        let response = passing.instrument(span.clone()).await;
                        let went = Went::Past(response.map(|r| r.map(ResponseBody::inner)));
                        return finish(settings, &op, &span, started, went);
                    }
                    Scoped::Refuse(refusal) => {
                        return finish(settings, &op, &span, started, Went::refused(refusal));
                    }
                };
                let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
                    Ok(bytes) => bytes,
                    Err(unread) => {
                        let refused = Went::refused(Refusal::from(unread));
                        return finish(settings, &op, &span, started, refused);
                    }
                };
                let limit = settings.response_limit;
                let rule = Arc::clone(&settings.classify);
                let work = move |parts, bytes| async move {
                    let response = inner
                        .call(Request::from_parts(parts, B::from(bytes)))
                        .await?;
                    Ok(read(response, limit, &rule).await)
                };
                let call = Call::default();
                match span.in_scope(|| engine.begin(parts, bytes, &scope, &op, call, work)) {
                    Begun::Decided(decided) => {
                        let went = Went::Decided(Ok(decided));
                        break 'protected finish(settings, &op, &span, started, went);
                    }
                    Begun::Running(execution) => execution,
                }
            };
            let executed = execution.instrument(span.clone()).await;
            let decided = executed.map(|(intent, outcome)| Decided::Keyed { intent, outcome });
            finish(settings, &op, &span, started, Went::Decided(decided))
        }
    }
}

/// Records how the request ended, renders the engine's decision, and counts the answer.
fn finish<B, E>(
    settings: &Settings,
    op: &Op,
    span: &tracing::Span,
    started: telemetry::Stopwatch,
    went: Went<B, E>,
) -> Answered<B, E> {
    let answered = match went {
        Went::Past(answered) => answered,
        Went::Decided(decided) => {
            let _entered = span.enter();
            engine::record(op, decided.as_ref().ok());
            decided.map(|decided| render(settings, decided))
        }
    };
    telemetry::answered(op, answered.as_ref().ok().map(Response::status), started);
    answered
}
