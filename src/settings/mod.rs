//! Everything the builder sets, with the defaults of the contract. Settings are fixed once a
//! layer is built: a builder call makes new settings, never changes the ones a service holds.

mod paths;
mod retry_budget;

pub use retry_budget::RetryBudget;

/// Default bound on executions running at once.
pub(crate) const DEFAULT_MAX_DETACHED: usize = 1024;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;

use self::paths::PathRules;
use crate::classify::{Classify, DefaultClassify};
use crate::key::{FingerprintRules, KeySource};
use crate::scope::{ScopeSource, DEFAULT_SCOPE_HEADER};
use crate::telemetry::RouteLabel;

/// Default time a caller waits before it is told "in progress": below the usual 30 s timeout.
pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_secs(25);
/// Default time a completed outcome is kept.
pub(crate) const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
/// Default lease of a running execution.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// Default bound on one store call.
pub(crate) const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(2);
/// Default time an outcome that is not known (the action may have run) blocks its repeats.
pub(crate) const DEFAULT_UNKNOWN_RETENTION: Duration = Duration::from_secs(60 * 60);
/// Default time a failed attempt stays visible on the status path.
pub(crate) const DEFAULT_FAILURE_TTL: Duration = Duration::from_secs(5 * 60);
/// Default limit of a buffered request body, and of a stored response.
pub(crate) const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The default status path: `GET /_idempotency/{intent}` answers what became of an intent
/// ([`IdempotencyLayer::status_path`](crate::IdempotencyLayer::status_path) sets another).
pub const DEFAULT_STATUS_PATH: &str = "/_idempotency";

/// A request's own deadline and retention, given by a dialect that knows the operation better
/// than its path does (the MCP dialect knows the tool).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timing {
    pub(crate) deadline: Option<Duration>,
    pub(crate) retention: Option<Duration>,
    pub(crate) retry_budget: Option<RetryBudget>,
}

#[derive(Clone)]
pub(crate) struct Settings {
    /// Names these fingerprint rules: a table of recent bodies shared with layers built with
    /// other rules never hands out a fingerprint these rules did not compute.
    pub(crate) rules: u64,
    pub(crate) scope: ScopeSource,
    /// Whether the user chose the scope source (`scope_header`, `scope_fn`): in MCP mode it
    /// is then the principal that the session narrows.
    pub(crate) scope_configured: bool,
    pub(crate) refuse_without_scope: bool,
    pub(crate) paths: PathRules,
    pub(crate) fingerprint: FingerprintRules,
    pub(crate) key_header: Option<HeaderName>,
    pub(crate) body_limit: usize,
    pub(crate) response_limit: usize,
    pub(crate) status_path: String,
    /// Written before the status path in the status URLs handed out.
    pub(crate) status_url_prefix: String,
    pub(crate) strict_ietf: bool,
    pub(crate) classify: Arc<dyn Classify>,
    pub(crate) lease: Duration,
    pub(crate) store_timeout: Duration,
    pub(crate) failure_ttl: Duration,
    /// How long an outcome that is not known is kept, at most.
    pub(crate) unknown_retention: Duration,
    pub(crate) fail_open: bool,
    pub(crate) annotate_replays: bool,
    /// The header whose value the layer's own answers carry as `request_id`.
    pub(crate) request_id_header: HeaderName,
    pub(crate) route_label: Option<RouteLabel>,
    pub(crate) max_detached: usize,
    /// Observe mode: protected routes are keyed and counted, never enforced.
    pub(crate) observe: bool,
    /// Transactional mode: each execution's record is written and committed in the tool's own
    /// database transaction.
    pub(crate) transactions: Option<Arc<dyn crate::store::Transactions>>,
}

/// A fresh name of fingerprint rules, one per change.
pub(crate) fn fresh_rules() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rules: fresh_rules(),
            scope: ScopeSource::unconfigured(HeaderName::from_static(DEFAULT_SCOPE_HEADER)),
            scope_configured: false,
            refuse_without_scope: true,
            paths: PathRules::new(DEFAULT_DEADLINE, DEFAULT_RETENTION),
            fingerprint: FingerprintRules::default(),
            key_header: None,
            body_limit: DEFAULT_BODY_LIMIT,
            response_limit: DEFAULT_BODY_LIMIT,
            status_path: DEFAULT_STATUS_PATH.to_owned(),
            status_url_prefix: String::new(),
            strict_ietf: false,
            classify: Arc::new(DefaultClassify),
            lease: DEFAULT_LEASE,
            store_timeout: DEFAULT_STORE_TIMEOUT,
            failure_ttl: DEFAULT_FAILURE_TTL,
            unknown_retention: DEFAULT_UNKNOWN_RETENTION,
            fail_open: false,
            annotate_replays: false,
            request_id_header: HeaderName::from_static(crate::headers::DEFAULT_REQUEST_ID_HEADER),
            route_label: None,
            max_detached: DEFAULT_MAX_DETACHED,
            observe: false,
            transactions: None,
        }
    }
}

impl Settings {
    /// The status URL of an intent.
    pub(crate) fn status_url(&self, intent: &crate::key::IntentKey) -> String {
        format!("{}{}/{}", self.status_url_prefix, self.status_path, intent)
    }

    /// What a repeat must send again besides its arguments, for the in-progress answer: the
    /// scope, and the explicit key from where the client sent it.
    pub(crate) fn repeat_keeps(&self, explicit: Option<KeySource>) -> String {
        let scope = self.scope.describe();
        match (explicit, &self.key_header, &self.fingerprint.key_field) {
            (Some(KeySource::Header), Some(name), _) => format!("{scope} and the `{name}` header"),
            (Some(KeySource::Field), _, Some(pointer)) => {
                format!("{scope} and the key in the `{pointer}` field")
            }
            _ => scope,
        }
    }

    /// What a repeat must send again, said to a caller of whom it is not known whether it sent
    /// an explicit key (the status path): the scope, and the key where one may have been sent.
    pub(crate) fn repeat_keeps_if_sent(&self) -> String {
        let scope = self.scope.describe();
        match (&self.key_header, &self.fingerprint.key_field) {
            (Some(name), _) => format!("{scope}, and the `{name}` header if the call sent one"),
            (None, Some(pointer)) => {
                format!("{scope}, and the key in the `{pointer}` field if the call sent one")
            }
            (None, None) => scope,
        }
    }

    /// The intent named by a status-path request, if `path` is one.
    pub(crate) fn status_target<'p>(&self, path: &'p str) -> Option<&'p str> {
        path.strip_prefix(self.status_path.as_str())?
            .strip_prefix('/')
    }
}
