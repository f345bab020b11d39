//! The headers the layer sets on the answers it gives over HTTP.

use http::{HeaderMap, HeaderName, HeaderValue, Response};

use crate::key::IntentKey;

/// The header that carries the intent key on every protected response.
pub const INTENT_HEADER: &str = "idempotency-intent";
/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// [`INTENT_HEADER`] as a name made once: a name given as a string is parsed again at every
/// lookup and insert, and every protected response is looked up for it and given it.
pub(crate) static INTENT: HeaderName = HeaderName::from_static(INTENT_HEADER);
/// [`REPLAYED_HEADER`] as a name made once, for every replay.
pub(crate) static REPLAYED: HeaderName = HeaderName::from_static(REPLAYED_HEADER);

/// Marks a protected response with its intent, in either dialect.
pub(crate) fn with_intent<B>(mut response: Response<B>, key: &IntentKey) -> Response<B> {
    if let Ok(value) = HeaderValue::from_bytes(&key.hex_digits()) {
        response.headers_mut().insert(INTENT.clone(), value);
    }
    response
}

/// Marks a replayed answer's headers `idempotent-replayed: true`, in either dialect.
pub(crate) fn mark_replayed(headers: &mut HeaderMap) {
    headers.insert(REPLAYED.clone(), HeaderValue::from_static("true"));
}

/// An `age` value (RFC 9111): how many seconds ago the replayed answer was given.
pub(crate) fn age(seconds: u64) -> HeaderValue {
    HeaderValue::from(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn age_is_written_in_seconds_whatever_its_size() {
        for seconds in [0, 7, 9, 10, 86_400] {
            assert_eq!(age(seconds), seconds.to_string().as_str());
        }
    }
}
