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
use std::time::Duration;

use smallvec::SmallVec;
use tokio::time::Instant;

use self::index::Index;
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

/// One kept value and its places in the three orders, in two cache lines: the first holds
/// what an insert and an eviction touch on a value's neighbours (the key, the links, the
/// accounts), the second what they touch on the value itself. Under a flood at the budget
/// every insert evicts the oldest value and relinks the next oldest, all of it memory the
/// cache has let go: the fewer lines they span, the fewer misses a first execution waits on.
#[repr(C, align(64))]
struct Node {
    key: IntentKey,
    /// Towards the more recently used, and the less.
    newer: u32,
    older: u32,
    /// The same within the share, by when the value was kept.
    share_newer: u32,
    share_older: u32,
    /// The same among the values kept as long, which expire in that order.
    ttl_newer: u32,
    ttl_older: u32,
    weight: u32,
    /// Its share's place in `Table::shares`.
    share: u32,
    expires: Instant,
    /// How long it is kept, in nanoseconds: the lifetime it is listed in.
    ttl: u64,
    /// `None` once the node is free.
    value: Option<Settled>,
}

/// One share's values, newest and oldest, and what they weigh.
struct Share {
    scope: ScopeHash,
    newest: u32,
    oldest: u32,
    bytes: u64,
    live: usize,
}

/// The values kept for one length of time, newest and oldest: they expire oldest first.
#[derive(Clone, Copy)]
struct Lifetime {
    ttl: u64,
    newest: u32,
    oldest: u32,
}

/// The table; the store holds it under a lock.
pub(super) struct Table {
    max_bytes: u64,
    per_share: u64,
    /// Each value's node, found by its key's hash: eight bytes a value, where a map of keys
    /// held 36; the key is read from the node.
    index: Index,
    nodes: Vec<Node>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
    /// Each share's place in `shares`, found once per insert; a node names its share by that
    /// place, so that unlinking one hashes nothing.
    share_places: HashMap<ScopeHash, u32, KeyHasher>,
    shares: Vec<Share>,
    free_shares: Vec<u32>,
    /// One per length of time values are kept for: under a layer, as many as its settings
    /// name (retentions and the failure time), a handful. Every insert visits each of them for
    /// what has expired anyway, so a vector searched in order costs no more than that, and
    /// less than hashing a duration on every insert and removal.
    lifetimes: Vec<Lifetime>,
    bytes: u64,
}

impl Table {
    pub(super) fn new(max_bytes: u64, per_share: u64) -> Self {
        Self::with_index(max_bytes, per_share, Index::new())
    }

    fn with_index(max_bytes: u64, per_share: u64, index: Index) -> Self {
        Self {
            max_bytes,
            per_share,
            index,
            nodes: Vec::new(),
            free: Vec::new(),
            newest: NIL,
            oldest: NIL,
            share_places: HashMap::with_hasher(KeyHasher::new()),
            shares: Vec::new(),
            free_shares: Vec::new(),
            lifetimes: Vec::new(),
            bytes: 0,
        }
    }

    /// Drops every value, keeping the budget and the share's part.
    pub(super) fn clear(&mut self) {
        *self = Self::with_index(self.max_bytes, self.per_share, Index::new());
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
    /// (never the value just kept), then the least recently used while the whole is full (the
    /// value just kept too, last, if it alone weighs more than the whole budget).
    pub(super) fn insert(
        &mut self,
        key: IntentKey,
        value: Settled,
        weight: u32,
        share: ScopeHash,
        ttl: Duration,
        now: Instant,
    ) -> Evictions {
        self.drop_expired(now);
        // Hashed once: to find what the key held, then to place it.
        let hash = self.index.hash(&key);
        if let Some(at) = self.find_hashed(hash, &key) {
            self.unlink(at);
        }
        let ttl_ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        let place = self.share_place(share);
        let node = Node {
            key,
            newer: NIL,
            older: NIL,
            share_newer: NIL,
            share_older: NIL,
            ttl_newer: NIL,
            ttl_older: NIL,
            weight,
            share: place,
            expires: crate::clock::later(now, ttl),
            ttl: ttl_ns,
            value: Some(value),
        };
        let at = place_in(&mut self.nodes, &mut self.free, node);
        self.index.insert(hash, at);
        self.attach_newest(at);
        let lifetime = match self.lifetimes.iter().position(|l| l.ttl == ttl_ns) {
            Some(found) => &mut self.lifetimes[found],
            None => {
                self.lifetimes.push(Lifetime {
                    ttl: ttl_ns,
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
        let held = &mut self.shares[place as usize];
        let previous = held.newest;
        held.newest = at;
        if previous == NIL {
            held.oldest = at;
        }
        held.bytes += u64::from(weight);
        held.live += 1;
        if previous != NIL {
            self.nodes[previous as usize].share_newer = at;
            self.nodes[at as usize].share_older = previous;
        }
        self.bytes += u64::from(weight);
        let mut evicted = Evictions::new();
        loop {
            let held = &self.shares[place as usize];
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

    /// Drops what `key` holds: whether it held anything.
    pub(super) fn remove(&mut self, key: &IntentKey) -> bool {
        let found = self.find(key);
        if let Some(at) = found {
            self.unlink(at);
        }
        found.is_some()
    }

    /// Up to `count` unexpired values from the node at `from` on, in the table's own order,
    /// and where the next page starts (`None`: nothing after). For an operator's listing: it
    /// changes no order.
    pub(super) fn page(
        &self,
        from: usize,
        count: usize,
        now: Instant,
    ) -> (Vec<(IntentKey, &Settled)>, Option<usize>) {
        let mut found = Vec::new();
        for (at, node) in self.nodes.iter().enumerate().skip(from) {
            if found.len() == count {
                return (found, Some(at));
            }
            if let Some(value) = node.value.as_ref().filter(|_| node.expires > now) {
                found.push((node.key, value));
            }
        }
        (found, None)
    }

    /// The place of `scope`'s share, made if it holds nothing yet.
    fn share_place(&mut self, scope: ScopeHash) -> u32 {
        if let Some(&place) = self.share_places.get(&scope) {
            return place;
        }
        let share = Share {
            scope,
            newest: NIL,
            oldest: NIL,
            bytes: 0,
            live: 0,
        };
        let place = place_in(&mut self.shares, &mut self.free_shares, share);
        self.share_places.insert(scope, place);
        place
    }

    /// The node holding `key`, if any.
    fn find(&self, key: &IntentKey) -> Option<u32> {
        self.find_hashed(self.index.hash(key), key)
    }

    /// The node holding `key`, whose hash is `hash`, if any.
    fn find_hashed(&self, hash: u32, key: &IntentKey) -> Option<u32> {
        let nodes = &self.nodes;
        self.index.find(hash, |at| nodes[at as usize].key == *key)
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
        let (key, place, weight) = (node.key, node.share, u64::from(node.weight));
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
        let held = &mut self.shares[place as usize];
        if held.newest == at {
            held.newest = share_older;
        }
        if held.oldest == at {
            held.oldest = share_newer;
        }
        held.bytes -= weight;
        held.live -= 1;
        if held.live == 0 {
            self.share_places.remove(&held.scope);
            self.free_shares.push(place);
        }
        self.bytes -= weight;
        // Found by its hash and its node: the entry is compared, not the node's key.
        let hash = self.index.hash(&key);
        self.index.remove(hash, at);
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

/// Puts `item` in a place of `items` that `free` lists, or at the end; returns its place.
///
/// A free list by hand rather than the `slab` crate, whose places are `usize` where the links
/// between nodes are `u32`, and whose entries wrap each node in an enum of their own around
/// the two cache lines it is laid out in.
fn place_in<T>(items: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(place) => {
            items[place as usize] = item;
            place
        }
        None => {
            items.push(item);
            (items.len() - 1) as u32
        }
    }
}

mod index;
#[cfg(test)]
mod tests;
