//! Which route a request takes: the longest prefix that holds its path, segment by segment.

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};
use tower_idempotency::DEFAULT_STATUS_PATH;

use crate::body::{Answering, Inbound, Outbound};

/// One route's service, whatever its mode.
pub type Handler = BoxCloneSyncService<Request<Inbound>, Response<Outbound>, Infallible>;

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
        // Matched as the upstream is likely to read the path, so that `/tools//x` or
        // `/%74ools/x` cannot slip past a protected prefix.
        let path = normalized(path);
        let path = path.as_ref();
        if let Some(status) = &self.status {
            // The layers answer status queries there, from the store.
            if under(path, DEFAULT_STATUS_PATH) {
                return status;
            }
        }
        self.table
            .iter()
            .find(|(prefix, _)| under(path, prefix))
            .map_or(&self.fallback, |(_, handler)| handler)
    }
}

/// `path` with empty and `.` segments dropped, `..` applied, and percent-escapes of
/// unreserved characters decoded (RFC 3986 §6.2.2). Others stay escaped: `%2F` is not a `/`.
fn normalized(path: &str) -> Cow<'_, str> {
    let plain = !path.contains("//")
        && !path.contains('%')
        && !path
            .split('/')
            .any(|segment| segment == "." || segment == "..");
    if plain {
        return Cow::Borrowed(path);
    }
    let mut segments: Vec<String> = Vec::new();
    for segment in path.split('/').skip(1) {
        let segment = decode_unreserved(segment);
        match segment.as_str() {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(segment),
        }
    }
    Cow::Owned(format!("/{}", segments.join("/")))
}

fn decode_unreserved(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut i = 0;
    while i < bytes.len() {
        // A request path is ASCII: `http` refuses anything else.
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    out.push(byte as char);
                    i += 3;
                    continue;
                }
            }
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

/// `path` is `prefix` or below it.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

impl Service<Request<Inbound>> for Routes {
    type Response = Response<Outbound>;
    type Error = Infallible;
    type Future = Answering;

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
    use super::{normalized, under};

    #[test]
    fn paths_are_matched_as_an_upstream_would_read_them() {
        assert_eq!(normalized("/tools/send_email"), "/tools/send_email");
        assert_eq!(normalized("//tools//send_email"), "/tools/send_email");
        assert_eq!(normalized("/%74ools/send%5Femail"), "/tools/send_email");
        assert_eq!(normalized("/static/../tools/./x"), "/tools/x");
        assert_eq!(
            normalized("/tools%2Fx"),
            "/tools%2Fx",
            "an escaped slash stays one segment"
        );
        assert_eq!(normalized("/a/%zz/%4"), "/a/%zz/%4");
        assert!(under(&normalized("/tools/../tools/x"), "/tools"));
    }

    #[test]
    fn a_prefix_holds_its_own_path_and_those_below_it_only() {
        assert!(under("/tools", "/tools"));
        assert!(under("/tools/send_email", "/tools"));
        assert!(!under("/toolshed", "/tools"));
        assert!(under("/anything", ""));
    }
}
