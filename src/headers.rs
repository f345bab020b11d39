//! The headers the layer sets on the answers it gives over HTTP.

use http::{HeaderMap, HeaderName, HeaderValue, Response};

use crate::key::IntentKey;

/// The header that carries the intent key on every protected response.
pub const INTENT_HEADER: &str = "idempotency-intent";
/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The header whose value the layer writes into its own answers as `request_id`, unless
/// [`request_id_header`](crate::IdempotencyLayer::request_id_header) names another.
pub const DEFAULT_REQUEST_ID_HEADER: &str = "x-request-id";

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

/// The longest request id the layer writes into an answer.
const REQUEST_ID_MAX: usize = 128;

/// A request's id, as the request carried it in the configured header: one value of visible
/// ASCII, at most 128 bytes, so that no header a client wrote can make the layer's answer
/// long or hold what a reader would not expect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestId(String);

impl RequestId {
    /// The id `headers` carry under `name`, if it is one value that can be written as it is.
    pub(crate) fn of(headers: &HeaderMap, name: &HeaderName) -> Option<Self> {
        let mut values = headers.get_all(name).iter();
        let value = values.next()?;
        let bytes = value.as_bytes();
        let plain = !bytes.is_empty()
            && bytes.len() <= REQUEST_ID_MAX
            && bytes.iter().all(|b| b.is_ascii_graphic());
        if !plain || values.next().is_some() {
            return None;
        }
        value.to_str().ok().map(|id| Self(id.to_owned()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_id_is_one_short_value_of_visible_ascii() {
        let name = HeaderName::from_static(DEFAULT_REQUEST_ID_HEADER);
        let id = |values: &[&[u8]]| {
            let mut headers = HeaderMap::new();
            for value in values {
                headers.append(&name, HeaderValue::from_bytes(value).unwrap());
            }
            RequestId::of(&headers, &name).map(|id| id.as_str().to_owned())
        };
        assert_eq!(id(&[b"req-42"]).as_deref(), Some("req-42"));
        assert_eq!(id(&[br#"a"b\c"#]).as_deref(), Some(r#"a"b\c"#));
        assert_eq!(id(&[]), None);
        assert_eq!(id(&[b"two words"]), None);
        assert_eq!(id(&[b"caf\xc3\xa9"]), None);
        assert_eq!(id(&[b"a", b"b"]), None, "two values");
        assert_eq!(id(&[&[b'x'; 128]]).map(|id| id.len()), Some(128));
        assert_eq!(id(&[&[b'x'; 129]]), None);
    }

    #[test]
    fn age_is_written_in_seconds_whatever_its_size() {
        for seconds in [0, 7, 9, 10, 86_400] {
            assert_eq!(age(seconds), seconds.to_string().as_str());
        }
    }
}
