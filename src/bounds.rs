//! The bounds the layer needs of the service it wraps and of the bodies it carries, named once
//! for the crate's own functions (the public `Service` impls spell them out).

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

/// The error type bodies are converted into.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A service whose calls can run detached: sendable, with a sendable future and error.
pub(crate) trait Tool<B, ResBody>:
    Service<Request<B>, Response = Response<ResBody>, Future: Send + 'static, Error: Send + 'static>
    + Send
    + 'static
{
}

impl<T, B, ResBody> Tool<B, ResBody> for T
where
    T: Service<Request<B>, Response = Response<ResBody>> + Send + 'static,
    T::Future: Send + 'static,
    T::Error: Send + 'static,
{
}

/// A request body the layer can buffer and then rebuild from the same bytes.
pub(crate) trait Bufferable:
    Body<Data: Send, Error: Into<BoxError>> + From<Bytes> + Send + 'static
{
}

impl<B> Bufferable for B
where
    B: Body + From<Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
}

/// A response body the layer can read, keep and hand on.
pub(crate) trait Keepable:
    Body<Data = Bytes, Error: Into<BoxError>> + Send + 'static
{
}

impl<B> Keepable for B
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
}
