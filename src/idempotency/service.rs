//! The middleware service.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::ResponseFuture;
use super::observe::observe;
use super::protect::protect;
use super::status::{asks_status, respond};
use crate::body::{BoxError, ResponseBody};
use crate::engine::Engine;
use crate::store::{MemoryStore, Store};

/// Middleware that makes repeated calls of one intent run once.
///
/// Built by [`IdempotencyLayer`](crate::IdempotencyLayer); see there for the settings.
pub struct Idempotency<S, St = MemoryStore> {
    inner: S,
    engine: Arc<Engine<St>>,
}

impl<S> Idempotency<S> {
    /// `inner` behind the layer's defaults: the same as `IdempotencyLayer::new().layer(inner)`.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use tower::service_fn;
    /// use tower_idempotency::Idempotency;
    ///
    /// let tool = service_fn(|_: Request<String>| async {
    ///     Ok::<_, Infallible>(Response::new(String::from("sent")))
    /// });
    /// let protected = Idempotency::new(tool);
    /// ```
    pub fn new(inner: S) -> Self {
        use tower_layer::Layer;
        crate::IdempotencyLayer::new().layer(inner)
    }

    /// The layer with the defaults, to configure: [`IdempotencyLayer::new`](crate::IdempotencyLayer::new).
    pub fn layer() -> crate::IdempotencyLayer {
        crate::IdempotencyLayer::new()
    }
}

impl<S, St> Idempotency<S, St> {
    pub(crate) fn from_engine(inner: S, engine: Arc<Engine<St>>) -> Self {
        Self { inner, engine }
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

// Written by hand: a derive would require `St: Clone`, but the store is shared through an Arc.
impl<S: Clone, St> Clone for Idempotency<S, St> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            engine: Arc::clone(&self.engine),
        }
    }
}

impl<S: std::fmt::Debug, St> std::fmt::Debug for Idempotency<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("inner", &self.inner)
            .field("engine", &self.engine)
            .finish()
    }
}

fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

impl<S, St, B, ResBody> Service<Request<B>> for Idempotency<S, St>
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
        let settings = &self.engine.settings;
        // In observe mode the status path is the service's, as every other path is.
        if !settings.observe && asks_status(settings, &request) {
            return respond(&self.engine, request);
        }
        let path = request.uri().path();
        if is_safe(request.method()) || !settings.paths.is_protected(path) {
            return ResponseFuture::passthrough(inner.call(request));
        }
        let (parts, body) = request.into_parts();
        if settings.observe {
            let engine = Arc::clone(&self.engine);
            return ResponseFuture::layered(observe(engine, inner, parts, body));
        }
        ResponseFuture::layered(protect(Arc::clone(&self.engine), inner, parts, body))
    }
}
