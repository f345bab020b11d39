//! [`McpIdempotency`]: the MCP mode's middleware.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use tower_service::Service;

use crate::body::BoxError;
use crate::body::ResponseBody;
use crate::idempotency::ResponseFuture;
use crate::idempotency::{asks_status, respond};
use crate::mcp::endpoint::Endpoint;
use crate::mcp::{observe, post};
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

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Unwraps the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

// Written by hand: a derive would require `St: Clone`.
impl<S: Clone, St> Clone for McpIdempotency<S, St> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            endpoint: Arc::clone(&self.endpoint),
        }
    }
}

impl<S: std::fmt::Debug, St> std::fmt::Debug for McpIdempotency<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpIdempotency")
            .field("inner", &self.inner)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

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
        let observing = engine.settings.observe;
        if !observing && asks_status(&engine.settings, &request) {
            return respond(engine, request);
        }
        let protected = engine.settings.paths.is_protected(request.uri().path());
        if request.method() != Method::POST || !protected {
            return ResponseFuture::passthrough(inner.call(request));
        }
        let endpoint = Arc::clone(&self.endpoint);
        if observing {
            return ResponseFuture::layered(observe::observe_post(endpoint, inner, request));
        }
        ResponseFuture::layered(post::post(endpoint, inner, request))
    }
}
