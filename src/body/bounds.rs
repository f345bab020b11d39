//! The bounds the layer needs of the bodies it carries, named once for the crate's own
//! functions (the public `Service` impls spell them out).

use bytes::Bytes;
use http_body::Body;

/// The error type bodies are converted into.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

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
