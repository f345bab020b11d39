//! The operation of each request: its label, bounded, and the metric handles registered once
//! per label.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use http::request::Parts;
use http::Method;

use super::hot::Hot;

/// A user function that names the operation of a request for metrics and traces.
pub(crate) type RouteLabel = Arc<dyn Fn(&Parts) -> String + Send + Sync>;

/// The operation of one request: its label, and the metric handles it uses on every request.
#[derive(Clone)]
pub(crate) struct Op {
    label: Arc<str>,
    pub(super) hot: Arc<Hot>,
}

impl Op {
    /// Its label, as its metrics carry it.
    pub(crate) fn label(&self) -> &Arc<str> {
        &self.label
    }
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Op").field(&self.label).finish()
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

/// Bucket boundaries, in seconds, for the layer's duration histograms
/// (`idempotency_request_duration_seconds`, `idempotency_store_duration_seconds`): from
/// 100 µs, a store call in process, to a minute, a slow tool. Give them to the exporter you
/// install, so that the histograms are exported with buckets, as quantile queries need:
///
/// ```
/// use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
/// use tower_idempotency::{ATTEMPT_BUCKETS, DURATION_BUCKETS};
///
/// let builder = PrometheusBuilder::new()
///     .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)?
///     .set_buckets_for_metric(Matcher::Suffix("_attempts".into()), &ATTEMPT_BUCKETS)?;
/// # let _ = builder;
/// # Ok::<(), metrics_exporter_prometheus::BuildError>(())
/// ```
pub const DURATION_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// Bucket boundaries for `idempotency_intent_attempts` and `idempotency_duplicate_attempts`
/// (observe mode), the attempt number of each request for its intent: `le="1"` counts first
/// attempts, and the rest are repeats.
pub const ATTEMPT_BUCKETS: [f64; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0, 50.0];

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
        let text = crate::user_code::guarded("route_label", || label(parts))
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
