//! What the proxy itself answers when the upstream gives no answer: first what happened to
//! the action, then whether calling again is safe.

use std::time::Duration;

use http::{header, HeaderValue, Response, StatusCode};
use serde::Serialize;
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

/// The proxy's own answer, its members in the order the layer writes its own: what happened
/// and whether to retry come before the sentence that explains them.
#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    outcome: &'a str,
    retryable: bool,
    detail: String,
    /// The call's id, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
}

/// The answer for a request the upstream did not answer. `timeout` is the route's; the
/// call's `request_id` is said where it has one. What a repeat does is the layer's to say (it
/// keeps a call that may have run, on the routes it protects), so the words here hold either
/// way.
pub fn lost(lost: Lost, timeout: Duration, request_id: Option<&str>) -> Response<Outbound> {
    let (status, slug, title, outcome, retryable, detail) = match lost {
        // 503, not 502: a gateway's 502 says the tool may have run, and this one knows it
        // did not.
        Lost::Unreachable => (
            StatusCode::SERVICE_UNAVAILABLE,
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
    let problem = Problem {
        kind: format!("urn:idempotency-proxy:{slug}"),
        title,
        status: status.as_u16(),
        outcome,
        retryable,
        detail,
        request_id,
    };
    let document = serde_json::to_vec(&problem).expect("a problem document serializes");
    let mut response = Response::new(full(document));
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn what_happened_and_whether_to_retry_come_first_in_the_proxys_answer() {
        let answer = lost(Lost::Unreachable, Duration::from_secs(30), Some("req-1"));
        let body = answer.into_body().collect().await.unwrap().to_bytes();
        let text = std::str::from_utf8(&body).unwrap();
        let order: Vec<usize> = [
            "\"type\"",
            "\"title\"",
            "\"status\"",
            "\"outcome\"",
            "\"retryable\"",
            "\"detail\"",
            "\"request_id\"",
        ]
        .iter()
        .map(|name| {
            text.find(name)
                .unwrap_or_else(|| panic!("{name} in {text}"))
        })
        .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(
            text.starts_with(r#"{"type":"urn:idempotency-proxy:upstream-unreachable","#),
            "{text}"
        );
    }
}
