//! What may be dropped for room, in which order, and when nothing may.
//!
//! A kept record tells a repeat of its call that the action ran. Dropped for room, the repeat
//! runs the action again; so a record younger than `min_retention` (the window in which
//! agents retry) is dropped only for its own share, and a store with nothing else to drop
//! refuses new intents instead (fail closed, as Redis with `noeviction` does). Failure records
//! only tell the status path how an attempt ended: a repeat runs again whether they are kept
//! or not, so they go first.

use tokio::time::Instant;

use super::{Cause, Evictions, Table, NIL};
use crate::key::ScopeHash;

impl Table {
    /// Whether a new intent of `share` would find room for its record: the budget is not full,
    /// or something may be dropped for it (a failure record, a kept record past
    /// `min_retention`, or the share's own). Expired values are dropped first.
    pub(in crate::store::memory) fn has_room(&mut self, share: ScopeHash, now: Instant) -> bool {
        if self.bytes < self.max_bytes {
            return true;
        }
        self.drop_expired(now);
        self.bytes < self.max_bytes
            || self.oldest != NIL
            || self.share_places.contains_key(&share)
            || self.oldest_past_min_retention(NIL, now).is_some()
    }

    /// Brings the whole back within the budget after the value at `at` was kept for the share
    /// at `place`: failure records first, least recently used first (the one just kept among
    /// them, last); then, for a kept record, the largest share's oldest record where it may go,
    /// else the oldest record past `min_retention`, else the share's own oldest. What may not
    /// go stays, over the budget.
    pub(super) fn make_room(&mut self, at: u32, place: u32, now: Instant, gone: &mut Evictions) {
        if self.bytes <= self.max_bytes {
            return;
        }
        // No room could ever hold it: nothing else goes for it.
        if u64::from(self.nodes[at as usize].weight) > self.max_bytes {
            self.evict(at, Cause::Budget, now, gone);
            return;
        }
        let failure = self.is_failure(at);
        while self.bytes > self.max_bytes && self.oldest != NIL {
            self.evict(self.oldest, Cause::Budget, now, gone);
        }
        if failure {
            return;
        }
        while self.bytes > self.max_bytes {
            let Some(next) = self.next_kept(at, place, now) else {
                break;
            };
            self.evict(next, Cause::Budget, now, gone);
        }
    }

    /// The kept record to drop next for the share at `place`, never the one just kept at `at`.
    fn next_kept(&self, at: u32, place: u32, now: Instant) -> Option<u32> {
        if let Some(largest) = self.largest.top() {
            let oldest = self.shares[largest as usize].oldest;
            let may_go = largest == place || self.past_min_retention(oldest, now);
            if oldest != at && may_go {
                return Some(oldest);
            }
        }
        if let Some(oldest) = self.oldest_past_min_retention(at, now) {
            return Some(oldest);
        }
        let own = self.shares[place as usize].oldest;
        (own != at).then_some(own)
    }

    /// The value kept longest ago but the one at `but`, if that was `min_retention` ago or
    /// more: each lifetime lists its values in the order they were kept (the one just kept is
    /// the newest of its own, so no other is passed over with it).
    fn oldest_past_min_retention(&self, but: u32, now: Instant) -> Option<u32> {
        self.lifetimes
            .iter()
            .map(|lifetime| lifetime.oldest)
            .filter(|&oldest| oldest != but && self.past_min_retention(oldest, now))
            .min_by_key(|&oldest| self.kept_at(oldest))
    }

    /// Whether the value at `at` was kept `min_retention` ago or more.
    fn past_min_retention(&self, at: u32, now: Instant) -> bool {
        let kept_at = self.kept_at(at);
        (kept_at.checked_add(self.min_retention)).is_some_and(|until| until <= now)
    }

    /// When the value at `at` was kept.
    fn kept_at(&self, at: u32) -> Instant {
        let node = &self.nodes[at as usize];
        node.expires - std::time::Duration::from_nanos(node.ttl)
    }
}
