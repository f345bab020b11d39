//! Observe mode's count: each call of an intent counted in the store, so that repeats are
//! known across every instance that shares it, without the call waiting on the store.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Waker};

use bytes::Bytes;
use http::request::Parts;

use super::intent::{self, Call};
use super::Engine;
use crate::scope::Scope;
use crate::store::Store;
use crate::telemetry::{self, Finding, Op};

impl<St: Store> Engine<St> {
    /// Counts one call of a protected route in observe mode: its intent derived exactly as
    /// when enforcing, then counted in the store, in a task of its own if the store does not
    /// answer at once, so that the call goes on to the service without waiting and a slow or
    /// failing store changes nothing but the count.
    /// A call without a scope or a whole body, or whose intent cannot be derived, is counted
    /// as not keyable.
    pub(crate) fn observe(
        self: &Arc<Self>,
        parts: &Parts,
        scope: Option<&Scope>,
        body: Option<&Bytes>,
        op: &Op,
        call: Call,
    ) {
        let unkeyable = || {
            telemetry::checked(op, Finding::NotKeyable);
            self.runtime
                .duplicates
                .add(op.as_str(), None, Finding::NotKeyable);
        };
        let (Some(scope), Some(body)) = (scope, body) else {
            return unkeyable();
        };
        let recent = &self.runtime.recent;
        let Ok(intent) = intent::derive(&self.settings, recent, parts, scope, body, op, call)
        else {
            return unkeyable();
        };
        let engine = Arc::clone(self);
        let mut counting = Box::pin(async move {
            let counted = engine.store.count_call(&intent.key, intent.retention).await;
            let checked = match counted {
                Ok(count) => Finding::from_count(count),
                Err(error) => {
                    tracing::debug!(%error, "observe mode could not count a call");
                    Finding::Uncounted
                }
            };
            telemetry::checked(&intent.op, checked);
            let duplicates = &engine.runtime.duplicates;
            duplicates.add(intent.op.as_str(), Some(intent.scope), checked);
        });
        // A store that answers at once (the memory store) is counted here, with no task; one
        // that waits is left to a task, so that the call does not wait on it.
        let mut cx = Context::from_waker(Waker::noop());
        if counting.as_mut().poll(&mut cx).is_pending() {
            tokio::spawn(counting);
        }
    }
}
