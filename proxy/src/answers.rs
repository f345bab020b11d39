//! What the proxy itself answers when the upstream gives no answer: first what happened to
//! the action, then whether calling again is safe.

use std::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};
use serde_json::Value;
use tower_idempotency::Interrupted;

use crate::body::{full, Outbound};

/// Why the upstream gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// No connection could be made: the request never left the proxy.
    Unreachable,
    /// The connection broke after the request was sent.
    Broken,
    /// The upstream did not answer within the route's timeout.
    TimedOut,
}

/// The answer for a request the upstream did not answer. `timeout` is the route's. What a
/// repeat does is the layer's to say (it keeps a call that may have run, on the routes it
/// protects), so the words here hold either way.
pub fn lost(lost: Lost, timeout: Duration) -> Response<Outbound> {
    let (status, slug, title, outcome, retryable, detail) = match lost {
        Lost::Unreachable => (
            StatusCode::BAD_GATEWAY,
            "upstream-unreachable",
            "Upstream unreachable",
            "not_executed",
            true,
            "This action was not executed: the proxy could not connect to the tool's server. \
             Calling again with the same arguments is safe."
                .to_owned(),
        ),
        Lost::Broken => (
            StatusCode::BAD_GATEWAY,
            "upstream-answer-lost",
            "Outcome unknown",
            "unknown",
            false,
            "This action may have run: its request was sent to the tool's server, but the \
             connection broke before an answer came, so whether it took effect is not known. \
             Check its effect before calling again."
                .to_owned(),
        ),
        Lost::TimedOut => (
            StatusCode::GATEWAY_TIMEOUT,
            "upstream-answer-lost",
            "Outcome unknown",
            "unknown",
            false,
            format!(
                "This action may have run: its request was sent to the tool's server, but no \
                 answer came within {}, so whether it took effect is not known, and it may \
                 still be running. Check its effect before calling again.",
                humantime::format_duration(timeout)
            ),
        ),
    };
    // In this order, as the layer writes its own: what happened and whether to retry come
    // before the sentence that explains them (a map would sort the members).
    let members: [(&str, Value); 6] = [
        ("type", format!("urn:idempotency-proxy:{slug}").into()),
        ("title", title.into()),
        ("status", status.as_u16().into()),
        ("outcome", outcome.into()),
        ("retryable", retryable.into()),
        ("detail", detail.into()),
    ];
    let document = members
        .iter()
        .map(|(name, value)| format!("{}:{value}", Value::from(*name)))
        .collect::<Vec<_>>()
        .join(",");
    let mut response = Response::new(full(format!("{{{document}}}")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if retryable {
        headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    } else {
        // The request reached the upstream: the layer keeps this as run, outcome unknown.
        response.extensions_mut().insert(Interrupted);
    }
    response
}
