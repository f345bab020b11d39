//! What every dialect does alike once the engine has begun a request: wait for what it
//! decides, record it, and render it in the dialect's terms. Each dialect finds the scope, the
//! operation, the body and the tool's answer in its own way; this is the one driver from there
//! on.

use http::Response;
use tracing::Instrument;

use crate::body::ResponseBody;
use crate::engine::path::Running;
use crate::engine::{self, Begun, Decided};
use crate::telemetry::{self, Op};

/// A protocol the engine's outcomes are told in, as the driver needs it: what the dialect
/// reads the tool's answer into, and how it renders what the engine decided.
pub(crate) trait Dialect<B> {
    /// The tool's answer, as the dialect reads it for the engine and hands it on.
    type Answer: Send + 'static;

    /// The engine's decision as the response the caller gets.
    fn render(&self, decided: Decided<Self::Answer>) -> Response<ResponseBody<B>>;
}

/// What the engine decided of a request it has begun: at once, or once the request's path,
/// awaited inside its span, comes to an outcome.
pub(crate) async fn decided<A, E>(
    begun: Begun<A, Running<A, E>>,
    span: &tracing::Span,
) -> Result<Decided<A>, E> {
    match begun {
        Begun::Decided(decided) => Ok(decided),
        Begun::Running(running) => {
            let ran = running.instrument(span.clone()).await;
            ran.map(|(intent, outcome)| Decided::Keyed { intent, outcome })
        }
    }
}

/// Records how the request ended (`Err`: the tool's own error ended it), renders it, and
/// counts the answer.
pub(crate) fn finish<B, E, D: Dialect<B>>(
    dialect: &D,
    op: &Op,
    span: &tracing::Span,
    started: telemetry::Stopwatch,
    decided: Result<Decided<D::Answer>, E>,
) -> Result<Response<ResponseBody<B>>, E> {
    let _entered = span.enter();
    engine::record(op, decided.as_ref().ok());
    let answered = decided.map(|decided| dialect.render(decided));
    telemetry::answered(op, answered.as_ref().ok().map(Response::status), started);
    answered
}
