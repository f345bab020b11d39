//! The protected path: scope, body, intent key, then coalesce, replay or execute.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, request, Request, Response};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::field::Empty;
use tracing::Instrument;

use crate::answer::{self, Answer};
use crate::body::ResponseBody;
use crate::bounds::{Bufferable, Keepable, Tool};
use crate::buffer::read_body;
use crate::clock::{now_ms, seconds_since};
use crate::execute::{self, Claimed};
use crate::guard::{guarded, Panicked};
use crate::inflight::{Lead, Role, Settled};
use crate::key::{
    ExplicitKey, Fingerprint, IntentKey, KeyMaterial, KeySource, Operation, ScopeHash, Unkeyable,
};
use crate::layer::Shared;
use crate::replay::{replay, replay_stored, with_intent, written};
use crate::scope::Scope;
use crate::settings::Timing;
use crate::store::{Claim, ClaimRequest, Entry, OwnerToken, Record, Store};
use crate::telemetry::{self, outcome, Op};

/// One protected request's intent, as the execution and the answers need it.
#[derive(Debug, Clone)]
pub(crate) struct Intent {
    pub(crate) key: IntentKey,
    /// The operation label, for metrics.
    pub(crate) op: Op,
    pub(crate) scope: ScopeHash,
    /// Whose part of a bounded store the record counts against.
    pub(crate) share: ScopeHash,
    pub(crate) fingerprint: Fingerprint,
    /// Where the client sent its key, if it did: a payload mismatch must be refused, and a
    /// repeat must send the key again.
    pub(crate) explicit: Option<KeySource>,
    /// When this caller stops waiting and is told "in progress".
    pub(crate) deadline: Instant,
    /// A zero deadline: the first caller is always told "in progress", even by a tool that
    /// answered at once.
    pub(crate) asynchronous: bool,
    pub(crate) retention: Duration,
    /// How long the execution may run before it is abandoned, if it is bounded.
    pub(crate) max_execution: Option<Duration>,
}

impl Intent {
    /// Whether an execution asked for `fingerprint` under this intent's explicit key: a
    /// client that reuses its key for other arguments is refused.
    fn reuses_key_for(&self, fingerprint: &Fingerprint) -> bool {
        self.explicit.is_some() && *fingerprint != self.fingerprint
    }
}

type Answered<B, E> = Result<Response<ResponseBody<B>>, E>;

/// Runs a protected request to its answer, in a span of its own, and counts the answer.
pub(crate) async fn protect<S, St, B, ResBody>(
    shared: Arc<Shared<St>>,
    inner: S,
    request: Request<B>,
) -> Answered<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
    St: Store,
{
    let started = std::time::Instant::now();
    let (parts, body) = request.into_parts();
    let scope = shared.settings.scope.scope_of(&parts);
    // Labelled after the scope check: callers without a scope share one label, so they cannot
    // grow the label set.
    let op = match &scope {
        Ok(Some(_)) => shared.ops.of(shared.settings.route_label.as_ref(), &parts),
        _ => shared.ops.unscoped(),
    };
    let span = tracing::info_span!(
        "idempotency",
        operation = op.as_str(),
        intent = Empty,
        attempt = Empty,
        outcome = Empty
    );
    let answered = protect_parts(&shared, inner, parts, body, op.clone(), scope)
        .instrument(span)
        .await;
    telemetry::answered(&op, answered.as_ref().ok().map(Response::status), started);
    answered
}

async fn protect_parts<S, St, B, ResBody>(
    shared: &Arc<Shared<St>>,
    mut inner: S,
    parts: request::Parts,
    body: B,
    op: Op,
    scope: Result<Option<Scope>, Panicked>,
) -> Answered<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Bufferable,
    ResBody: Keepable,
    St: Store,
{
    let settings = &shared.settings;
    let scope = match scope {
        Ok(scope) => scope,
        Err(panicked) => return Ok(refuse(&op, answer::layer_fault(panicked.what))),
    };
    let Some(scope) = scope else {
        if settings.refuse_without_scope {
            return Ok(refuse(
                &op,
                answer::missing_scope(&settings.scope.describe()),
            ));
        }
        telemetry::unprotected(&op, "missing-scope");
        let response = inner.call(Request::from_parts(parts, body)).await?;
        return Ok(response.map(ResponseBody::inner));
    };
    let bytes = match read_body(body, &parts.headers, settings.body_limit).await {
        Ok(bytes) => bytes,
        Err(refusal) => return Ok(refuse(&op, refusal)),
    };
    let intent = match derive_intent(shared, &parts, &scope, &bytes, &op) {
        Ok(intent) => intent,
        Err(refusal) => return Ok(refuse(&op, refusal)),
    };
    let attempt = shared.attempts.count(&intent.op, &intent.key);
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("intent", intent.key.short());
        span.record("attempt", attempt);
    }
    // A replay this process has seen needs neither the store nor the in-flight registry.
    let cached = guarded("store", || shared.store.cached(&intent.key));
    if let Some(record) = cached.ok().flatten() {
        let response = if intent.reuses_key_for(&record.fingerprint) {
            refuse(&intent.op, answer::key_reused(&intent.key, false))
        } else {
            replayed(shared, &intent, &record)
        };
        return Ok(with_intent(response, &intent.key));
    }
    let request = Request::from_parts(parts, B::from(bytes));
    let answered = coalesce_or_execute(shared, inner, request, &intent).await;
    answered.map(|response| with_intent(response, &intent.key))
}

/// An answer that refuses the request: nothing was executed.
fn refuse<B>(op: &Op, answer: Answer) -> Response<ResponseBody<B>> {
    telemetry::not_executed(op, answer.reason());
    outcome("not_executed");
    written(answer)
}

/// Derives the intent key, from an explicit key where one is configured and sent.
fn derive_intent<St>(
    shared: &Shared<St>,
    parts: &request::Parts,
    scope: &Scope,
    body: &Bytes,
    op: &Op,
) -> Result<Intent, Answer> {
    let settings = &shared.settings;
    let header_key = match &settings.key_header {
        Some(name) => match parts.headers.get(name) {
            Some(value) => match ExplicitKey::from_bytes(value.as_bytes()) {
                Ok(key) => Some(key),
                Err(_) => return Err(answer::malformed_key(&format!("the `{name}` header"))),
            },
            None => None,
        },
        None => None,
    };
    let scope_hash = ScopeHash::of(scope);
    let content_type = parts.headers.get(header::CONTENT_TYPE);
    let printed = shared
        .recent
        .fingerprint(&scope_hash, content_type, body, || {
            settings.fingerprint.fingerprint(content_type, body)
        });
    match &printed.unkeyable {
        Some(Unkeyable::Uncanonical(why)) => return Err(answer::unkeyable(why)),
        Some(Unkeyable::Panicked(panicked)) => return Err(answer::layer_fault(panicked.what)),
        None => {}
    }
    let field_key = match (printed.key_field, &settings.fingerprint.key_field) {
        (Some(Err(_)), Some(pointer)) => {
            return Err(answer::malformed_key(&format!("the `{pointer}` field")))
        }
        (Some(Ok(key)), _) => Some(key),
        _ => None,
    };
    let source = match (&header_key, &field_key) {
        (Some(_), _) => Some(KeySource::Header),
        (None, Some(_)) => Some(KeySource::Field),
        (None, None) => None,
    };
    let explicit = header_key.or(field_key);
    let operation = Operation::new(&parts.method, &parts.uri);
    let material = match &explicit {
        Some(key) => KeyMaterial::Explicit(key),
        None => KeyMaterial::Fingerprint(&printed.fingerprint),
    };
    let path = parts.uri.path();
    let timing = parts
        .extensions
        .get::<Timing>()
        .copied()
        .unwrap_or_default();
    let deadline = timing
        .deadline
        .unwrap_or_else(|| settings.paths.deadline(path));
    let retention = timing
        .retention
        .unwrap_or_else(|| settings.paths.retention(path));
    Ok(Intent {
        key: IntentKey::derive(scope, &operation, material),
        op: op.clone(),
        scope: scope_hash,
        share: scope.share(),
        fingerprint: printed.fingerprint,
        explicit: source,
        deadline: Instant::now() + deadline,
        asynchronous: deadline.is_zero(),
        retention,
        max_execution: settings.paths.max_execution(path),
    })
}

/// What leading an intent came to.
enum Led<B, E> {
    Answered(Answered<B, E>),
    /// The store released the intent while we waited: take it from the top.
    Again,
}

async fn coalesce_or_execute<S, St, B, ResBody>(
    shared: &Arc<Shared<St>>,
    inner: S,
    request: Request<B>,
    intent: &Intent,
) -> Answered<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Send + 'static,
    ResBody: Keepable,
    St: Store,
{
    let mut work = Some((inner, request));
    loop {
        match shared
            .inflight
            .join(intent.key, intent.fingerprint, now_ms())
        {
            Role::Follower(slot) => {
                if intent.reuses_key_for(&slot.fingerprint) {
                    return Ok(refuse(&intent.op, answer::key_reused(&intent.key, true)));
                }
                telemetry::coalesced(&intent.op);
                match slot.wait_until(intent.deadline).await {
                    Some(Settled::Redo) => continue,
                    Some(settled) => return Ok(answer_settled(shared, intent, settled)),
                    None => return Ok(in_progress(shared, intent, slot.started_at_ms(), true)),
                }
            }
            Role::Leader(lead) => match lead_intent(shared, &mut work, intent, lead).await {
                Led::Answered(answered) => return answered,
                Led::Again => continue,
            },
        }
    }
}

async fn lead_intent<S, St, B, ResBody>(
    shared: &Arc<Shared<St>>,
    work: &mut Option<(S, Request<B>)>,
    intent: &Intent,
    lead: Lead,
) -> Led<ResBody, S::Error>
where
    S: Tool<B, ResBody>,
    B: Send + 'static,
    ResBody: Keepable,
    St: Store,
{
    let key = &intent.key;
    let Some(permit) = shared.detached.try_reserve() else {
        return at_capacity(shared, intent, lead).await;
    };
    let started_at_ms = now_ms();
    // The layer mints the owner token, so that a claim whose answer is lost can be given
    // back: no lease lingers that nobody owns.
    let token = OwnerToken::generate();
    let claim = ClaimRequest {
        token,
        lease: shared.settings.lease,
        scope: intent.scope,
        share: intent.share,
        fingerprint: intent.fingerprint,
        started_at_ms,
    };
    let claimed = match shared.store.claim(key, &claim).await {
        Ok(claimed) => claimed,
        Err(error) => {
            drop(lead);
            tracing::warn!(%error, "the store could not answer a claim");
            give_back(shared, key, token);
            if shared.settings.fail_open {
                if let Some((mut inner, request)) = work.take() {
                    tracing::warn!("fail-open: running without protection");
                    telemetry::unprotected(&intent.op, "store-unavailable");
                    let answered = inner.call(request).await;
                    return Led::Answered(answered.map(|r| r.map(ResponseBody::inner)));
                }
            }
            return Led::Answered(Ok(refuse(&intent.op, answer::store_unavailable(key))));
        }
    };
    match claimed {
        Claim::Completed(record) => {
            if intent.reuses_key_for(&record.fingerprint) {
                return Led::Answered(Ok(refuse(&intent.op, answer::key_reused(key, false))));
            }
            let response = replayed(shared, intent, &record);
            lead.settle(Settled::Replay(record));
            Led::Answered(Ok(response))
        }
        Claim::Running(info) => {
            if intent.reuses_key_for(&info.fingerprint) {
                return Led::Answered(Ok(refuse(&intent.op, answer::key_reused(key, true))));
            }
            // Waiting on an execution elsewhere runs nothing here: it holds no slot.
            drop(permit);
            telemetry::coalesced(&intent.op);
            lead.set_started_at_ms(info.started_at_ms);
            wait_elsewhere(shared, intent, lead, info.started_at_ms).await
        }
        Claim::Acquired(token) => {
            let Some((inner, request)) = work.take() else {
                // A request is executed at most once; a second acquisition cannot reach here.
                return Led::Answered(Ok(refuse(&intent.op, answer::store_unavailable(key))));
            };
            telemetry::executed(&intent.op);
            let (first, answer) = oneshot::channel();
            let claimed = Claimed {
                token,
                lead,
                permit,
                started_at_ms,
            };
            execute::start(
                Arc::clone(shared),
                inner,
                request,
                intent.clone(),
                claimed,
                first,
            );
            if intent.asynchronous {
                return Led::Answered(Ok(in_progress(shared, intent, started_at_ms, false)));
            }
            match tokio::time::timeout_at(intent.deadline, answer).await {
                Ok(Ok(answered)) => {
                    outcome(if answered.is_ok() {
                        "executed"
                    } else {
                        "error"
                    });
                    Led::Answered(answered)
                }
                Ok(Err(_)) => {
                    outcome("failed");
                    let failure = answer::Failure::Panic;
                    Led::Answered(Ok(written(answer::attempt_failed(key, failure))))
                }
                Err(_) => Led::Answered(Ok(in_progress(shared, intent, started_at_ms, false))),
            }
        }
    }
}

/// Gives back, in the background, a lease that a failed claim may have taken under `token`.
/// Nothing ran under it; if the store stays down, the lease lapses by itself.
fn give_back<St: Store>(shared: &Arc<Shared<St>>, key: &IntentKey, token: OwnerToken) {
    let tracker = shared.detached.tracker().clone();
    let store = Arc::clone(&shared.store);
    let key = *key;
    tracker.spawn(async move {
        if let Err(error) = store.abandon(&key, &token).await {
            tracing::debug!(%error, "giving back a failed claim's lease failed; it will lapse");
        }
    });
}

/// No room for another execution: a completed or running intent is still answered, since
/// that needs none; anything else is refused with nothing executed.
async fn at_capacity<St: Store, B, E>(
    shared: &Arc<Shared<St>>,
    intent: &Intent,
    lead: Lead,
) -> Led<B, E> {
    let key = &intent.key;
    match shared.store.get(key).await {
        Ok(Some(Entry::Completed(record))) if intent.reuses_key_for(&record.fingerprint) => {
            Led::Answered(Ok(refuse(&intent.op, answer::key_reused(key, false))))
        }
        Ok(Some(Entry::Running(info))) if intent.reuses_key_for(&info.fingerprint) => {
            Led::Answered(Ok(refuse(&intent.op, answer::key_reused(key, true))))
        }
        Ok(Some(Entry::Completed(record))) => {
            let response = replayed(shared, intent, &record);
            lead.settle(Settled::Replay(record));
            Led::Answered(Ok(response))
        }
        Ok(Some(Entry::Running(info))) => {
            telemetry::coalesced(&intent.op);
            lead.set_started_at_ms(info.started_at_ms);
            wait_elsewhere(shared, intent, lead, info.started_at_ms).await
        }
        _ => {
            tracing::warn!("too many detached executions; refusing");
            Led::Answered(Ok(refuse(&intent.op, answer::too_busy(key))))
        }
    }
}

/// Waits for an execution that runs elsewhere (another process, or another layer sharing
/// the store), polling the store until it settles or this caller's deadline.
async fn wait_elsewhere<St: Store, B, E>(
    shared: &Arc<Shared<St>>,
    intent: &Intent,
    lead: Lead,
    started_at_ms: u64,
) -> Led<B, E> {
    let key = &intent.key;
    let mut pause = Duration::from_millis(10);
    loop {
        let now = Instant::now();
        if now >= intent.deadline {
            drop(lead);
            return Led::Answered(Ok(in_progress(shared, intent, started_at_ms, true)));
        }
        tokio::time::sleep_until((now + pause).min(intent.deadline)).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(100));
        match shared.store.get(key).await {
            Ok(Some(Entry::Running(_))) | Err(_) => {}
            Ok(Some(Entry::Completed(record))) => {
                // The record may be another payload's under the same explicit key.
                if intent.reuses_key_for(&record.fingerprint) {
                    drop(lead);
                    return Led::Answered(Ok(refuse(&intent.op, answer::key_reused(key, false))));
                }
                let response = replayed(shared, intent, &record);
                lead.settle(Settled::Replay(record));
                return Led::Answered(Ok(response));
            }
            Ok(Some(Entry::Failed(tombstone))) if tombstone.failed_at_ms >= started_at_ms => {
                drop(lead);
                outcome("failed");
                let failure = answer::Failure::of(&tombstone);
                return Led::Answered(Ok(written(answer::attempt_failed(key, failure))));
            }
            Ok(_) => {
                drop(lead);
                return Led::Again;
            }
        }
    }
}

/// The answer to a duplicate, from how the execution it waited on ended.
fn answer_settled<St, B>(
    shared: &Shared<St>,
    intent: &Intent,
    settled: Settled,
) -> Response<ResponseBody<B>> {
    match settled {
        Settled::Replay(record) => replayed(shared, intent, &record),
        Settled::Failed {
            response: Some(stored),
            ..
        } => {
            outcome("failed");
            replay_stored(&shared.settings, &intent.key, &stored)
        }
        Settled::Failed { failure, .. } => {
            outcome("failed");
            written(answer::attempt_failed(&intent.key, failure))
        }
        // Redo is handled by the caller's loop; answering it would be a bug, so be safe.
        Settled::Redo => written(answer::store_unavailable(&intent.key)),
    }
}

/// A kept outcome, replayed to a duplicate.
fn replayed<St, B>(
    shared: &Shared<St>,
    intent: &Intent,
    record: &Record,
) -> Response<ResponseBody<B>> {
    telemetry::replayed(&intent.op);
    outcome("replayed");
    replay(&shared.settings, &intent.key, record)
}

/// 202 "in progress" (409 for duplicates in strict IETF mode).
pub(crate) fn in_progress<St, B>(
    shared: &Shared<St>,
    intent: &Intent,
    started_at_ms: u64,
    duplicate: bool,
) -> Response<ResponseBody<B>> {
    telemetry::in_progress(&intent.op);
    outcome("in_progress");
    let settings = &shared.settings;
    written(answer::in_progress(
        &intent.key,
        &settings.status_url(&intent.key),
        seconds_since(started_at_ms),
        duplicate && settings.strict_ietf,
        &settings.repeat_keeps(intent.explicit),
    ))
}
