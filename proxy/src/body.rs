//! The bodies the proxy moves: one type each way, streamed frame by frame.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body: the upstream's, streamed, or one the proxy wrote.
pub type Outbound = UnsyncBoxBody<Bytes, BoxError>;

/// The future of a service that always answers.
pub type Answering = futures_util::future::BoxFuture<
    'static,
    Result<http::Response<Outbound>, std::convert::Infallible>,
>;

/// A whole response body.
pub fn full(bytes: impl Into<Bytes>) -> Outbound {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Boxes any body with bytes frames.
pub fn boxed<B>(body: B) -> Outbound
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed_unsync()
}

/// A request body on its way to the upstream: the client's, streamed, or the bytes the
/// idempotency layer read to key it. (The layer gives back what it read as the request's own
/// body type, so that type must be made from bytes, which hyper's own is not.)
pub struct Inbound(Outbound);

impl Inbound {
    pub fn new<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self(boxed(body))
    }

    pub fn into_outbound(self) -> Outbound {
        self.0
    }
}

impl From<Bytes> for Inbound {
    fn from(bytes: Bytes) -> Self {
        Self(full(bytes))
    }
}

impl Body for Inbound {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// The upstream's answer, cut at a deadline: past it, the body ends in an error.
pub struct Deadline<B> {
    inner: B,
    sleep: Pin<Box<tokio::time::Sleep>>,
    ended: bool,
}

impl<B> Deadline<B> {
    pub fn new(inner: B, deadline: tokio::time::Instant) -> Self {
        Self {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            ended: false,
        }
    }
}

/// The answer did not end by its deadline.
#[derive(Debug)]
pub struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer did not end within the route's timeout")
    }
}

impl std::error::Error for TimedOut {}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.ended = true;
                Poll::Ready(Some(Err(Box::new(TimedOut))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
