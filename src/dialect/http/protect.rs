//! The protected path over HTTP: scope, body, then the engine; its outcome rendered.

use std::sync::Arc;

use http::{Request, Response};
use tracing::Instrument;

use super::read::read;
use super::render::render;
use crate::body::ResponseBody;
use crate::bounds::{Bufferable, Keepable, Tool};
use crate::buffer::read_body;
use crate::engine::{self, Begun, Call, Decided, Engine, Scoped};
use crate::store::Store;
use crate::telemetry;

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

/// Runs a protected request to its answer, in a span of its own, and counts the answer.
pub(crate) async fn protect<S, St, B, ResBody>(
    engine: Arc<Engine<St>>,
    mut inner: S,
    request: Request<B>,
) -> Answered<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
    St: Store,
{
    let started = std::time::Instant::now();
    let (parts, body) = request.into_parts();
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
    let went = async {
        let scope = match engine::scoped(settings, scope, &op) {
            Scoped::Protect(scope) => scope,
            Scoped::PassThrough => {
                // Boxed: a path off the common one, whose future would widen every request's.
                let passing = Box::pin(inner.call(Request::from_parts(parts, body)));
                let response = passing.await;
                return Went::Past(response.map(|r| r.map(ResponseBody::inner)));
            }
            Scoped::Refuse(refusal) => return Went::Decided(Ok(Decided::Refused(refusal))),
        };
        let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
            Ok(bytes) => bytes,
            Err(refusal) => return Went::Decided(Ok(Decided::Refused(refusal))),
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
        // Awaited here only when the intent runs: the wait holds one box, not the steps
        // before it.
        Went::Decided(match engine.begin(parts, bytes, &scope, &op, call, work) {
            Begun::Decided(decided) => Ok(decided),
            Begun::Running(execution) => execution
                .await
                .map(|(intent, outcome)| Decided::Keyed { intent, outcome }),
        })
    }
    .instrument(span.clone())
    .await;
    let answered = match went {
        Went::Past(answered) => answered,
        Went::Decided(decided) => {
            let _entered = span.enter();
            engine::record(&op, decided.as_ref().ok());
            decided.map(|decided| render(settings, decided))
        }
    };
    telemetry::answered(&op, answered.as_ref().ok().map(Response::status), started);
    answered
}
