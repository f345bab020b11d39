//! Which route a request takes: the longest prefix that holds its path, segment by segment.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Service, ServiceExt};

use crate::body::{Inbound, Outbound};
use crate::stack::Handler;

/// Where the idempotency layers answer status queries.
const STATUS_PATH: &str = "/_idempotency";

/// The routes, longest prefix first, and where everything else goes.
#[derive(Clone)]
pub struct Routes {
    table: Arc<[(String, Handler)]>,
    fallback: Handler,
    status: Option<Handler>,
}

impl Routes {
    pub fn new(table: Vec<(String, Handler)>, fallback: Handler, status: Option<Handler>) -> Self {
        Self {
            table: table.into(),
            fallback,
            status,
        }
    }

    fn handler(&self, path: &str) -> &Handler {
        if let Some(status) = &self.status {
            if under(path, STATUS_PATH) {
                return status;
            }
        }
        self.table
            .iter()
            .find(|(prefix, _)| under(path, prefix))
            .map_or(&self.fallback, |(_, handler)| handler)
    }
}

/// `path` is `prefix` or below it.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Service<Request<Inbound>> for Routes {
    type Response = Response<Outbound>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Outbound>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Inbound>) -> Self::Future {
        let handler = self.handler(request.uri().path()).clone();
        Box::pin(handler.oneshot(request))
    }
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn a_prefix_holds_its_own_path_and_those_below_it_only() {
        assert!(under("/tools", "/tools"));
        assert!(under("/tools/send_email", "/tools"));
        assert!(!under("/toolshed", "/tools"));
        assert!(under("/anything", ""));
    }
}
