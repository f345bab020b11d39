//! The headers the layer sets on the answers it gives over HTTP.

use http::{HeaderName, HeaderValue, Response};

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
