//! The series of one operation, registered together when the operation first appears, each
//! with its known label values: an alert such as `increase(idempotency_fenced_total[15m]) > 0`
//! compares two samples, so a series that first appears at 1 would pass its first event by.

use std::sync::{Arc, OnceLock};

use metrics::{counter, histogram, Counter, Histogram, SharedString};

use super::duplicates::Finding;

/// Handles registered once per operation: looking a labelled metric up in the recorder on
/// every request costs more than the rest of a replay's bookkeeping.
pub(super) struct Hot {
    label: Arc<str>,
    pub(super) executions: Counter,
    pub(super) replays: Counter,
    pub(super) coalesced: Counter,
    pub(super) in_progress: Counter,
    pub(super) fenced: Counter,
    pub(super) lease_lost: Counter,
    pub(super) abandoned: Counter,
    pub(super) backoff_refusals: Counter,
    pub(super) attempts: Histogram,
    pub(super) duration: Histogram,
    /// Answers per status class: 1xx to 5xx, then `error`.
    pub(super) classes: [Counter; 6],
    /// Requests per outcome, in the order of [`OUTCOMES`].
    outcomes: [Counter; OUTCOMES.len()],
    releases: LabelledCounters,
    refusals: LabelledCounters,
    unprotected: LabelledCounters,
    /// Observe mode's, registered at the operation's first observed call: an enforcing
    /// layer never counts them.
    checks: OnceLock<Checks>,
    /// Calls refused for arguments that break their schema, registered at the first call
    /// checked against one.
    #[cfg(all(feature = "contract", feature = "mcp"))]
    schema: OnceLock<LabelledCounters>,
}

/// How a request through a protected or observed route ends: the engine's outcomes, the tool's
/// own error, and `observed` for a call observe mode passed on.
const OUTCOMES: [&str; 8] = [
    "executed",
    "replayed",
    "in_progress",
    "failed",
    "not_executed",
    "unprotected",
    "error",
    "observed",
];

/// `cause` of `idempotency_releases_total`: every `ReleaseCause::as_str`.
const RELEASE_CAUSES: &[&str] = &[
    "status",
    "credentials",
    "no_store",
    "predicate",
    "inner_error",
    "panic",
    "response_body",
    "cancelled",
    "input_required",
    "rolled_back",
];

/// `reason` of `idempotency_not_executed_total`: every refusal's reason, then MCP's.
const REFUSALS: &[&str] = &[
    "layer-fault",
    "missing-scope",
    "repeated-scope",
    "body-too-large",
    "body-unreadable",
    "malformed-key",
    "unkeyable",
    "key-reused",
    "store-unavailable",
    "store-full",
    "too-busy",
    "backing-off",
    #[cfg(feature = "mcp")]
    "mcp-version",
    #[cfg(feature = "mcp")]
    "mcp-header-mismatch",
    #[cfg(feature = "mcp")]
    "mcp-envelope",
];

/// `reason` of `idempotency_rejected_by_schema_total`: every reason a schema violation gives.
#[cfg(feature = "contract")]
pub(crate) const SCHEMA_REASONS: &[&str] = &[
    "not_json",
    "required",
    "type",
    "format",
    "additional_properties",
    "enum",
    "pattern",
    "length",
    "range",
    "items",
    "schema",
];

/// `reason` of `idempotency_unprotected_total`.
const UNPROTECTED: &[&str] = &["missing-scope", "store-unavailable"];

/// `result` of `idempotency_duplicate_checks_total`.
const RESULTS: [&str; 4] = ["first", "repeat", "not_keyable", "uncounted"];

impl Hot {
    pub(super) fn new(label: &Arc<str>) -> Self {
        let op = || SharedString::from(Arc::clone(label));
        let one = |name: &'static str| counter!(name, "operation" => op());
        let class = |class: &'static str| counter!("idempotency_requests_total", "operation" => op(), "class" => class);
        Self {
            label: Arc::clone(label),
            executions: one("idempotency_executions_total"),
            replays: one("idempotency_replays_total"),
            coalesced: one("idempotency_coalesced_total"),
            in_progress: one("idempotency_in_progress_total"),
            fenced: one("idempotency_fenced_total"),
            lease_lost: one("idempotency_lease_lost_total"),
            abandoned: one("idempotency_completions_abandoned_total"),
            backoff_refusals: one("idempotency_backoff_refusals_total"),
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
            outcomes: OUTCOMES.map(|outcome| {
                counter!("idempotency_outcomes_total", "operation" => op(), "outcome" => outcome)
            }),
            releases: LabelledCounters::new("idempotency_releases_total", "cause", RELEASE_CAUSES, label),
            refusals: LabelledCounters::new("idempotency_not_executed_total", "reason", REFUSALS, label),
            unprotected: LabelledCounters::new("idempotency_unprotected_total", "reason", UNPROTECTED, label),
            checks: OnceLock::new(),
            #[cfg(all(feature = "contract", feature = "mcp"))]
            schema: OnceLock::new(),
        }
    }

    /// The counter of `outcome`, one of [`OUTCOMES`].
    pub(super) fn outcome(&self, outcome: &str) -> &Counter {
        let at = OUTCOMES.iter().position(|known| *known == outcome);
        debug_assert!(at.is_some(), "an outcome with no counter: {outcome}");
        // Never past the list: an outcome it lacks is counted as an error of its own.
        &self.outcomes[at.unwrap_or(6)]
    }

    /// Counts a release of `cause`.
    pub(super) fn released(&self, cause: &'static str) {
        self.releases.increment(cause);
    }

    /// Counts a request refused for `reason`.
    pub(super) fn refused(&self, reason: &'static str) {
        self.refusals.increment(reason);
    }

    /// Counts a request run without protection for `reason`.
    pub(super) fn unprotected(&self, reason: &'static str) {
        self.unprotected.increment(reason);
    }

    /// Observe mode's handles, registered at the first call.
    pub(super) fn checks(&self) -> &Checks {
        self.checks.get_or_init(|| Checks::new(&self.label))
    }

    /// The counters of calls refused by a schema, registered at the first call checked.
    #[cfg(all(feature = "contract", feature = "mcp"))]
    fn schema(&self) -> &LabelledCounters {
        self.schema.get_or_init(|| {
            let name = "idempotency_rejected_by_schema_total";
            LabelledCounters::new(name, "reason", SCHEMA_REASONS, &self.label)
        })
    }

    /// Registers the counters of calls refused by a schema, at 0.
    #[cfg(all(feature = "contract", feature = "mcp"))]
    pub(super) fn schema_checked(&self) {
        self.schema();
    }

    /// Counts a call refused by a schema for `reason`.
    #[cfg(all(feature = "contract", feature = "mcp"))]
    pub(super) fn schema_rejected(&self, reason: &'static str) {
        self.schema().increment(reason);
    }
}

/// One counter per known value of a label, beside the operation.
struct LabelledCounters {
    name: &'static str,
    key: &'static str,
    values: &'static [&'static str],
    counters: Box<[Counter]>,
    label: Arc<str>,
}

impl LabelledCounters {
    fn new(
        name: &'static str,
        key: &'static str,
        values: &'static [&'static str],
        label: &Arc<str>,
    ) -> Self {
        let op = || SharedString::from(Arc::clone(label));
        Self {
            name,
            key,
            values,
            counters: values
                .iter()
                .map(|value| counter!(name, "operation" => op(), key => *value))
                .collect(),
            label: Arc::clone(label),
        }
    }

    fn increment(&self, value: &'static str) {
        match self.values.iter().position(|known| *known == value) {
            Some(at) => self.counters[at].increment(1),
            None => {
                debug_assert!(
                    false,
                    "{} has no {}=\"{value}\" registered",
                    self.name, self.key
                );
                let op = SharedString::from(Arc::clone(&self.label));
                counter!(self.name, "operation" => op, self.key => value).increment(1);
            }
        }
    }
}

/// Observe mode's series of one operation.
pub(super) struct Checks {
    /// Calls checked, in the order of [`RESULTS`].
    results: [Counter; RESULTS.len()],
    attempts: Histogram,
}

impl Checks {
    fn new(label: &Arc<str>) -> Self {
        let op = || SharedString::from(Arc::clone(label));
        Self {
            results: RESULTS.map(|result| {
                counter!("idempotency_duplicate_checks_total", "operation" => op(), "result" => result)
            }),
            attempts: histogram!("idempotency_duplicate_attempts", "operation" => op()),
        }
    }

    /// Counts one observed call, and its number within its intent where it was counted.
    pub(super) fn checked(&self, finding: Finding) {
        let at = RESULTS.iter().position(|known| *known == finding.as_str());
        self.results[at.unwrap_or(RESULTS.len() - 1)].increment(1);
        if let Some(attempt) = finding.attempt() {
            self.attempts.record(attempt as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ReleaseCause;

    #[test]
    fn every_release_cause_has_a_series() {
        let causes = [
            ReleaseCause::Status,
            ReleaseCause::Credentials,
            ReleaseCause::NoStore,
            ReleaseCause::Predicate,
            ReleaseCause::InnerError,
            ReleaseCause::Panic,
            ReleaseCause::ResponseBody,
            ReleaseCause::Cancelled,
            ReleaseCause::InputRequired,
            ReleaseCause::RolledBack,
        ];
        let named: Vec<&str> = causes.iter().map(ReleaseCause::as_str).collect();
        assert_eq!(named, RELEASE_CAUSES);
    }
}
