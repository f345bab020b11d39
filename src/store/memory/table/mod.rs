//! The memory store's kept records and tombstones: one map, one least-recently-used order, and
//! for each share the order its values were kept in, under one lock.
//!
//! Written by hand rather than with a cache crate: a value counts against its share of the
//! budget as well as against the whole, and a share past its part gives up its own oldest
//! values first. Kept in a concurrent cache with a per-share index beside it, every insert of a
//! flood did its work twice (two tables, and an eviction through the second), the largest part
//! of a first execution's cost. Here an insert updates one map and three linked lists.
//!
//! Values expire eagerly: those kept for the same time (one retention, the failure time) expire
//! in the order they were kept, so each such time has a list, and every insert first drops what
//! has expired from their oldest ends. An expired value never holds budget that an unexpired
//! one is evicted for.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::Duration;

use hashbrown::HashTable;
use smallvec::SmallVec;
use tokio::time::Instant;

use super::Settled;
use crate::key::{IntentKey, KeyHasher, ScopeHash};

/// No node.
const NIL: u32 = u32::MAX;

/// Why a value left the table other than by being read after it expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// The whole budget was full.
    Budget,
    /// Its share was past its part of the budget.
    Share,
}

/// The values one insert evicted: most evict one or none, so they are kept in place.
pub(super) type Evictions = SmallVec<[Evicted; 2]>;

/// A value evicted for room before it expired.
pub(super) struct Evicted {
    pub(super) key: IntentKey,
    pub(super) value: Settled,
    pub(super) cause: Cause,
}

struct Node {
    key: IntentKey,
    /// `None` once the slot is free.
    value: Option<Settled>,
    weight: u64,
    share: ScopeHash,
    expires: Instant,
    /// Towards the more recently used, and the less.
    newer: u32,
    older: u32,
    /// The same within the share, by when the value was kept.
    share_newer: u32,
    share_older: u32,
    /// How long it is kept, and its neighbours among the values kept as long.
    ttl: Duration,
    ttl_newer: u32,
    ttl_older: u32,
}

/// One share's values, newest and oldest, and what they weigh.
#[derive(Clone, Copy)]
struct Share {
    newest: u32,
    oldest: u32,
    bytes: u64,
    live: usize,
}

/// The values kept for one length of time, newest and oldest: they expire oldest first.
#[derive(Clone, Copy)]
struct Lifetime {
    ttl: Duration,
    newest: u32,
    oldest: u32,
}

/// The table; the store holds it under a lock.
pub(super) struct Table {
    max_bytes: u64,
    per_share: u64,
    /// Each value's node, found by its key's hash: four bytes a value, so that under a flood
    /// the index of a full budget stays in a core's cache where a map of keys (36 bytes a
    /// value) was a miss on every lookup and every eviction. The key is read from the node.
    index: HashTable<u32>,
    hasher: KeyHasher,
    nodes: Vec<Node>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
    shares: HashMap<ScopeHash, Share, KeyHasher>,
    /// One per length of time values are kept for: under a layer, as many as its settings
    /// name (retentions and the failure time), a handful. Every insert visits each of them for
    /// what has expired anyway, so a vector searched in order costs no more than that, and
    /// less than hashing a duration on every insert and removal.
    lifetimes: Vec<Lifetime>,
    bytes: u64,
}

impl Table {
    pub(super) fn new(max_bytes: u64, per_share: u64) -> Self {
        Self {
            max_bytes,
            per_share,
            index: HashTable::new(),
            hasher: KeyHasher::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            newest: NIL,
            oldest: NIL,
            shares: HashMap::with_hasher(KeyHasher::new()),
            lifetimes: Vec::new(),
            bytes: 0,
        }
    }

    /// Drops every value, keeping the budget and the share's part.
    pub(super) fn clear(&mut self) {
        *self = Self::new(self.max_bytes, self.per_share);
    }

    /// Bytes charged to the values held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The value of `key` if it has not expired, marked as just used; an expired one is
    /// dropped. Lent in place, so that a reader may keep what it made of it there.
    pub(super) fn get(
        &mut self,
        key: &IntentKey,
        now: impl FnOnce() -> Instant,
    ) -> Option<&mut Settled> {
        let at = self.find(key)?;
        // The clock is read only for a key the table holds: most lookups are of new intents.
        if self.nodes[at as usize].expires <= now() {
            self.unlink(at);
            return None;
        }
        self.detach(at);
        self.attach_newest(at);
        self.nodes[at as usize].value.as_mut()
    }

    /// Keeps `value` for `ttl`, counted against `share`, replacing what `key` held. Returns
    /// the values evicted for room: the share's own oldest first while it is past its part
    /// (never the value just kept), then the least recently used while the whole is full.
    pub(super) fn insert(
        &mut self,
        key: IntentKey,
        value: Settled,
        weight: u64,
        share: ScopeHash,
        ttl: Duration,
        now: Instant,
    ) -> Evictions {
        self.drop_expired(now);
        if let Some(at) = self.find(&key) {
            self.unlink(at);
        }
        let node = Node {
            key,
            value: Some(value),
            weight,
            share,
            expires: now + ttl,
            newer: NIL,
            older: NIL,
            share_newer: NIL,
            share_older: NIL,
            ttl,
            ttl_newer: NIL,
            ttl_older: NIL,
        };
        let at = match self.free.pop() {
            Some(at) => {
                self.nodes[at as usize] = node;
                at
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        let (hasher, nodes) = (&self.hasher, &self.nodes);
        self.index.insert_unique(hasher.hash_one(key), at, |&slot| {
            hasher.hash_one(nodes[slot as usize].key)
        });
        self.attach_newest(at);
        let lifetime = match self.lifetimes.iter().position(|l| l.ttl == ttl) {
            Some(found) => &mut self.lifetimes[found],
            None => {
                self.lifetimes.push(Lifetime {
                    ttl,
                    newest: NIL,
                    oldest: NIL,
                });
                self.lifetimes.last_mut().expect("just pushed")
            }
        };
        let previous = lifetime.newest;
        lifetime.newest = at;
        if previous == NIL {
            lifetime.oldest = at;
        } else {
            self.nodes[previous as usize].ttl_newer = at;
            self.nodes[at as usize].ttl_older = previous;
        }
        let held = self.shares.entry(share).or_insert(Share {
            newest: NIL,
            oldest: NIL,
            bytes: 0,
            live: 0,
        });
        let previous = held.newest;
        held.newest = at;
        if previous == NIL {
            held.oldest = at;
        }
        held.bytes += weight;
        held.live += 1;
        if previous != NIL {
            self.nodes[previous as usize].share_newer = at;
            self.nodes[at as usize].share_older = previous;
        }
        self.bytes += weight;
        let mut evicted = Evictions::new();
        while let Some(held) = self.shares.get(&share).copied() {
            if held.bytes <= self.per_share || held.live <= 1 {
                break;
            }
            self.evict(held.oldest, Cause::Share, now, &mut evicted);
        }
        while self.bytes > self.max_bytes && self.oldest != NIL {
            self.evict(self.oldest, Cause::Budget, now, &mut evicted);
        }
        evicted
    }

    /// Drops what `key` holds.
    #[cfg(test)]
    pub(super) fn remove(&mut self, key: &IntentKey) {
        if let Some(at) = self.find(key) {
            self.unlink(at);
        }
    }

    /// The node holding `key`, if any.
    fn find(&self, key: &IntentKey) -> Option<u32> {
        let nodes = &self.nodes;
        let found = self.index.find(self.hasher.hash_one(key), |&at| {
            nodes[at as usize].key == *key
        });
        found.copied()
    }

    /// Drops every value that has expired by `now`.
    fn drop_expired(&mut self, now: Instant) {
        let mut expired = Vec::new();
        for lifetime in &self.lifetimes {
            let mut at = lifetime.oldest;
            while at != NIL && self.nodes[at as usize].expires <= now {
                expired.push(at);
                at = self.nodes[at as usize].ttl_newer;
            }
        }
        for at in expired {
            self.unlink(at);
        }
    }

    /// Drops the node at `at`, reporting it if it had not expired.
    fn evict(&mut self, at: u32, cause: Cause, now: Instant, evicted: &mut Evictions) {
        // Taken, not cloned: the record's count is then touched once, where it is let go.
        let node = &mut self.nodes[at as usize];
        let (key, live) = (node.key, node.expires > now);
        if let Some(value) = node.value.take().filter(|_| live) {
            evicted.push(Evicted { key, value, cause });
        }
        self.unlink(at);
    }

    /// Takes the node at `at` out of the index, both orders and the accounts.
    fn unlink(&mut self, at: u32) {
        self.detach(at);
        let node = &self.nodes[at as usize];
        let (key, share, weight) = (node.key, node.share, node.weight);
        let (share_newer, share_older) = (node.share_newer, node.share_older);
        let (ttl, ttl_newer, ttl_older) = (node.ttl, node.ttl_newer, node.ttl_older);
        if ttl_newer != NIL {
            self.nodes[ttl_newer as usize].ttl_older = ttl_older;
        }
        if ttl_older != NIL {
            self.nodes[ttl_older as usize].ttl_newer = ttl_newer;
        }
        if let Some(found) = self.lifetimes.iter().position(|l| l.ttl == ttl) {
            let lifetime = &mut self.lifetimes[found];
            if lifetime.newest == at {
                lifetime.newest = ttl_older;
            }
            if lifetime.oldest == at {
                lifetime.oldest = ttl_newer;
            }
            if lifetime.newest == NIL {
                self.lifetimes.swap_remove(found);
            }
        }
        if share_newer != NIL {
            self.nodes[share_newer as usize].share_older = share_older;
        }
        if share_older != NIL {
            self.nodes[share_older as usize].share_newer = share_newer;
        }
        if let Some(held) = self.shares.get_mut(&share) {
            if held.newest == at {
                held.newest = share_older;
            }
            if held.oldest == at {
                held.oldest = share_newer;
            }
            held.bytes -= weight;
            held.live -= 1;
            if held.live == 0 {
                self.shares.remove(&share);
            }
        }
        self.bytes -= weight;
        // Found by its slot, not its key: the slot's entry is compared, not its node.
        if let Ok(entry) = self
            .index
            .find_entry(self.hasher.hash_one(key), |&slot| slot == at)
        {
            entry.remove();
        }
        // The slot is reused by a later value; what it held is let go now.
        let node = &mut self.nodes[at as usize];
        node.value = None;
        node.share_newer = NIL;
        node.share_older = NIL;
        node.ttl_newer = NIL;
        node.ttl_older = NIL;
        self.free.push(at);
    }

    /// Takes the node at `at` out of the use order.
    fn detach(&mut self, at: u32) {
        let (newer, older) = {
            let node = &self.nodes[at as usize];
            (node.newer, node.older)
        };
        match newer {
            NIL => self.newest = older,
            newer => self.nodes[newer as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            older => self.nodes[older as usize].newer = newer,
        }
        let node = &mut self.nodes[at as usize];
        node.newer = NIL;
        node.older = NIL;
    }

    /// Puts the node at `at` first in the use order.
    fn attach_newest(&mut self, at: u32) {
        let previous = self.newest;
        {
            let node = &mut self.nodes[at as usize];
            node.older = previous;
            node.newer = NIL;
        }
        match previous {
            NIL => self.oldest = at,
            previous => self.nodes[previous as usize].newer = at,
        }
        self.newest = at;
    }
}

#[cfg(test)]
mod tests;
