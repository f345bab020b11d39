//! Handing a protected request's answer on after the runtime's other ready tasks.
//!
//! A tool that answers at once is run, and its outcome recorded, inside the request's own
//! poll, so without a pause each answer would be written the moment it is decided: one write,
//! and one wake-up of the reader, per request. Yielding once lets the runtime first run the
//! other requests that arrived with this one, so that their answers are written together and a
//! reader on the same host (a load generator, an agent runtime, a proxy in front) is woken
//! once for several. Where waking an idle core is dear, as on virtual machines whose idle
//! cores halt at once, that wake-up costs the server more than the whole layer does; elsewhere
//! the yield is one more poll of each request's future for nothing, so it is off by default.
//! The answer's outcome is recorded before the yield, so a repeat arriving meanwhile is
//! replayed.

/// Yields once to the runtime if `batch` is set (see
/// [`IdempotencyLayer::answer_batching`](crate::IdempotencyLayer::answer_batching); off by
/// default).
pub(crate) async fn after_others(batch: bool) {
    if batch {
        tokio::task::yield_now().await;
    }
}
