//! A body whose errors are checked on their way through, for an answer read where its error
//! cannot be reached (inside an event-stream reader).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use crate::bounds::BoxError;
use crate::interrupted::is_interrupted;

pin_project_lite::pin_project! {
    /// A body whose errors are checked on their way through: `seen` is set when one is an
    /// [`Interrupted`](crate::Interrupted).
    pub(crate) struct Watched<'a, B> {
        #[pin]
        inner: B,
        seen: &'a AtomicBool,
    }
}

impl<'a, B> Watched<'a, B> {
    pub(crate) fn new(inner: B, seen: &'a AtomicBool) -> Self {
        Self { inner, seen }
    }
}

impl<B> Body for Watched<'_, B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, Self::Error>>> {
        let this = self.project();
        this.inner.poll_frame(cx).map_err(|error| {
            let error = error.into();
            if is_interrupted(&error) {
                this.seen.store(true, Ordering::Relaxed);
            }
            error
        })
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
