//! Turning kept outcomes back into responses.

use http::{header, HeaderMap, HeaderName, Response, StatusCode};

use super::answer::{annotate, written};
use crate::body::ResponseBody;
use crate::headers::{age, mark_replayed};
use crate::key::IntentKey;
use crate::settings::Settings;
use crate::store::{KeptResponse, Omission, Record, StoredResponse};
use crate::wording;

/// Replays a completed intent.
pub(crate) fn replay<B>(
    settings: &Settings,
    key: &IntentKey,
    record: &Record,
) -> Response<ResponseBody<B>> {
    match &record.response {
        KeptResponse::Full(stored) => {
            let mut response = replay_stored(settings, key, stored);
            // How long ago the replayed response was given (RFC 9111 `Age`).
            let ran_s_ago = crate::clock::seconds_since(record.completed_at_ms);
            response.headers_mut().insert(header::AGE, age(ran_s_ago));
            response
        }
        KeptResponse::Omitted { status, why } => {
            let told = wording::already_executed(key, *status, *why, record.expires_at_ms);
            let status = match why {
                Omission::Unclassified => StatusCode::INTERNAL_SERVER_ERROR,
                _ => *status,
            };
            written(status, &told)
        }
        KeptResponse::Abandoned => {
            let told = wording::abandoned(key, record.expires_at_ms);
            written(StatusCode::GATEWAY_TIMEOUT, &told)
        }
    }
}

/// Replays a stored response byte for byte, marked `idempotent-replayed: true`.
pub(crate) fn replay_stored<B>(
    settings: &Settings,
    key: &IntentKey,
    stored: &StoredResponse,
) -> Response<ResponseBody<B>> {
    let body = if settings.annotate_replays {
        annotate(&stored.body, key).unwrap_or_else(|| stored.body.clone())
    } else {
        stored.body.clone()
    };
    let mut response = Response::new(ResponseBody::full(body));
    *response.status_mut() = stored.status;
    // Copied as it is (no entry hashed again), then grown once for what a replay adds (this
    // marker, `age` and the intent) rather than by each insert.
    let mut headers = stored.headers.clone();
    headers.reserve(REPLAY_ADDS);
    mark_replayed(&mut headers);
    *response.headers_mut() = headers;
    response
}

/// The headers a replay adds to the kept ones.
const REPLAY_ADDS: usize = 3;

/// The headers worth keeping: not hop-by-hop, not `date`, not a length the replay recomputes,
/// not the first caller's `request_id`. The map is built at its exact size, since kept
/// records live long and are many.
pub(crate) fn storable_headers(headers: &HeaderMap, request_id: &HeaderName) -> HeaderMap {
    let named_by_connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let hop_by_hop = |name: &HeaderName| {
        [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::TE,
            header::TRAILER,
            header::UPGRADE,
            header::PROXY_AUTHENTICATE,
            header::PROXY_AUTHORIZATION,
            header::DATE,
            header::CONTENT_LENGTH,
        ]
        .contains(name)
            || name.as_str() == "keep-alive"
            || name == request_id
            || named_by_connection.iter().any(|n| n == name.as_str())
    };
    // Counted first, so that the map is allocated once at its size, with no list between.
    let kept = || headers.iter().filter(|(name, _)| !hop_by_hop(name));
    let mut map = HeaderMap::with_capacity(kept().count());
    for (name, value) in kept() {
        map.append(name.clone(), value.clone());
    }
    map
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn hop_by_hop_date_and_request_id_headers_are_not_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close, x-hop"));
        headers.insert("x-hop", HeaderValue::from_static("1"));
        headers.insert(header::DATE, HeaderValue::from_static("today"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert("x-request-cost", HeaderValue::from_static("3"));
        headers.insert("x-request-id", HeaderValue::from_static("first-caller"));
        let kept = storable_headers(&headers, &HeaderName::from_static("x-request-id"));
        assert_eq!(kept.len(), 2);
        assert!(kept.contains_key(header::CONTENT_TYPE));
        assert!(kept.contains_key("x-request-cost"));
    }
}
