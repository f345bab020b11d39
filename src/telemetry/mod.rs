//! Metrics (through the `metrics` facade) and trace fields.
//!
//! Labels stay bounded: the operation label comes from a route label function, never a raw
//! path with ids in it, and no label or log field ever holds a key, a session or a body.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use metrics::{counter, histogram, Counter, Gauge, Histogram};

use crate::key::IntentKey;

mod duplicates;
mod hot;
mod ops;
mod report;
mod stopwatch;

pub(crate) use duplicates::{checked, Finding};
#[cfg(feature = "contract")]
pub(crate) use hot::SCHEMA_REASONS;
pub(crate) use ops::{Op, Ops, RouteLabel};
pub use ops::{ATTEMPT_BUCKETS, DURATION_BUCKETS, MAX_OPERATIONS};
pub use report::{
    DuplicateCounts, DuplicateReport, Duplicates, OperationDuplicates, RepeatingCaller,
};
pub(crate) use stopwatch::{calibrate, Stopwatch};

/// The span of one protected request; its intent, attempt and outcome are recorded later.
pub(crate) fn request_span(op: &Op) -> tracing::Span {
    tracing::info_span!(
        "idempotency",
        operation = op.as_str(),
        intent = tracing::field::Empty,
        attempt = tracing::field::Empty,
        outcome = tracing::field::Empty
    )
}

/// Records how a protected request ended, on its span and in `idempotency_outcomes_total`.
pub(crate) fn outcome(op: &Op, tag: &'static str) {
    tracing::Span::current().record("outcome", tag);
    op.hot.outcome(tag).increment(1);
}

pub(crate) fn executed(op: &Op) {
    op.hot.executions.increment(1);
    tracing::debug!("claimed: executing");
}

pub(crate) fn replayed(op: &Op) {
    op.hot.replays.increment(1);
    tracing::debug!("replayed a kept outcome");
}

pub(crate) fn coalesced(op: &Op) {
    op.hot.coalesced.increment(1);
    tracing::debug!("coalesced onto a running execution");
}

pub(crate) fn in_progress(op: &Op) {
    op.hot.in_progress.increment(1);
    tracing::debug!("rewritten to in_progress at the deadline");
}

pub(crate) fn released(op: &Op, cause: &'static str) {
    op.hot.released(cause);
    tracing::debug!(cause, "released the intent for a retry");
}

/// An attempt inside the wait its intent's retry budget sets was answered without running.
pub(crate) fn backoff_refused(op: &Op, failures: u32, wait_s: u64) {
    op.hot.backoff_refusals.increment(1);
    tracing::info!(failures, wait_s, "held back by the retry budget: not run");
}

pub(crate) fn fenced(op: &Op) {
    op.hot.fenced.increment(1);
    tracing::warn!(
        "completion fenced: another owner holds this intent, so this outcome was not recorded"
    );
}

/// A completion the store kept refusing was given up: the lease lapses, and a repeat may run
/// the action again.
pub(crate) fn completion_abandoned(op: &Op) {
    op.hot.abandoned.increment(1);
}

/// A lease renewal found another owner (or none): another instance may run the action.
pub(crate) fn lease_lost(op: &Op) {
    op.hot.lease_lost.increment(1);
    tracing::warn!(
        "the lease of a running execution was lost: another instance may run this action, and \
         this execution's outcome will not be recorded"
    );
}

/// A protected request ran without protection: no scope (when allowed) or fail-open.
pub(crate) fn unprotected(op: &Op, reason: &'static str) {
    op.hot.unprotected(reason);
}

/// A client's cancellation of a protected call, answered by the layer instead of the server.
#[cfg(feature = "mcp")]
pub(crate) fn cancellation_absorbed() {
    counter!("idempotency_cancellations_absorbed_total").increment(1);
    tracing::debug!("absorbed a cancellation: the protected call goes on");
}

/// Executions still running in a shutdown's drain (`idempotency_shutdown_unfinished`),
/// registered at 0 with the layer: a gauge a scrape reads while the process drains, since a
/// count made as the process exits is never scraped.
#[derive(Clone, Debug)]
pub(crate) struct Drain {
    running: Gauge,
}

impl Default for Drain {
    fn default() -> Self {
        Self {
            running: metrics::gauge!("idempotency_shutdown_unfinished"),
        }
    }
}

impl Drain {
    /// Executions still running, as the drain waits for them.
    pub(crate) fn running(&self, running: usize) {
        self.running.set(running as f64);
    }

    /// Executions still running when the grace period ended: cut off, and logged.
    pub(crate) fn cut_off(&self, unfinished: usize) {
        self.running(unfinished);
        tracing::error!(
            unfinished,
            "shutdown: executions still running at the end of the grace period are cut off; \
             their leases lapse and another instance may run them again"
        );
    }
}

pub(crate) fn not_executed(op: &Op, reason: &'static str) {
    op.hot.refused(reason);
    tracing::debug!(reason, "refused: not executed");
}

/// Counts a call observe mode passed on, in `idempotency_outcomes_total`.
pub(crate) fn observed(op: &Op) {
    op.hot.outcome("observed").increment(1);
}

pub(crate) fn answered(op: &Op, status: Option<StatusCode>, started: Stopwatch) {
    let class = match status.map(|s| s.as_u16() / 100) {
        Some(class @ 1..=5) => usize::from(class) - 1,
        _ => 5,
    };
    op.hot.classes[class].increment(1);
    op.hot.duration.record(started.elapsed().as_secs_f64());
}

/// The handles of one kind of store call, registered once per layer.
pub(crate) struct StoreCallMetrics {
    duration: Histogram,
    errors: Counter,
}

impl StoreCallMetrics {
    pub(crate) fn new(call: &'static str) -> Self {
        Self {
            duration: histogram!("idempotency_store_duration_seconds", "call" => call),
            errors: counter!("idempotency_store_errors_total", "call" => call),
        }
    }

    pub(crate) fn record(&self, elapsed: Duration, ok: bool) {
        self.duration.record(elapsed.as_secs_f64());
        if !ok {
            self.errors.increment(1);
        }
    }
}

/// New intents a store refused because it was full, registered with a layer's store-call
/// series: the store answered, so these are not store errors.
pub(crate) struct StoreFull {
    refused: Counter,
    count: AtomicU64,
}

impl StoreFull {
    pub(crate) fn new() -> Self {
        Self {
            refused: counter!("idempotency_store_full_total"),
            count: AtomicU64::new(0),
        }
    }

    /// Counts one refusal (`idempotency_store_full_total`) and logs it at the 1st, 2nd, 4th,
    /// 8th...: loud, never a flood, since a flood is what fills a store.
    pub(crate) fn refused(&self, why: &impl std::fmt::Display) {
        self.refused.increment(1);
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            tracing::warn!(
                refused = count,
                "{why}: a new intent was refused and nothing ran (503, retryable); the store \
                 keeps every record it holds for its minimum retention, so its budget is too \
                 small for the callers it serves"
            );
        }
    }
}

/// The memory store's series, registered once, when the store is built, as a layer's store-call
/// series are when it is: at the budget every first execution sets the gauge and counts an
/// eviction, and a `gauge!` or `counter!` at each call looks its series up again in the
/// recorder's registry (a hash and a lock, under an exporter).
pub(crate) struct MemoryStoreMetrics {
    bytes: Gauge,
    over_budget: Counter,
    over_share: Counter,
}

impl MemoryStoreMetrics {
    pub(crate) fn new() -> Self {
        Self {
            bytes: metrics::gauge!("idempotency_memory_store_bytes"),
            over_budget: counter!("idempotency_evictions_total", "cause" => "budget"),
            over_share: counter!("idempotency_evictions_total", "cause" => "scope_share"),
        }
    }

    /// Bytes the store charges to kept records, after a write.
    pub(crate) fn kept(&self, bytes: u64) {
        self.bytes.set(bytes as f64);
    }

    /// An unexpired record evicted for room over the whole budget (`cause="budget"`).
    pub(crate) fn evicted_over_budget(&self) {
        self.over_budget.increment(1);
    }

    /// An unexpired record evicted for room over its share's part of the budget
    /// (`cause="scope_share"`).
    pub(crate) fn evicted_over_share(&self) {
        self.over_share.increment(1);
    }
}

/// Registers `idempotency_rejected_by_schema_total` at 0 for each reason, when the contract
/// of `operation` is configured.
#[cfg(feature = "contract")]
pub(crate) fn schema_series(operation: &str) {
    for reason in SCHEMA_REASONS {
        let operation = metrics::SharedString::from(operation.to_owned());
        counter!("idempotency_rejected_by_schema_total", "operation" => operation, "reason" => *reason)
            .increment(0);
    }
}

#[cfg(feature = "contract")]
pub(crate) fn rejected_by_schema(operation: &str, reason: &'static str) {
    let operation = metrics::SharedString::from(operation.to_owned());
    counter!("idempotency_rejected_by_schema_total", "operation" => operation, "reason" => reason)
        .increment(1);
    tracing::debug!(reason, "rejected by schema: not executed");
}

/// Registers the `idempotency_rejected_by_schema_total` series of `op` at 0 with each reason,
/// at its first call checked against a schema.
#[cfg(all(feature = "contract", feature = "mcp"))]
pub(crate) fn arguments_checked(op: &Op) {
    op.hot.schema_checked();
}

/// A call whose arguments break its tool's schema, answered without running (`reason`: the
/// first violation's).
#[cfg(all(feature = "contract", feature = "mcp"))]
pub(crate) fn arguments_rejected(op: &Op, reason: &'static str) {
    op.hot.schema_rejected(reason);
    tracing::debug!(reason, "arguments rejected by the tool's schema: not run");
}

/// Counts how often each intent has been asked for in this process: the signal to read before
/// any fix, since 1 means no duplicate.
///
/// A direct-mapped table of 16 384 slots, each holding a 32-bit tag of the key and its count,
/// written by hand because a cache would cost an insertion per new intent on the hot path: this
/// costs a read and a write of one slot and 128 KiB, fixed, small enough to stay mostly in a
/// core's cache under load; it remembers the last 16 384 intents or so, minutes of an agent's
/// calls. A slot is read and written plainly (not as one atomic exchange, which would hold up
/// the request until its line arrives and every earlier write has left), so that a miss
/// overlaps the work that follows. Two intents that share a slot evict each other, and two threads
/// counting one slot at once may both count 1: either way the histogram errs towards "no
/// duplicate", never the other way.
pub(crate) struct Attempts {
    slots: Box<[AtomicU64]>,
}

const ATTEMPT_SLOTS: usize = 1 << 14;

impl Default for Attempts {
    fn default() -> Self {
        Self {
            slots: (0..ATTEMPT_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Attempts {
    fn slot(&self, key: &IntentKey) -> &AtomicU64 {
        let bytes = key.as_bytes();
        &self.slots[usize::from(u16::from_le_bytes([bytes[0], bytes[1]])) % ATTEMPT_SLOTS]
    }

    /// Counts one more attempt of `key` and records it; returns its number (1 = first).
    pub(crate) fn count(&self, op: &Op, key: &IntentKey) -> u32 {
        let bytes = key.as_bytes();
        let slot = self.slot(key);
        let tag = u64::from(u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]])) << 32;
        let current = slot.load(Ordering::Relaxed);
        let next = if current & !0xffff_ffff == tag {
            (current + 1).min(tag | 0xffff_ffff)
        } else {
            tag | 1
        };
        slot.store(next, Ordering::Relaxed);
        let attempt = (next & 0xffff_ffff) as u32;
        op.hot.attempts.record(f64::from(attempt));
        attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_count_per_intent_and_restart_when_a_slot_is_taken() {
        let attempts = Attempts::default();
        let (parts, ()) = http::Request::post("/x").body(()).unwrap().into_parts();
        let op = Ops::default().of(None, &parts);
        let a = IntentKey::from_bytes([1; 32]);
        let mut b_bytes = [1u8; 32];
        b_bytes[5] = 2; // same slot as `a`, another tag
        let b = IntentKey::from_bytes(b_bytes);
        assert_eq!(attempts.count(&op, &a), 1);
        assert_eq!(attempts.count(&op, &a), 2);
        assert_eq!(attempts.count(&op, &b), 1);
        assert_eq!(attempts.count(&op, &a), 1);
        assert_eq!(attempts.count(&op, &IntentKey::from_bytes([9; 32])), 1);
    }
}
