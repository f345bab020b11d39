//! Metrics (through the `metrics` facade) and trace fields.
//!
//! Labels stay bounded: the operation label comes from a route label function, never a raw
//! path with ids in it, and no label or log field ever holds a key, a session or a body.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use http::request::Parts;
use http::{Method, StatusCode};
use metrics::{counter, histogram, Counter, Histogram, SharedString};

use crate::key::IntentKey;

/// A user function that names the operation of a request for metrics and traces.
pub(crate) type RouteLabel = Arc<dyn Fn(&Parts) -> String + Send + Sync>;

/// The operation of one request: its label, and the metric handles it uses on every request.
#[derive(Clone)]
pub(crate) struct Op {
    label: Arc<str>,
    hot: Arc<Hot>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Op").field(&self.label).finish()
    }
}

/// Handles registered once per operation: looking a labelled metric up in the recorder on
/// every request costs more than the rest of a replay's bookkeeping.
struct Hot {
    executions: Counter,
    replays: Counter,
    attempts: Histogram,
    duration: Histogram,
    /// Answers per status class: 1xx to 5xx, then `error`.
    classes: [Counter; 6],
}

impl Hot {
    fn new(label: &Arc<str>) -> Self {
        let op = || SharedString::from(Arc::clone(label));
        let class = |class: &'static str| counter!("idempotency_requests_total", "operation" => op(), "class" => class);
        Self {
            executions: counter!("idempotency_executions_total", "operation" => op()),
            replays: counter!("idempotency_replays_total", "operation" => op()),
            attempts: histogram!("idempotency_intent_attempts", "operation" => op()),
            duration: histogram!("idempotency_request_duration_seconds", "operation" => op()),
            classes: [
                class("1xx"),
                class("2xx"),
                class("3xx"),
                class("4xx"),
                class("5xx"),
                class("error"),
            ],
        }
    }
}

/// The operations a layer has seen, with their handles. At most [`MAX_OPERATIONS`] distinct
/// labels are kept apart; past them every new label is counted under [`OVERFLOW`], so that a
/// caller flooding distinct paths or tool names cannot grow the label set of the metrics.
pub(crate) struct Ops {
    /// Tells this layer's operations from another's in the label a thread remembers.
    id: u64,
    known: RwLock<HashMap<Arc<str>, Op, rapidhash::fast::RandomState>>,
    overflow: Op,
    unscoped: Op,
}

/// Distinct `operation` labels one layer reports in its metrics and spans; past them every
/// new label is reported as `(other)`, and requests without a scope as `(no scope)`.
pub const MAX_OPERATIONS: usize = 512;
/// The label of every operation past [`MAX_OPERATIONS`].
pub(crate) const OVERFLOW: &str = "(other)";
/// The label of requests without a scope, which are refused before any label is computed.
pub(crate) const UNSCOPED: &str = "(no scope)";

impl Default for Ops {
    fn default() -> Self {
        static IDS: AtomicU64 = AtomicU64::new(0);
        Self {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            known: RwLock::default(),
            overflow: Op::labelled(OVERFLOW),
            unscoped: Op::labelled(UNSCOPED),
        }
    }
}

impl Ops {
    /// The operation of a request.
    pub(crate) fn of(&self, label: Option<&RouteLabel>, parts: &Parts) -> Op {
        let Some(label) = label else {
            return self.of_default(parts);
        };
        // A label function that panics costs the request its label, not its answer.
        let text = crate::guard::guarded("route_label", || label(parts))
            .unwrap_or_else(|_| default_route_label(parts));
        self.named(&text)
    }

    /// The operation under the default label. Each thread remembers the last request's method
    /// and path and the operation they gave, so that a run of calls of one tool labels each
    /// with a comparison.
    fn of_default(&self, parts: &Parts) -> Op {
        struct Last {
            ops: u64,
            method: Method,
            path: String,
            op: Op,
        }
        thread_local! {
            static LAST: std::cell::RefCell<Option<Last>> = const { std::cell::RefCell::new(None) };
        }
        let path = parts.uri.path();
        LAST.with_borrow_mut(|last| {
            if let Some(last) = last {
                if last.ops == self.id && last.method == parts.method && last.path == path {
                    return last.op.clone();
                }
            }
            let op = self.named_with(|text| write_default_route_label(parts, text));
            match last {
                Some(last) => {
                    last.ops = self.id;
                    last.method.clone_from(&parts.method);
                    last.path.clear();
                    last.path.push_str(path);
                    last.op = op.clone();
                }
                None => {
                    *last = Some(Last {
                        ops: self.id,
                        method: parts.method.clone(),
                        path: path.to_owned(),
                        op: op.clone(),
                    })
                }
            }
            op
        })
    }

    /// The operation whose label `write` writes into a buffer each thread keeps, so that
    /// naming a request's operation allocates nothing once the label is known.
    pub(crate) fn named_with(&self, write: impl FnOnce(&mut String)) -> Op {
        thread_local! {
            static LABEL: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        LABEL.with_borrow_mut(|text| {
            text.clear();
            write(text);
            self.named(text)
        })
    }

    /// The operation labelled `text`.
    fn named(&self, text: &str) -> Op {
        if let Some(op) = self
            .known
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(text)
        {
            return op.clone();
        }
        let mut known = self.known.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(op) = known.get(text) {
            return op.clone();
        }
        if known.len() >= MAX_OPERATIONS {
            return self.overflow.clone();
        }
        let op = Op::labelled(text);
        known.insert(Arc::clone(&op.label), op.clone());
        op
    }

    /// The operation of a request without a scope.
    pub(crate) fn unscoped(&self) -> Op {
        self.unscoped.clone()
    }
}

impl Op {
    fn labelled(text: &str) -> Self {
        let label: Arc<str> = text.into();
        Self {
            hot: Arc::new(Hot::new(&label)),
            label,
        }
    }

    fn value(&self) -> SharedString {
        SharedString::from(Arc::clone(&self.label))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.label
    }
}

/// `METHOD /path`, with segments that look like ids (a digit, or over 24 characters) shown as
/// `:id` and at most four segments: bounded without knowing the routes.
pub(crate) fn default_route_label(parts: &Parts) -> String {
    let mut label = String::with_capacity(48);
    write_default_route_label(parts, &mut label);
    label
}

/// Writes the default label of a request into `label`.
fn write_default_route_label(parts: &Parts, label: &mut String) {
    label.push_str(parts.method.as_str());
    label.push(' ');
    let mut segments = parts.uri.path().split('/').filter(|s| !s.is_empty());
    for segment in segments.by_ref().take(4) {
        label.push('/');
        if segment.len() > 24 || segment.bytes().any(|b| b.is_ascii_digit()) {
            label.push_str(":id");
        } else {
            label.push_str(segment);
        }
    }
    if segments.next().is_some() {
        label.push_str("/…");
    }
    if label.ends_with(' ') {
        label.push('/');
    }
}

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

/// Records how a protected request ended on its span.
pub(crate) fn outcome(tag: &'static str) {
    tracing::Span::current().record("outcome", tag);
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
    counter!("idempotency_coalesced_total", "operation" => op.value()).increment(1);
    tracing::debug!("coalesced onto a running execution");
}

pub(crate) fn in_progress(op: &Op) {
    counter!("idempotency_in_progress_total", "operation" => op.value()).increment(1);
    tracing::debug!("rewritten to in_progress at the deadline");
}

pub(crate) fn released(op: &Op, cause: &'static str) {
    counter!("idempotency_releases_total", "operation" => op.value(), "cause" => cause)
        .increment(1);
    tracing::debug!(cause, "released the intent for a retry");
}

pub(crate) fn fenced(op: &Op) {
    counter!("idempotency_fenced_total", "operation" => op.value()).increment(1);
    tracing::warn!(
        "completion fenced: another owner holds this intent, so this outcome was not recorded"
    );
}

/// A completion the store kept refusing was given up: the lease lapses, and a repeat may run
/// the action again.
pub(crate) fn completion_abandoned(op: &Op) {
    counter!("idempotency_completions_abandoned_total", "operation" => op.value()).increment(1);
}

/// A lease renewal found another owner (or none): another instance may run the action.
pub(crate) fn lease_lost(op: &Op) {
    counter!("idempotency_lease_lost_total", "operation" => op.value()).increment(1);
    tracing::warn!(
        "the lease of a running execution was lost: another instance may run this action, and \
         this execution's outcome will not be recorded"
    );
}

/// A protected request ran without protection: no scope (when allowed) or fail-open.
pub(crate) fn unprotected(op: &Op, reason: &'static str) {
    counter!("idempotency_unprotected_total", "operation" => op.value(), "reason" => reason)
        .increment(1);
}

/// A client's cancellation of a protected call, answered by the layer instead of the server.
#[cfg(feature = "mcp")]
pub(crate) fn cancellation_absorbed() {
    counter!("idempotency_cancellations_absorbed_total").increment(1);
    tracing::debug!("absorbed a cancellation: the protected call goes on");
}

/// Executions still running when a shutdown's grace period ended.
pub(crate) fn shutdown_unfinished(unfinished: usize) {
    counter!("idempotency_shutdown_unfinished_total").increment(unfinished as u64);
    tracing::error!(
        unfinished,
        "shutdown: executions still running at the end of the grace period are cut off; \
         their leases lapse and another instance may run them again"
    );
}

pub(crate) fn not_executed(op: &Op, reason: &'static str) {
    counter!("idempotency_not_executed_total", "operation" => op.value(), "reason" => reason)
        .increment(1);
    tracing::debug!(reason, "refused: not executed");
}

pub(crate) fn answered(op: &Op, status: Option<StatusCode>, started: Instant) {
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

/// Bytes the memory store charges to kept records, after a write.
pub(crate) fn memory_store_bytes(bytes: u64) {
    metrics::gauge!("idempotency_memory_store_bytes").set(bytes as f64);
}

/// An unexpired record evicted for room: over the whole budget (`budget`), or over its
/// share's part of it (`scope_share`).
pub(crate) fn evicted(over_share: bool) {
    // Literal labels: a key built from a variable would allocate its label list each time,
    // and at the budget every first execution evicts a record.
    if over_share {
        counter!("idempotency_evictions_total", "cause" => "scope_share").increment(1);
    } else {
        counter!("idempotency_evictions_total", "cause" => "budget").increment(1);
    }
}

#[cfg(feature = "contract")]
pub(crate) fn rejected_by_schema(operation: &str, reason: &'static str) {
    let operation = SharedString::from(operation.to_owned());
    counter!("idempotency_rejected_by_schema_total", "operation" => operation, "reason" => reason)
        .increment(1);
    tracing::debug!(reason, "rejected by schema: not executed");
}

/// Counts how often each intent has been asked for in this process: the signal to read before
/// any fix, since 1 means no duplicate.
///
/// A direct-mapped table of 65 536 slots, each holding a 32-bit tag of the key and its count,
/// written by hand because a cache would cost an insertion per new intent on the hot path: this
/// costs one atomic operation and 512 KiB, fixed. Two intents that share a slot evict each
/// other, so a count may restart at 1: the histogram errs towards "no duplicate", never the
/// other way.
pub(crate) struct Attempts {
    slots: Box<[AtomicU64]>,
}

const ATTEMPT_SLOTS: usize = 1 << 16;

impl Default for Attempts {
    fn default() -> Self {
        Self {
            slots: (0..ATTEMPT_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Attempts {
    /// Counts one more attempt of `key` and records it; returns its number (1 = first).
    pub(crate) fn count(&self, op: &Op, key: &IntentKey) -> u32 {
        let bytes = key.as_bytes();
        let slot = &self.slots[usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))];
        let tag = u64::from(u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]])) << 32;
        let mut current = slot.load(Ordering::Relaxed);
        let attempt = loop {
            let next = if current & !0xffff_ffff == tag {
                (current + 1).min(tag | 0xffff_ffff)
            } else {
                tag | 1
            };
            match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break (next & 0xffff_ffff) as u32,
                Err(actual) => current = actual,
            }
        };
        op.hot.attempts.record(f64::from(attempt));
        attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn label(method: &str, uri: &str) -> String {
        let (parts, ()) = Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap()
            .into_parts();
        default_route_label(&parts)
    }

    #[test]
    fn a_label_a_thread_remembers_is_its_own_layers_and_its_own_requests() {
        let parts = |method: &str, uri: &str| {
            let request = Request::builder().method(method).uri(uri).body(()).unwrap();
            request.into_parts().0
        };
        let (first, second) = (Ops::default(), Ops::default());
        let send = parts("POST", "/tools/send_email");
        let a = first.of(None, &send);
        let b = second.of(None, &send);
        assert_eq!(a.as_str(), "POST /tools/send_email");
        assert!(
            !Arc::ptr_eq(&a.hot, &b.hot),
            "each layer has its own handles"
        );
        assert!(Arc::ptr_eq(&first.of(None, &send).hot, &a.hot));
        assert_eq!(
            first.of(None, &parts("GET", "/tools/send_email")).as_str(),
            "GET /tools/send_email"
        );
        assert_eq!(
            first.of(None, &parts("POST", "/tools/search")).as_str(),
            "POST /tools/search"
        );
        assert!(Arc::ptr_eq(&first.of(None, &send).hot, &a.hot));
    }

    #[test]
    fn default_labels_hide_ids_and_stay_short() {
        assert_eq!(label("POST", "/tools/send_email"), "POST /tools/send_email");
        assert_eq!(
            label("POST", "/orders/123/refund"),
            "POST /orders/:id/refund"
        );
        assert_eq!(
            label("PUT", "/users/4f9c2e7a-0b1d-4d1e-9a77-3c2f1e0d9b8a"),
            "PUT /users/:id"
        );
        assert_eq!(label("POST", "/a/b/c/d/e/f"), "POST /a/b/c/d/…");
        assert_eq!(label("POST", "/"), "POST /");
    }
}

#[cfg(test)]
mod attempts_tests {
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
