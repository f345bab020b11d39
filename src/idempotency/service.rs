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
use super::route::{route, Route};
use super::status::respond;
use crate::body::{BoxError, ResponseBody};
use crate::engine::Engine;
use crate::service_parts::service_parts;
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
}

service_parts!(Idempotency, engine);

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
        match route(&self.engine.settings, &request, |method| !is_safe(method)) {
            Route::Status => respond(&self.engine, request),
            Route::Pass => ResponseFuture::passthrough(inner.call(request)),
            Route::Observe => {
                let (parts, body) = request.into_parts();
                let engine = Arc::clone(&self.engine);
                ResponseFuture::layered(observe(engine, inner, parts, body))
            }
            Route::Protect => {
                let (parts, body) = request.into_parts();
                let engine = Arc::clone(&self.engine);
                ResponseFuture::layered(protect(engine, inner, parts, body))
            }
        }
    }
}
