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

/// The answer for a request the upstream did not answer. `kept` says whether an idempotency
/// layer records this call (a protected route), which decides what a repeat does.
pub fn lost(lost: Lost, kept: bool, timeout: Duration) -> Response<Outbound> {
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
        Lost::Broken | Lost::TimedOut => {
            let what = match lost {
                Lost::TimedOut => format!(
                    "no answer came within {}",
                    humantime::format_duration(timeout)
                ),
                _ => "the connection broke before its answer came".to_owned(),
            };
            let then = if kept {
                "It will not be run again by itself: check its effect before calling again."
            } else {
                "Check its effect before calling again: calling again with the same arguments \
                 would run it again."
            };
            let status = match lost {
                Lost::TimedOut => StatusCode::GATEWAY_TIMEOUT,
                _ => StatusCode::BAD_GATEWAY,
            };
            (
                status,
                "upstream-answer-lost",
                "Outcome unknown",
                "unknown",
                false,
                format!(
                    "This action may have run: its request reached the tool's server, but {what}, \
                     so whether it took effect is not known. {then}"
                ),
            )
        }
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
