//! The retry budget at the claim: an intent whose last attempts failed runs again only once
//! the wait they set has passed. The failures in a row come with the tombstone the claim
//! replaced, so the check costs a first execution nothing and every instance sharing the
//! store applies the same count.

use std::sync::Arc;

use super::intent::Intent;
use super::outcome::{Failure, Refusal};
use super::Engine;
use crate::clock::{millis, now_ms};
use crate::store::{OwnerToken, Store, Tombstone};
use crate::telemetry;

/// When the attempt after `failed` may run, in milliseconds since the Unix epoch, if that is
/// later than now.
pub(super) fn held_until(intent: &Intent, failed: &Tombstone) -> Option<u64> {
    let wait = intent.retry_budget.wait_after(failed.failures);
    if wait.is_zero() {
        return None;
    }
    let free_at_ms = failed.failed_at_ms.saturating_add(millis(wait));
    (free_at_ms > now_ms()).then_some(free_at_ms)
}

/// Holds back an attempt that came inside its wait: the tombstone the claim replaced goes
/// back under the claim's token, and the caller is told nothing ran and when it will; with
/// whether the tombstone went back (if not, the claim's lease is the caller's to give back).
pub(super) async fn hold_back<St: Store>(
    engine: &Arc<Engine<St>>,
    intent: &Intent,
    token: OwnerToken,
    failed: Arc<Tombstone>,
    free_at_ms: u64,
) -> (Refusal, bool) {
    let now = now_ms();
    let left_ms = free_at_ms.saturating_sub(now);
    // Kept as long as the failed attempt's own release kept it: past the wait, for the status
    // path and the count.
    let ttl = engine
        .settings
        .failure_ttl
        .saturating_add(std::time::Duration::from_millis(left_ms));
    let (failures, last) = (failed.failures, Failure::of(&failed));
    let put_back = engine.store.release(&intent.key, &token, failed, ttl).await;
    if let Err(error) = &put_back {
        tracing::warn!(%error, "putting back a held-back attempt's failure failed");
    }
    let wait_s = left_ms.div_ceil(1000);
    telemetry::backoff_refused(&intent.op, failures, wait_s);
    let refusal = Refusal::BackingOff {
        failures,
        last,
        wait_s,
    };
    (refusal, put_back.is_ok())
}
