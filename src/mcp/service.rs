//! [`McpIdempotency`]: the MCP mode's middleware.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use tower_service::Service;

use super::endpoint::Endpoint;
use super::list_changed::ListChanges;
use super::observe::observe_post;
use super::post;
use crate::body::BoxError;
use crate::body::ResponseBody;
use crate::idempotency::ResponseFuture;
use crate::idempotency::{respond, route, Route};
use crate::service_parts::service_parts;
use crate::store::{MemoryStore, Store};

/// Middleware that makes an MCP server's tool calls safe to repeat; built by
/// [`McpIdempotencyLayer`](super::McpIdempotencyLayer).
pub struct McpIdempotency<S, St = MemoryStore> {
    inner: S,
    endpoint: Arc<Endpoint<St>>,
}

impl<S, St> McpIdempotency<S, St> {
    pub(crate) fn new(inner: S, endpoint: Arc<Endpoint<St>>) -> Self {
        Self { inner, endpoint }
    }
}

service_parts!(McpIdempotency, endpoint);

impl<S, St, B, ResBody> Service<Request<B>> for McpIdempotency<S, St>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body + From<Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
    ResBody: Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
    St: Store,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The service that was driven to readiness goes into the future; a clone stays.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let engine = &self.endpoint.engine;
        // MCP calls come as POSTs; every other request is the server's.
        match route(&engine.settings, &request, |method| method == Method::POST) {
            Route::Status => respond(engine, request),
            // The server's own stream of the handshake era: watched for its word that its
            // tools changed, where that is taken.
            Route::Pass
                if request.method() == Method::GET && self.endpoint.policy.validates_arguments =>
            {
                let policy = &self.endpoint.policy;
                let server = policy.listings.server_of(request.uri(), request.headers());
                match ListChanges::of(policy, server) {
                    Some(changes) => ResponseFuture::layered(async move {
                        Ok(changes.watching(inner.call(request).await?))
                    }),
                    None => ResponseFuture::passthrough(inner.call(request)),
                }
            }
            Route::Pass => ResponseFuture::passthrough(inner.call(request)),
            Route::Observe => {
                let endpoint = Arc::clone(&self.endpoint);
                ResponseFuture::layered(observe_post(endpoint, inner, request))
            }
            Route::Protect => {
                let endpoint = Arc::clone(&self.endpoint);
                ResponseFuture::layered(post::post(endpoint, inner, request))
            }
        }
    }
}
