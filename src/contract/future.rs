//! The future of [`Contract`](super::Contract)'s responses.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::Response;
use pin_project_lite::pin_project;

use crate::body::ResponseBody;

type Checked<B, E> = Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

pin_project! {
    /// Response future of [`Contract`](super::Contract).
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        kind: Kind<F, B, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B, E> {
        // Operations without a contract: the inner future, unboxed.
        Unchecked { #[pin] future: F },
        // Checked ones: the body is read and validated first, boxed once.
        Checked { future: Checked<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    pub(crate) fn passthrough(future: F) -> Self {
        Self {
            kind: Kind::Unchecked { future },
        }
    }

    pub(crate) fn checked(
        future: impl Future<Output = Result<Response<ResponseBody<B>>, E>> + Send + 'static,
    ) -> Self {
        Self {
            kind: Kind::Checked {
                future: Box::pin(future),
            },
        }
    }
}

impl<F, B, E> std::fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Unchecked { future } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(response.map(ResponseBody::inner)))
            }
            KindProj::Checked { future } => future.as_mut().poll(cx),
        }
    }
}
