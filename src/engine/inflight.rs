//! In-process coalescing: duplicates of a running intent wait on it without a store call.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::outcome::{Failure, Outcome};
use super::relay::{self, Hold, Relay};
use crate::key::{Fingerprint, IntentKey, KeyHasher};
use crate::store::{Record, StoredResponse};

/// How an intent's execution ended, as its local waiters learn it.
#[derive(Debug, Clone)]
pub(crate) enum Settlement {
    /// It completed and its record is kept.
    Replay(Arc<Record>),
    /// It failed and released the key; the failed response, if there was one.
    Failed {
        response: Option<Arc<StoredResponse>>,
        failure: Failure,
        /// Where the store refused the release: the seconds at most until the key is free.
        freed_in_s: Option<u64>,
    },
}

impl<A> From<Settlement> for Outcome<A> {
    /// The outcome for a duplicate, from how the execution it waited on ended.
    fn from(settled: Settlement) -> Self {
        match settled {
            Settlement::Replay(record) => Outcome::Replayed(record),
            Settlement::Failed {
                response,
                failure,
                freed_in_s,
            } => Outcome::Failed {
                failure,
                answer: response,
                freed_in_s,
            },
        }
    }
}

/// Where a slot stands, as its watchers see it.
#[derive(Debug, Clone)]
enum SlotState {
    Running,
    Settled(Settlement),
    /// The leader stopped before an outcome: start over.
    Redo,
}

/// What waiting on a slot came to.
#[derive(Debug)]
pub(crate) enum WaitEnd {
    Settled(Settlement),
    /// The leader stopped before an outcome: start over.
    Redo,
    /// The caller's deadline came first.
    Deadline,
}

/// The intents this process is working on.
#[derive(Default)]
pub(crate) struct Inflight {
    slots: Mutex<HashMap<IntentKey, Arc<Slot>, KeyHasher>>,
}

/// One intent in flight, watched by its duplicates.
///
/// A state under a lock and one `Notify` rather than a `watch` channel: most slots are opened
/// and closed with nobody waiting, and a channel would cost each of them an allocation and a
/// wake-up round over several waiter lists.
pub(crate) struct Slot {
    key: IntentKey,
    started_at_ms: AtomicU64,
    pub(crate) fingerprint: Fingerprint,
    /// Whether a duplicate joined: set and read under the registry's lock, so that a slot
    /// nobody joined is closed without waking anyone (most are).
    joined: AtomicBool,
    state: Mutex<SlotState>,
    changed: Notify,
    /// What the execution says before its answer, for the callers that follow it live.
    pub(crate) relay: Option<Arc<Relay>>,
}

/// Who a request is, for its intent.
pub(crate) enum Role {
    /// The first: it claims the intent and settles the slot.
    Leader(Lead),
    /// A duplicate: it waits on the leader's slot.
    Follower(Arc<Slot>),
}

/// The right and duty to settle a slot. Dropping it unsettled settles it with `Redo`, so a
/// leader that panics or is cancelled never strands its followers.
pub(crate) struct Lead {
    inflight: Arc<Inflight>,
    slot: Arc<Slot>,
    settled: bool,
}

impl Inflight {
    /// Joins the intent's slot, or opens it and leads, with `relay` for its execution.
    pub(crate) fn join(
        self: &Arc<Self>,
        key: IntentKey,
        fingerprint: Fingerprint,
        now_ms: u64,
        relay: Option<&Arc<Relay>>,
    ) -> Role {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // One lookup, whichever way it goes.
        let vacant = match slots.entry(key) {
            Entry::Occupied(joined) => {
                let slot = joined.get();
                slot.joined.store(true, Ordering::Relaxed);
                return Role::Follower(Arc::clone(slot));
            }
            Entry::Vacant(vacant) => vacant,
        };
        let slot = Arc::new(Slot {
            key,
            started_at_ms: AtomicU64::new(now_ms),
            fingerprint,
            joined: AtomicBool::new(false),
            state: Mutex::new(SlotState::Running),
            changed: Notify::new(),
            relay: relay.cloned(),
        });
        vacant.insert(Arc::clone(&slot));
        Role::Leader(Lead {
            inflight: Arc::clone(self),
            slot,
            settled: false,
        })
    }

    /// Intents in flight right now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Slot {
    /// When the execution started, in milliseconds since the Unix epoch.
    pub(crate) fn started_at_ms(&self) -> u64 {
        self.started_at_ms.load(Ordering::Relaxed)
    }

    /// Waits for the outcome until `deadline`, held back while the execution waits on this
    /// caller (`hold`).
    pub(crate) async fn wait_until(&self, deadline: Instant, hold: Option<&Hold>) -> WaitEnd {
        let changed = self.changed.notified();
        tokio::pin!(changed);
        let past = relay::past(deadline, hold);
        tokio::pin!(past);
        loop {
            // Registered before the state is read, so that a change made in between still
            // wakes this waiter.
            changed.as_mut().enable();
            match &*self.state.lock().unwrap_or_else(PoisonError::into_inner) {
                SlotState::Running => {}
                SlotState::Settled(settled) => return WaitEnd::Settled(settled.clone()),
                SlotState::Redo => return WaitEnd::Redo,
            }
            tokio::select! {
                () = changed.as_mut() => {}
                () = past.as_mut() => return WaitEnd::Deadline,
            }
            changed.set(self.changed.notified());
        }
    }

    fn set(&self, state: SlotState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.changed.notify_waiters();
    }
}

impl Lead {
    /// When the slot was opened, or the execution started elsewhere.
    pub(crate) fn started_at_ms(&self) -> u64 {
        self.slot.started_at_ms()
    }

    /// Records when the execution really started (another process may have started it).
    pub(crate) fn set_started_at_ms(&self, started_at_ms: u64) {
        self.slot
            .started_at_ms
            .store(started_at_ms, Ordering::Relaxed);
    }

    /// Hands every waiter the outcome and keeps the slot open: later duplicates in this
    /// process get the outcome from it too, with no store call, until [`Lead::settle`]. For an
    /// outcome the store has not recorded yet.
    pub(crate) fn publish(&self, outcome: Settlement) {
        self.slot.set(SlotState::Settled(outcome));
    }

    /// Closes the slot and hands every waiter the outcome. Call it only after the store
    /// knows the outcome, so that a request arriving after the slot closes finds it there.
    pub(crate) fn settle(mut self, outcome: Settlement) {
        self.close(SlotState::Settled(outcome));
    }

    fn close(&mut self, state: SlotState) {
        self.settled = true;
        let joined = {
            let mut slots = self
                .inflight
                .slots
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Entry::Occupied(open) = slots.entry(self.slot.key) {
                if Arc::ptr_eq(open.get(), &self.slot) {
                    open.remove();
                }
            }
            // Out of the registry now: no duplicate can join after this reading.
            self.slot.joined.load(Ordering::Relaxed)
        };
        if joined {
            self.slot.set(state);
        }
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        if !self.settled {
            self.close(SlotState::Redo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fingerprint() -> Fingerprint {
        Fingerprint::raw(None, b"")
    }

    #[tokio::test(start_paused = true)]
    async fn followers_get_the_leaders_outcome() {
        let inflight = Arc::new(Inflight::default());
        let key = IntentKey::from_bytes([1; 32]);
        let Role::Leader(lead) = inflight.join(key, fingerprint(), 5, None) else {
            panic!("first must lead")
        };
        let Role::Follower(slot) = inflight.join(key, fingerprint(), 6, None) else {
            panic!("second must follow")
        };
        assert_eq!(slot.started_at_ms(), 5);
        let waiter = tokio::spawn(async move {
            slot.wait_until(Instant::now() + Duration::from_secs(5), None)
                .await
        });
        lead.settle(Settlement::Failed {
            response: None,
            failure: Failure::Panic,
            freed_in_s: None,
        });
        assert!(matches!(
            waiter.await.unwrap(),
            WaitEnd::Settled(Settlement::Failed { .. })
        ));
        assert_eq!(inflight.len(), 0);
    }

    #[test]
    fn a_slot_nobody_joined_is_closed_without_waking_anyone() {
        let inflight = Arc::new(Inflight::default());
        let key = IntentKey::from_bytes([4; 32]);
        let Role::Leader(lead) = inflight.join(key, fingerprint(), 0, None) else {
            panic!("first must lead")
        };
        let slot = Arc::clone(&lead.slot);
        lead.settle(Settlement::Failed {
            response: None,
            failure: Failure::Panic,
            freed_in_s: None,
        });
        assert_eq!(inflight.len(), 0);
        let state = slot.state.lock().unwrap();
        assert!(matches!(*state, SlotState::Running), "{state:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_lead_tells_followers_to_start_over() {
        let inflight = Arc::new(Inflight::default());
        let key = IntentKey::from_bytes([2; 32]);
        let lead = inflight.join(key, fingerprint(), 0, None);
        let Role::Follower(slot) = inflight.join(key, fingerprint(), 0, None) else {
            panic!("second must follow")
        };
        drop(lead);
        let outcome = slot
            .wait_until(Instant::now() + Duration::from_secs(5), None)
            .await;
        assert!(matches!(outcome, WaitEnd::Redo));
        assert!(matches!(
            inflight.join(key, fingerprint(), 0, None),
            Role::Leader(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_ends_at_the_deadline() {
        let inflight = Arc::new(Inflight::default());
        let key = IntentKey::from_bytes([3; 32]);
        let _lead = inflight.join(key, fingerprint(), 0, None);
        let Role::Follower(slot) = inflight.join(key, fingerprint(), 0, None) else {
            panic!("second must follow")
        };
        let outcome = slot
            .wait_until(Instant::now() + Duration::from_millis(20), None)
            .await;
        assert!(matches!(outcome, WaitEnd::Deadline));
    }
}
