//! The shares by the bytes they hold, largest first: a binary heap in which each share knows
//! its own place, so that a share whose bytes change moves up or down in log time.
//!
//! Written by hand: `std`'s `BinaryHeap` cannot find an entry to move it when its key changes,
//! and every insert and removal changes one share's bytes.

use super::Share;

#[derive(Default)]
pub(super) struct Largest {
    /// Share places; each share's `heap_at` is its index here.
    heap: Vec<u32>,
}

impl Largest {
    /// The place of the share that holds the most.
    pub(super) fn top(&self) -> Option<u32> {
        self.heap.first().copied()
    }

    /// Lists the share at `place`.
    pub(super) fn push(&mut self, shares: &mut [Share], place: u32) {
        self.heap.push(place);
        self.sift_up(shares, self.heap.len() - 1);
    }

    /// Takes the share at `place` out.
    pub(super) fn remove(&mut self, shares: &mut [Share], place: u32) {
        let at = shares[place as usize].heap_at as usize;
        let last = self.heap.pop().expect("a listed share");
        if at < self.heap.len() {
            self.heap[at] = last;
            shares[last as usize].heap_at = at as u32;
            self.sift_down(shares, at);
            let moved = shares[last as usize].heap_at as usize;
            self.sift_up(shares, moved);
        }
    }

    /// The share at `place` holds more than it did.
    pub(super) fn raised(&mut self, shares: &mut [Share], place: u32) {
        self.sift_up(shares, shares[place as usize].heap_at as usize);
    }

    /// The share at `place` holds less than it did.
    pub(super) fn lowered(&mut self, shares: &mut [Share], place: u32) {
        self.sift_down(shares, shares[place as usize].heap_at as usize);
    }

    fn sift_up(&mut self, shares: &mut [Share], mut at: usize) {
        let place = self.heap[at];
        let bytes = shares[place as usize].bytes;
        while at > 0 {
            let parent = (at - 1) / 2;
            let above = self.heap[parent];
            if shares[above as usize].bytes >= bytes {
                break;
            }
            self.heap[at] = above;
            shares[above as usize].heap_at = at as u32;
            at = parent;
        }
        self.heap[at] = place;
        shares[place as usize].heap_at = at as u32;
    }

    fn sift_down(&mut self, shares: &mut [Share], mut at: usize) {
        let place = self.heap[at];
        let bytes = shares[place as usize].bytes;
        let len = self.heap.len();
        loop {
            let left = 2 * at + 1;
            if left >= len {
                break;
            }
            let right = left + 1;
            let weight = |child: usize| shares[self.heap[child] as usize].bytes;
            let child = if right < len && weight(right) > weight(left) {
                right
            } else {
                left
            };
            if weight(child) <= bytes {
                break;
            }
            let below = self.heap[child];
            self.heap[at] = below;
            shares[below as usize].heap_at = at as u32;
            at = child;
        }
        self.heap[at] = place;
        shares[place as usize].heap_at = at as u32;
    }
}
