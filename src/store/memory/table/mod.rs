//! The memory store's kept records and tombstones: one map, and for each share the order its
//! values were kept in, under one lock.
//!
//! Written by hand rather than with a cache crate: a value counts against its share of the
//! budget as well as against the whole, and what may be dropped for room depends on whose it
//! is and how old (a cache crate evicts by its own order alone). Kept in a concurrent cache
//! with a per-share index beside it, every insert of a flood did its work twice (two tables,
//! and an eviction through the second), the largest part of a first execution's cost. Here an
//! insert updates one map, a few linked lists and the shares' heap.
//!
//! Room is made in this order ([`room`]): a share past its part gives up its own oldest values;
//! then, while the whole is over the budget, failure records (tombstones) go, least recently
//! used first, then the largest share's oldest kept record. A kept record younger than
//! `min_retention` is never dropped for another share: when nothing may go, the store refuses
//! new intents ([`Table::has_room`]) rather than let a repeat of a kept call run again.
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
use self::largest::Largest;
use super::Closing;
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
pub(super) type Evictions = SmallVec<[Eviction; 2]>;

/// A value evicted for room before it expired.
pub(super) struct Eviction {
    pub(super) key: IntentKey,
    pub(super) value: Closing,
    pub(super) cause: Cause,
}

/// One kept value and its places in its orders, in two cache lines: the first holds what an
/// insert and an eviction touch on a value's neighbours (the key, the links, the accounts),
/// the second what they touch on the value itself. Under a flood at the budget every insert
/// evicts an old value and relinks the next oldest, all of it memory the cache has let go:
/// the fewer lines they span, the fewer misses a first execution waits on.
#[repr(C, align(64))]
struct TableNode {
    key: IntentKey,
    /// Towards the more recently used failure record, and the less; a kept record is in no
    /// such order.
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
    /// How long it is kept, in nanoseconds (at most [`crate::clock::FARTHEST`]): the lifetime
    /// it is listed in, and, from `expires`, when it was kept.
    ttl: u64,
    /// `None` once the node is free.
    value: Option<Closing>,
}

/// One share's values, newest and oldest, and what they weigh.
struct Share {
    scope: ScopeHash,
    newest: u32,
    oldest: u32,
    bytes: u64,
    live: usize,
    /// Its place in `Table::largest`.
    heap_at: u32,
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
    /// How long a kept record is never dropped for another share.
    min_retention: Duration,
    /// Each value's node, found by its key's hash: eight bytes a value, where a map of keys
    /// held 36; the key is read from the node.
    index: Index,
    nodes: Vec<TableNode>,
    free: Vec<u32>,
    /// The failure records, most and least recently used: the first to go for room.
    newest: u32,
    oldest: u32,
    /// Each share's place in `shares`, found once per insert; a node names its share by that
    /// place, so that unlinking one hashes nothing.
    share_places: HashMap<ScopeHash, u32, KeyHasher>,
    shares: Vec<Share>,
    free_shares: Vec<u32>,
    /// The shares by what they hold, largest first.
    largest: Largest,
    /// One per length of time values are kept for: under a layer, as many as its settings
    /// name (retentions and the failure time), a handful. Every insert visits each of them for
    /// what has expired anyway, so a vector searched in order costs no more than that, and
    /// less than hashing a duration on every insert and removal.
    lifetimes: Vec<Lifetime>,
    bytes: u64,
}

impl Table {
    pub(super) fn new(max_bytes: u64, per_share: u64, min_retention: Duration) -> Self {
        Self {
            max_bytes,
            per_share,
            min_retention,
            index: Index::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            newest: NIL,
            oldest: NIL,
            share_places: HashMap::with_hasher(KeyHasher::new()),
            shares: Vec::new(),
            free_shares: Vec::new(),
            largest: Largest::default(),
            lifetimes: Vec::new(),
            bytes: 0,
        }
    }

    /// Drops every value, keeping the budget, the share's part and the retention it promises.
    pub(super) fn clear(&mut self) {
        *self = Self::new(self.max_bytes, self.per_share, self.min_retention);
    }

    /// Bytes charged to the values held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The value of `key` if it has not expired (a failure record marked as just used); an
    /// expired one is dropped. Lent in place, so that a reader may keep what it made of it
    /// there.
    pub(super) fn get(
        &mut self,
        key: &IntentKey,
        now: impl FnOnce() -> Instant,
    ) -> Option<&mut Closing> {
        let at = self.find(key)?;
        // The clock is read only for a key the table holds: most lookups are of new intents.
        if self.nodes[at as usize].expires <= now() {
            self.unlink(at);
            return None;
        }
        if self.is_failure(at) {
            self.detach(at);
            self.attach_newest(at);
        }
        self.nodes[at as usize].value.as_mut()
    }

    /// Keeps `value` for `ttl`, counted against `share`, replacing what `key` held. Returns
    /// the values evicted for room: the share's own oldest first while it is past its part
    /// (never the value just kept), then, while the whole is full, what [`room`] lets go. A
    /// kept record is kept even where nothing may go for it (its action ran: a repeat must
    /// find it), over the budget, unless it alone weighs more than the whole.
    pub(super) fn insert(
        &mut self,
        key: IntentKey,
        value: Closing,
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
        let ttl = ttl.min(crate::clock::FARTHEST);
        let ttl_ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
        let failure = matches!(value, Closing::Failed(_));
        let place = self.share_place(share);
        let node = TableNode {
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
        if failure {
            self.attach_newest(at);
        }
        self.list_in_lifetime(at, ttl_ns);
        let held = &mut self.shares[place as usize];
        let previous = held.newest;
        held.newest = at;
        if previous == NIL {
            held.oldest = at;
        }
        held.bytes += u64::from(weight);
        held.live += 1;
        self.largest.raised(&mut self.shares, place);
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
        self.make_room(at, place, now, &mut evicted);
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
    ) -> (Vec<(IntentKey, &Closing)>, Option<usize>) {
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
            heap_at: 0,
        };
        let place = place_in(&mut self.shares, &mut self.free_shares, share);
        self.share_places.insert(scope, place);
        self.largest.push(&mut self.shares, place);
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

    /// Whether the node at `at` holds a failure record.
    fn is_failure(&self, at: u32) -> bool {
        matches!(self.nodes[at as usize].value, Some(Closing::Failed(_)))
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
mod largest;
mod links;
mod room;
#[cfg(test)]
mod tests;
