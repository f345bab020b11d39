//! The one path every protected request takes through the engine: its intent derived, a
//! replay this process holds answered at once (the fast path), then coalesce in process, claim
//! in the store, and replay, wait on another instance, or start the execution and wait for its
//! first answer. The steps are in the order of the diagram in [`super`]; each outcome is a
//! return.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use tokio::sync::oneshot;

use super::claim::claim_intent;
use super::claim_answer::ClaimAnswer;
use super::execute;
use super::fail_open;
use super::inflight::{Role, Slot, WaitEnd};
use super::intent::Intent;
use super::intent::{self, Call};
use super::outcome::{Outcome, Reading};
use super::recorder::Recorder;
use super::relay::{Attachment, Hold, Relay, Relaying};
use super::{Beginning, Decision, Engine, Work};
use crate::clock::{ms_at, now_ms};
use crate::key::IntentKey;
use crate::scope::Scope;
use crate::store::{Store, Transactional};
use crate::telemetry::{self, Op};
use crate::user_code::guarded;

/// The path of one request, boxed: it yields the intent and its outcome.
pub(crate) type Running<A, E> =
    Pin<Box<dyn Future<Output = Result<Decision<A>, E>> + Send + 'static>>;

impl<St: Store> Engine<St> {
    /// Protects one request whose scope is known and whose body is read: derives its intent,
    /// then replays a kept outcome, joins a running execution, or claims the intent and runs
    /// `work` (the dialect's call of the tool, given the request's parts and body) detached.
    ///
    /// Nothing here waits: a refusal or a replay this process holds is returned as it is, and
    /// everything else is the request's path ([`run`]) in one boxed future, so that a
    /// caller awaiting it carries a pointer, not the state of every step. Call it inside the
    /// request's span.
    pub(crate) fn begin<A, E, F>(
        self: &Arc<Self>,
        mut parts: Parts,
        body: Bytes,
        scope: &Scope,
        op: &Op,
        mut call: Call,
        work: impl FnOnce(Parts, Bytes) -> F,
    ) -> Beginning<A, E>
    where
        F: Future<Output = Result<Reading<A>, E>> + Send + 'static,
        A: Send + 'static,
        E: Send + 'static,
    {
        let relaying = call.relaying.take();
        let intent = match intent::derive(
            &self.settings,
            &self.runtime.recent,
            &parts,
            scope,
            &body,
            op,
            call,
        ) {
            Ok(intent) => intent,
            Err(refusal) => return Beginning::Decided(Decision::Refused(refusal)),
        };
        // The fast path: a replay this process holds needs neither the store nor the slot.
        let cached = guarded("store", || crate::store::cached(&self.store, &intent.key));
        let attempt = self.runtime.attempts.count(&intent.op, &intent.key);
        let span = tracing::Span::current();
        if !span.is_disabled() {
            span.record("intent", intent.key.short());
            span.record("attempt", attempt);
        }
        let outcome = match cached.ok().flatten() {
            Some(record) if intent.reuses_key_for(&record.fingerprint) => {
                Outcome::key_reused(false)
            }
            Some(record) => Outcome::Replayed(record),
            None => {
                // In transactional mode the tool finds its transaction in the request, begun
                // once the claim is held.
                let transaction = (self.settings.transactions.as_ref())
                    .map(|transactions| transactions.attach(&mut parts.extensions));
                // The work is boxed once, here, and the execution reuses the box.
                let work = Box::pin(work(parts, body));
                let running = run(Arc::clone(self), intent, work, transaction, relaying);
                return Beginning::Running(Box::pin(running));
            }
        };
        Beginning::Decided(Decision::Keyed { intent, outcome })
    }
}

/// Runs `work` once for `intent`, or answers this caller from the execution that does; in
/// `transaction` where the layer is transactional. With `relaying`, the caller is attached to
/// the relay of the execution it leads or joins in this process.
pub(crate) async fn run<St, A, E, F>(
    engine: Arc<Engine<St>>,
    intent: Intent,
    work: F,
    transaction: Option<Arc<dyn Transactional>>,
    mut relaying: Option<Relaying>,
) -> Result<Decision<A>, E>
where
    St: Store,
    F: Work<A, E>,
    A: Send + 'static,
    E: Send + 'static,
{
    // The intent was derived a moment ago: its time is the execution's start if it leads now.
    let mut now = ms_at(intent.arrived);
    // The relay the work writes to, should this caller lead.
    let own = relaying
        .as_ref()
        .map(|relaying| Arc::clone(&relaying.relay));
    // Where the caller is attached, once it is: the first time round (it stays there).
    let mut hold = None;
    let outcome = loop {
        // 1. Coalesce in process: the first request of an intent leads, the others wait on it.
        let role = engine
            .runtime
            .inflight
            .join(intent.key, intent.fingerprint, now, own.as_ref());
        let relay = match &role {
            Role::Leader(_) => own.clone(),
            Role::Follower(slot) => slot.relay.clone(),
        };
        let listener = relaying.take().and_then(|relaying| relaying.attachment);
        if let (Some(relay), Some(listener)) = (relay, listener) {
            hold = attach(&relay, intent.key, listener);
        }
        let lead = match role {
            Role::Leader(lead) => lead,
            Role::Follower(slot) => match follow(&intent, &slot, hold.as_ref()).await {
                Some(outcome) => break Ok(outcome),
                // The leader stopped before an outcome: from the top.
                None => {
                    now = now_ms();
                    continue;
                }
            },
        };
        // 2. to 4. A place to run in, the claim, and what the store holds.
        let claimed = claim_intent(&engine, &intent, lead, transaction.as_ref());
        match claimed.await {
            ClaimAnswer::Done(outcome) => break Ok(outcome),
            // Released while this caller waited on another instance: from the top.
            ClaimAnswer::Again => now = now_ms(),
            // 5. Run, detached from this caller, who waits for the first answer until its
            // deadline.
            ClaimAnswer::Execute(ticket) => {
                telemetry::executed(&intent.op);
                let started_at_ms = ticket.started_at_ms;
                let launch = execute::start(&engine, work, &intent, ticket);
                let answer = execute::first_answer(launch, &intent, started_at_ms, hold);
                break answer.await;
            }
            ClaimAnswer::RunUnprotected(ticket) => {
                let recorder = Recorder {
                    engine: &engine,
                    intent: &intent,
                    token: ticket.token,
                    started_at_ms: ticket.started_at_ms,
                    failures_before: 0,
                    history: &[],
                };
                let running = Box::pin(fail_open::run_unprotected(recorder, work, ticket.lead));
                break running.await;
            }
        }
    };
    outcome.map(|outcome| Decision::Keyed { intent, outcome })
}

/// Attaches the caller to `relay`, the execution of `key`'s, and hands it its attachment;
/// where it is, for its deadline.
fn attach(
    relay: &Arc<Relay>,
    key: IntentKey,
    listener: oneshot::Sender<Attachment>,
) -> Option<Hold> {
    let mut attachment = relay.attach();
    attachment.intent = Some(key);
    let hold = attachment.hold();
    // A caller that has gone has no use for it.
    listener.send(attachment).ok()?;
    Some(hold)
}

/// A duplicate in this process: the leader's outcome, "in progress" at this caller's
/// deadline (held back while the execution waits on it), or `None` if the leader stopped
/// before an outcome.
async fn follow<A>(intent: &Intent, slot: &Slot, hold: Option<&Hold>) -> Option<Outcome<A>> {
    if intent.reuses_key_for(&slot.fingerprint) {
        return Some(Outcome::key_reused(true));
    }
    telemetry::coalesced(&intent.op);
    match slot.wait_until(intent.deadline, hold).await {
        WaitEnd::Redo => None,
        WaitEnd::Settled(settled) => Some(settled.into()),
        WaitEnd::Deadline => Some(Outcome::InProgress {
            started_at_ms: slot.started_at_ms(),
            duplicate: true,
        }),
    }
}
