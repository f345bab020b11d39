//! The layer and its builder.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use http::HeaderName;
use tower_layer::Layer;

use crate::canonical::pointer::parse_pointer;
use crate::classify::Classify;
use crate::engine::detached::DetachedExecutions;
use crate::engine::{Engine, Runtime};
use crate::idempotency::Idempotency;
use crate::settings::{fresh_rules, Settings};
use crate::store::{MemoryStore, Store};

/// Makes repeated calls of one intent run once: concurrent duplicates wait for the running
/// execution, later ones get its response replayed, and a caller past its deadline is told
/// "in progress, ask later" while the action goes on.
///
/// Safe methods (GET, HEAD, OPTIONS, TRACE) pass through untouched. Every other request on a
/// protected path needs a scope (by default the caller's `Authorization` credential, hashed,
/// narrowed by the `x-session-id` header; the session alone for a caller with no credential);
/// its intent key is
/// derived from the scope, the operation (method, path, sorted query) and the canonical JSON
/// of its body.
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::post, Router};
/// use tower_idempotency::IdempotencyLayer;
///
/// let layer = IdempotencyLayer::new()
///     .protect("/tools")
///     .ignore_field("/tool_call_id")
///     .idempotency_key_header()
///     .deadline(Duration::from_secs(20))
///     .deadline_for("/tools/generate_report", Duration::ZERO);
///
/// let app: Router = Router::new()
///     .route("/tools/send_email", post(|| async { "sent" }))
///     .layer(layer);
/// ```
#[must_use = "a layer does nothing until it wraps a service"]
pub struct IdempotencyLayer<St = MemoryStore> {
    /// Fixed once a service is built from them: a builder call makes new settings.
    pub(crate) settings: Arc<Settings>,
    /// Created with the layer, shared by every layer cloned from it and every service.
    pub(crate) runtime: Arc<Runtime<St>>,
}

// Written by hand: a derive would require `St: Clone`.
impl<St> Clone for IdempotencyLayer<St> {
    fn clone(&self) -> Self {
        Self {
            settings: Arc::clone(&self.settings),
            runtime: Arc::clone(&self.runtime),
        }
    }
}

impl<St> std::fmt::Debug for IdempotencyLayer<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let settings = &self.settings;
        f.debug_struct("IdempotencyLayer")
            .field("scope", &settings.scope)
            .field("status_path", &settings.status_path)
            .field("body_limit", &settings.body_limit)
            .finish_non_exhaustive()
    }
}

impl Default for IdempotencyLayer<MemoryStore> {
    fn default() -> Self {
        Self::new()
    }
}

impl IdempotencyLayer<MemoryStore> {
    /// A layer with the defaults: an in-process [`MemoryStore`], scope from `x-session-id`,
    /// 25 s deadline, 24 h retention, 1 MiB body and response limits, status path
    /// `/_idempotency`.
    pub fn new() -> Self {
        Self::with_store(MemoryStore::new())
    }
}

impl<St: Store> IdempotencyLayer<St> {
    /// A layer with the default settings over `store`.
    pub fn with_store(store: St) -> Self {
        Self {
            settings: Arc::new(Settings::default()),
            runtime: Arc::new(Runtime::new(store)),
        }
    }

    /// Keeps the settings and replaces the store. The detached executions stay the same, so a
    /// [`DetachedExecutions`] handle taken before still watches them.
    pub fn store<St2: Store>(self, store: St2) -> IdempotencyLayer<St2> {
        let mut runtime = Runtime::new(store);
        runtime.detached = self.runtime.detached.clone();
        IdempotencyLayer {
            settings: self.settings,
            runtime: Arc::new(runtime),
        }
    }
}

impl<St> IdempotencyLayer<St> {
    /// New settings, changed by `change`; the services already built keep theirs.
    pub(crate) fn set(mut self, change: impl FnOnce(&mut Settings)) -> Self {
        let settings = Arc::make_mut(&mut self.settings);
        change(settings);
        settings.rules = fresh_rules();
        self
    }

    /// The store the layer uses.
    pub fn store_ref(&self) -> &St {
        &self.runtime.store
    }

    /// A handle on the executions running detached, to wait for them at shutdown. Every
    /// layer cloned from this one, and every service built from them, runs its executions
    /// under it.
    pub fn detached(&self) -> DetachedExecutions {
        self.runtime.detached.handle()
    }

    /// Names each request's operation in metrics and traces. The default is the method and the
    /// path with id-like segments masked (`POST /orders/:id/refund`); with axum, the matched
    /// route is exact and bounded:
    ///
    /// ```
    /// use axum::extract::MatchedPath;
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new().route_label(|parts| {
    ///     let route = parts.extensions.get::<MatchedPath>().map_or("unmatched", |p| p.as_str());
    ///     format!("{} {route}", parts.method)
    /// });
    /// ```
    pub fn route_label<F>(self, label: F) -> Self
    where
        F: Fn(&Parts) -> String + Send + Sync + 'static,
    {
        self.set(|s| s.route_label = Some(Arc::new(label)))
    }

    /// Protects only paths under these prefixes (whole segments: `/tools` covers
    /// `/tools/x`, not `/toolsx`). Without any, every path is protected.
    pub fn protect(self, prefix: impl Into<String>) -> Self {
        self.set(|s| s.paths.protect(prefix))
    }

    /// Never protects paths under this prefix; the longer of a protect and an exclude
    /// prefix wins.
    pub fn exclude(self, prefix: impl Into<String>) -> Self {
        self.set(|s| s.paths.exclude(prefix))
    }

    /// Leaves a JSON field out of the fingerprint: one that changes on every attempt of the
    /// same intent, such as `/tool_call_id`.
    ///
    /// # Panics
    ///
    /// If `pointer` is not a JSON Pointer (RFC 6901), such as `/a/b`.
    pub fn ignore_field(self, pointer: &str) -> Self {
        let pointer = parse_pointer(pointer);
        self.set(|s| s.fingerprint.ignored.push(pointer))
    }

    /// Rewrites the parsed body before it is fingerprinted (lower-case an address, drop a
    /// default). The request the tool receives is not changed. It must give the same result
    /// for the same body every time: a repeat of a recent body's exact bytes reuses that
    /// body's fingerprint without calling it again.
    ///
    /// A body holding an integer that no 64-bit type can hold (or `-0`) cannot cross into a
    /// `serde_json::Value` exactly: it is fingerprinted without the hook, its ignored fields
    /// and key field still left out.
    pub fn normalize<F>(self, normalize: F) -> Self
    where
        F: Fn(&mut serde_json::Value) + Send + Sync + 'static,
    {
        self.set(|s| s.fingerprint.normalizer = Some(Arc::new(normalize)))
    }

    /// Writes numbers as RFC 8785 does, for upstreams that cannot tell an integer from a
    /// number with a fraction (JavaScript): `1`, `1.0` and `1e0` are then one intent, and so
    /// are `0` and `-0`. By default they are two, as typed parsers (serde_json, Python's
    /// `json`) read them. Integers beyond ±2^53 keep their exact digits either way.
    pub fn rfc8785_numbers(self) -> Self {
        self.set(|s| s.fingerprint.numbers = crate::canonical::NumberKinds::Merged)
    }

    /// Honours the `Idempotency-Key` header (IETF draft) as an explicit key.
    pub fn idempotency_key_header(self) -> Self {
        self.key_header(HeaderName::from_static("idempotency-key"))
    }

    /// Honours this header as an explicit key.
    pub fn key_header(self, name: HeaderName) -> Self {
        self.set(|s| s.key_header = Some(name))
    }

    /// Honours this JSON field (such as `/request_id`) as an explicit key. The field is then
    /// left out of the fingerprint; the header wins when both are sent.
    ///
    /// # Panics
    ///
    /// If `pointer` is not a JSON Pointer (RFC 6901).
    pub fn key_field(self, pointer: &str) -> Self {
        let pointer = parse_pointer(pointer);
        self.set(|s| s.fingerprint.key_field = Some(pointer))
    }

    /// How long a caller waits before it gets 202 "in progress" (default 25 s). Zero answers
    /// 202 at once: the explicitly asynchronous tool. A time past a hundred years, up to
    /// `Duration::MAX` ("always wait"), is taken as that.
    pub fn deadline(self, deadline: Duration) -> Self {
        self.set(|s| s.paths.default_deadline = deadline)
    }

    /// The deadline of paths under `prefix`.
    pub fn deadline_for(self, prefix: impl Into<String>, deadline: Duration) -> Self {
        self.set(|s| s.paths.deadline_for(prefix, deadline))
    }

    /// How long completed outcomes are kept for replay (default 24 h). It should exceed the
    /// longest time clients keep retrying. The shipped stores keep nothing past a hundred
    /// years: a longer time, up to `Duration::MAX`, is taken as that.
    pub fn retention(self, retention: Duration) -> Self {
        self.set(|s| s.paths.default_retention = retention)
    }

    /// The retention of paths under `prefix`.
    pub fn retention_for(self, prefix: impl Into<String>, retention: Duration) -> Self {
        self.set(|s| s.paths.retention_for(prefix, retention))
    }

    /// How long an outcome that is not known blocks the action's repeats (default 1 h, and
    /// never longer than the retention): a call abandoned past its `max_execution`, whose
    /// answer was lost, or whose answer says nothing of the effect (a gateway's 502 or 504).
    /// Until then every repeat is told that the action may have run and must be checked
    /// before it is repeated; after it, a repeat runs again.
    pub fn unknown_retention(self, retention: Duration) -> Self {
        self.set(|s| s.unknown_retention = retention)
    }

    /// Abandons an execution still running after `limit` (off by default): the action is
    /// recorded as run with an unknown outcome, its callers and the status path are told it may
    /// have happened and must be checked before it is repeated, and it never runs again by
    /// itself. For tools that can hang; the tool's future is dropped.
    pub fn max_execution(self, limit: Duration) -> Self {
        self.set(|s| s.paths.default_max_execution = Some(limit))
    }

    /// The execution bound of paths under `prefix`; see [`max_execution`](Self::max_execution).
    pub fn max_execution_for(self, prefix: impl Into<String>, limit: Duration) -> Self {
        self.set(|s| s.paths.max_execution_for(prefix, limit))
    }

    /// Largest request body buffered (default 1 MiB); larger ones get 413, nothing executed.
    pub fn body_limit(self, bytes: usize) -> Self {
        self.set(|s| s.body_limit = bytes)
    }

    /// Largest response kept for replay (default 1 MiB). A larger one still reaches its first
    /// caller; repeats are told the action already ran. In MCP mode the layer reads the
    /// server's answer to find it: at most sixteen times this (at least 16 MiB) of one answer,
    /// or of one event of a stream, whose notifications before the answer are dropped as they
    /// come however many there are.
    pub fn response_limit(self, bytes: usize) -> Self {
        self.set(|s| s.response_limit = bytes)
    }

    /// Where callers ask about an action (default `/_idempotency`).
    pub fn status_path(self, path: impl Into<String>) -> Self {
        let mut path = path.into();
        while path.ends_with('/') {
            path.pop();
        }
        self.set(|s| s.status_path = path)
    }

    /// Where the status path is reached from outside, written before it in every status URL
    /// the layer hands out (`location`, `status_url`): the prefix a service is nested under
    /// (`Router::nest("/api", ...)`, a path-rewriting proxy), or an absolute base URL. The
    /// status path itself is still matched as the layer sees requests, after the prefix is
    /// taken off. Default: none, so status URLs are root-relative.
    ///
    /// Under `Router::nest`, give the nested router a fallback of its own before the layer, so
    /// that the status path, which names no route, reaches the layer rather than the outer
    /// router's fallback:
    ///
    /// ```
    /// use axum::{http::StatusCode, routing::post, Router};
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let tools = Router::new()
    ///     .route("/tools/send_email", post(|| async { "sent" }))
    ///     .fallback(|| async { StatusCode::NOT_FOUND })
    ///     .layer(IdempotencyLayer::new().status_url_prefix("/api"));
    /// // Status URLs read `/api/_idempotency/{intent}`, which reaches the layer as
    /// // `/_idempotency/{intent}`.
    /// let app: Router = Router::new().nest("/api", tools);
    /// # let _ = app;
    /// ```
    pub fn status_url_prefix(self, prefix: impl Into<String>) -> Self {
        let mut prefix = prefix.into();
        while prefix.ends_with('/') {
            prefix.pop();
        }
        self.set(|s| s.status_url_prefix = prefix)
    }

    /// Answers duplicates of a running action with 409, as the IETF draft does, instead of 202.
    pub fn strict_ietf(self) -> Self {
        self.set(|s| s.strict_ietf = true)
    }

    /// Replaces the rule that decides which outcomes are kept and which release the key.
    pub fn classify<C: Classify>(self, classify: C) -> Self {
        self.set(|s| s.classify = Arc::new(classify))
    }

    /// Lease of a running execution (default 30 s), renewed every third of it while it runs.
    pub fn lease(self, lease: Duration) -> Self {
        self.set(|s| s.lease = lease)
    }

    /// Bounds every store call (default 2 s): a call that takes longer counts as failed, as a
    /// store that panics does, so a hanging custom store cannot hold a caller past its
    /// deadline. A claim that fails is answered 503 `not_executed` (fail-closed), and the
    /// layer gives back the lease it may have taken.
    pub fn store_timeout(self, timeout: Duration) -> Self {
        self.set(|s| s.store_timeout = timeout)
    }

    /// How long a failed attempt stays visible on the status path (default 5 min).
    pub fn failure_ttl(self, ttl: Duration) -> Self {
        self.set(|s| s.failure_ttl = ttl)
    }

    /// Runs requests unprotected when the store cannot answer, instead of refusing them with
    /// 503 (logged each time). Off by default: fail-closed.
    pub fn fail_open(self) -> Self {
        self.set(|s| s.fail_open = true)
    }

    /// Adds an `_idempotency` member to replayed JSON object bodies, for models that never
    /// see headers. Off by default: replays are byte for byte.
    pub fn annotate_replays(self) -> Self {
        self.set(|s| s.annotate_replays = true)
    }

    /// Bounds the executions running at once (default 1024); past it, 503 with nothing
    /// executed. Layers cloned from one builder count their executions together, each against
    /// its own bound.
    pub fn max_detached(self, max: usize) -> Self {
        self.set(|s| s.max_detached = max)
    }

    /// Observe mode: keys every call of a protected route as when enforcing and counts how
    /// often each intent repeats (`idempotency_duplicate_checks_total`, across every instance
    /// on the same store), but refuses, replays, coalesces and rewrites nothing: each call is
    /// passed to the service as it came. See the reference's observability page.
    pub fn observe(self) -> Self {
        self.set(|s| s.observe = true)
    }

    /// What observe mode counted in this process, per operation, for a report
    /// ([`Duplicates::report`](crate::Duplicates::report)); layers cloned from this one share it.
    pub fn duplicates(&self) -> crate::Duplicates {
        self.runtime.duplicates.clone()
    }

    /// An operator's list, show, resolve and purge of this layer's store ([`crate::admin`]).
    pub fn admin(&self) -> crate::admin::Admin<St> {
        crate::admin::Admin::new(Arc::clone(&self.settings), Arc::clone(&self.runtime))
    }
}

impl<S, St> Layer<S> for IdempotencyLayer<St> {
    type Service = Idempotency<S, St>;

    fn layer(&self, inner: S) -> Self::Service {
        let engine = Engine::new(Arc::clone(&self.settings), Arc::clone(&self.runtime));
        Idempotency::from_engine(inner, Arc::new(engine))
    }
}
