//! The HTTP dialect of the protected path: the scope and the operation from the request's
//! head, the tool's response read for the engine, and the outcome rendered as a response.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};

use super::answer::{unmarked, with_request_id};
use super::read::read;
use super::render::render;
use crate::body::{Bufferable, Keepable, ResponseBody};
use crate::dialect::{Answer, Dialect, Payload, Tool};
use crate::engine::{Decision, Engine, Reading};
use crate::headers::RequestId;
use crate::scope::{Scope, ScopeFault};
use crate::store::Store;
use crate::telemetry::Op;

/// The HTTP dialect, for one layer's engine and one request: its id goes into the answers the
/// layer writes.
struct Http<St> {
    engine: Arc<Engine<St>>,
    request_id: Option<RequestId>,
}

impl<St, S, B, ResBody> Dialect<S, B, ResBody> for Http<St>
where
    St: Store,
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
{
    type Store = St;
    type Answer = Response<ResponseBody<ResBody>>;

    fn engine(&self) -> &Arc<Engine<St>> {
        &self.engine
    }

    fn scope(&self, parts: &Parts) -> Result<Option<Scope>, ScopeFault> {
        self.engine.settings.scope.scope_of(parts)
    }

    fn operation(&self, parts: &Parts) -> Op {
        let settings = &self.engine.settings;
        self.engine
            .runtime
            .ops
            .of(settings.route_label.as_ref(), parts)
    }

    fn work(
        &self,
        mut inner: S,
        parts: Parts,
        body: Bytes,
    ) -> impl Future<Output = Result<Reading<Self::Answer>, S::Error>> + Send + 'static {
        let settings = &self.engine.settings;
        let limit = settings.response_limit;
        let rule = Arc::clone(&settings.classify);
        let request_id = settings.request_id_header.clone();
        // How long an outcome that is not known is kept on this path.
        let unknown_kept =
            (settings.paths.retention(parts.uri.path())).min(settings.unknown_retention);
        async move {
            let response = inner
                .call(Request::from_parts(parts, B::from(body)))
                .await?;
            let response = unmarked(response);
            Ok(read(response, limit, &rule, unknown_kept, &request_id).await)
        }
    }

    fn render(&self, decided: Decision<Self::Answer>) -> Response<ResponseBody<ResBody>> {
        let response = render(&self.engine.settings, decided);
        with_request_id(response, self.request_id.as_ref())
    }
}

/// Runs a protected HTTP request (its parts and body) to its answer.
pub(crate) fn protect<S, St, B, ResBody>(
    engine: Arc<Engine<St>>,
    inner: S,
    parts: Parts,
    body: B,
) -> impl Future<Output = Answer<ResBody, S::Error>> + Send + 'static
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
    St: Store,
{
    let request_id = RequestId::of(&parts.headers, &engine.settings.request_id_header);
    let http = Http { engine, request_id };
    crate::dialect::protect(http, inner, parts, Payload::Unread(body))
}
