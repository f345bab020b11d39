//! The headers the layer sets on the answers it gives over HTTP.

/// The header that carries the intent key on every protected response.
pub const INTENT_HEADER: &str = "idempotency-intent";
/// The header set on replayed responses.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";
