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
use crate::dialect::{decided, finish, Dialect, Tool};
use crate::engine::{self, Call, Decided, Engine, Refusal, Scoped};
use crate::settings::Settings;
use crate::store::Store;
use crate::telemetry;

type Answered<B, E> = Result<Response<ResponseBody<B>>, E>;

/// The HTTP dialect, as the driver renders in it.
struct Http<'a>(&'a Settings);

impl<B: Send + 'static> Dialect<B> for Http<'_> {
    type Answer = Response<ResponseBody<B>>;

    fn render(&self, decided: Decided<Self::Answer>) -> Response<ResponseBody<B>> {
        render(self.0, decided)
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
        // In a block of its own, so that what it held (the scope, what `begin` took) is not
        // kept across the execution's wait; a request refused before it, or passed through,
        // is answered from inside.
        let begun = {
            let scope = match scoped {
                Scoped::Protect(scope) => scope,
                Scoped::PassThrough => {
                    // Boxed: a path off the common one, whose future would widen every
                    // request's.
                    let passing = Box::pin(inner.call(Request::from_parts(parts, body)));
                    let response = passing.instrument(span.clone()).await;
                    let answered = response.map(|r| r.map(ResponseBody::inner));
                    let status = answered.as_ref().ok().map(Response::status);
                    telemetry::answered(&op, status, started);
                    return answered;
                }
                Scoped::Refuse(refusal) => {
                    let refused = Ok(Decided::Refused(refusal));
                    return finish(&Http(settings), &op, &span, started, refused);
                }
            };
            let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
                Ok(bytes) => bytes,
                Err(unread) => {
                    let refused = Ok(Decided::Refused(Refusal::from(unread)));
                    return finish(&Http(settings), &op, &span, started, refused);
                }
            };
            let limit = settings.response_limit;
            let rule = Arc::clone(&settings.classify);
            // How long an outcome that is not known is kept on this path.
            let unknown_kept =
                (settings.paths.retention(parts.uri.path())).min(settings.unknown_retention);
            let work = move |parts, bytes| async move {
                let response = inner
                    .call(Request::from_parts(parts, B::from(bytes)))
                    .await?;
                Ok(read(response, limit, &rule, unknown_kept).await)
            };
            let call = Call::default();
            span.in_scope(|| engine.begin(parts, bytes, &scope, &op, call, work))
        };
        let decided = decided(begun, &span).await;
        finish(&Http(settings), &op, &span, started, decided)
    }
}
