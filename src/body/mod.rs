//! Bodies: the response body the layer answers with, and a request body for plain hyper.

mod bounds;
mod read;

pub(crate) use bounds::{BoxError, Bufferable, Keepable};
pub(crate) use read::{peek_body, read_body, GatheredBody, Peek, Unread};

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project_lite::pin_project;

pin_project! {
    /// The body of every response from [`Idempotency`](crate::Idempotency): the inner
    /// service's own body where the layer only passes it on, or bytes the layer holds.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        // Kept while the body is being sent: dropped at its end, or with it.
        held: Option<Keepalive>,
    }
}

/// What a body keeps until it ends: a value whose drop says that the response is over. It is
/// never read, only dropped, so a panic cannot leave it half seen: the body stays unwind safe.
type Keepalive = std::panic::AssertUnwindSafe<Box<dyn std::any::Any + Send + Sync>>;

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { #[pin] body: Full<Bytes> },
        // The kept head of a response too large to store, then the rest as it streams.
        Chained { head: Option<Bytes>, tail: Pin<Box<B>> },
        // Bytes the layer writes as they come: events relayed, then an answer.
        Streamed { chunks: Chunks },
        // The inner service's own body, each chunk shown to a watcher as it passes.
        Watched { #[pin] body: B, watch: Watch },
    }
}

/// Bytes the layer writes as they come.
type Chunks = futures_util::stream::BoxStream<'static, Bytes>;

/// What sees each chunk of a watched body as it passes.
pub(crate) type Watch = Box<dyn FnMut(&Bytes) + Send>;

impl<B> ResponseBody<B> {
    pub(crate) fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
            held: None,
        }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                body: Full::new(data),
            },
            held: None,
        }
    }

    pub(crate) fn chained(head: Bytes, tail: Pin<Box<B>>) -> Self {
        Self {
            kind: Kind::Chained {
                head: (!head.is_empty()).then_some(head),
                tail,
            },
            held: None,
        }
    }

    /// A body of `chunks` as they come, each sent as soon as it is there.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "what MCP relays"))]
    pub(crate) fn streamed(chunks: Chunks) -> Self {
        Self {
            kind: Kind::Streamed { chunks },
            held: None,
        }
    }

    /// The inner service's `body`, passed on as it is, each chunk shown to `watch` first.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "what MCP watches"))]
    pub(crate) fn watched(body: B, watch: Watch) -> Self {
        Self {
            kind: Kind::Watched { body, watch },
            held: None,
        }
    }

    /// The same body, keeping `value` until it has ended (or been dropped unfinished).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code, reason = "what MCP relays"))]
    pub(crate) fn holding(mut self, value: impl Send + Sync + 'static) -> Self {
        self.held = Some(std::panic::AssertUnwindSafe(Box::new(value)));
        self
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.project();
        let polled = match this.kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Full { body } => body.poll_frame(cx).map_err(|never| match never {}),
            KindProj::Chained { head, tail } => match head.take() {
                Some(head) => Poll::Ready(Some(Ok(Frame::data(head)))),
                None => tail.as_mut().poll_frame(cx),
            },
            KindProj::Streamed { chunks } => futures_util::Stream::poll_next(chunks.as_mut(), cx)
                .map(|chunk| chunk.map(|chunk| Ok(Frame::data(chunk)))),
            KindProj::Watched { body, watch } => {
                let polled = body.poll_frame(cx);
                if let Poll::Ready(Some(Ok(frame))) = &polled {
                    if let Some(chunk) = frame.data_ref() {
                        watch(chunk);
                    }
                }
                polled
            }
        };
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            *this.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { body } => body.is_end_stream(),
            Kind::Chained { head, tail } => head.is_none() && tail.is_end_stream(),
            Kind::Streamed { .. } => false,
            Kind::Watched { body, .. } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { body } => body.size_hint(),
            Kind::Chained { head, tail } => {
                let head = head.as_ref().map_or(0, |h| h.len() as u64);
                let tail = tail.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(tail.lower() + head);
                if let Some(upper) = tail.upper() {
                    hint.set_upper(upper + head);
                }
                hint
            }
            Kind::Streamed { .. } => SizeHint::new(),
            Kind::Watched { body, .. } => body.size_hint(),
        }
    }
}

pin_project! {
    /// A request body that is either a stream still to be read or bytes already buffered.
    ///
    /// The layer buffers a protected request's body and hands the same bytes on to the inner
    /// service, so the body type must be buildable from [`Bytes`]. Bodies such as axum's
    /// already are; under plain hyper, wrap `Incoming` in this type:
    ///
    /// ```
    /// use hyper::body::Incoming;
    /// use tower_idempotency::RequestBody;
    ///
    /// fn wrap(request: http::Request<Incoming>) -> http::Request<RequestBody<Incoming>> {
    ///     request.map(RequestBody::new)
    /// }
    /// ```
    pub struct RequestBody<B> {
        // The same two cases as a response the layer answers with: the caller's own body,
        // or bytes already held.
        #[pin]
        inner: ResponseBody<B>,
    }
}

impl<B> RequestBody<B> {
    /// Wraps a body that has not been read.
    pub fn new(body: B) -> Self {
        Self {
            inner: ResponseBody::inner(body),
        }
    }
}

impl<B> From<Bytes> for RequestBody<B> {
    fn from(data: Bytes) -> Self {
        Self {
            inner: ResponseBody::full(data),
        }
    }
}

impl<B> Body for RequestBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
