//! The table's linked lists: how a node enters and leaves each of its orders and accounts.

use tokio::time::Instant;

use super::{Cause, Eviction, Evictions, Lifetime, Table, NIL};
use crate::store::memory::Closing;

impl Table {
    /// Lists the node at `at` as the newest of the values kept for `ttl` nanoseconds.
    pub(super) fn list_in_lifetime(&mut self, at: u32, ttl: u64) {
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
    }

    /// Drops every value that has expired by `now`.
    pub(super) fn drop_expired(&mut self, now: Instant) {
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
    pub(super) fn evict(&mut self, at: u32, cause: Cause, now: Instant, evicted: &mut Evictions) {
        let (key, live) = {
            let node = &self.nodes[at as usize];
            (node.key, node.expires > now)
        };
        // Taken, not cloned: the record's count is then touched once, where it is let go.
        if let Some(value) = self.unlink(at).filter(|_| live) {
            evicted.push(Eviction { key, value, cause });
        }
    }

    /// Takes the node at `at` out of the index, its orders and the accounts; returns what it
    /// held.
    pub(super) fn unlink(&mut self, at: u32) -> Option<Closing> {
        if self.is_failure(at) {
            self.detach(at);
        }
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
            self.largest.remove(&mut self.shares, place);
            self.free_shares.push(place);
        } else {
            self.largest.lowered(&mut self.shares, place);
        }
        self.bytes -= weight;
        // Found by its hash and its node: the entry is compared, not the node's key.
        let hash = self.index.hash(&key);
        self.index.remove(hash, at);
        // The slot is reused by a later value; what it held is handed back.
        let node = &mut self.nodes[at as usize];
        node.share_newer = NIL;
        node.share_older = NIL;
        node.ttl_newer = NIL;
        node.ttl_older = NIL;
        self.free.push(at);
        node.value.take()
    }

    /// Takes the failure record at `at` out of the use order.
    pub(super) fn detach(&mut self, at: u32) {
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

    /// Puts the failure record at `at` first in the use order.
    pub(super) fn attach_newest(&mut self, at: u32) {
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
