//! Asking, as an insert evicts, for the memory the next eviction will touch.

use super::{Cause, Table, NIL};
use crate::prefetch::prefetch;

impl Table {
    /// Asks for the memory that evicting the node at `at` will touch, once an insert has
    /// evicted for the same cause: at the budget the next insert evicts it. Its key's entry
    /// in the index, its neighbours' links, its value's line and what the value holds on the
    /// heap, and the line of the value after it, which the insert after next reads here. The
    /// requests in between hide what would otherwise be four or five misses an insert, in a
    /// table the cache has let go.
    pub(super) fn warm(&self, at: u32, cause: Cause) {
        if at == NIL {
            return;
        }
        // Its first line was written when the node before it was unlinked.
        let node = &self.nodes[at as usize];
        self.index.prefetch(&node.key);
        for neighbour in [node.newer, node.share_newer, node.ttl_newer] {
            if neighbour != NIL {
                prefetch(&self.nodes[neighbour as usize]);
            }
        }
        let after = match cause {
            Cause::Share => node.share_newer,
            Cause::Budget => node.newer,
        };
        if after != NIL {
            prefetch(&self.nodes[after as usize].expires);
        }
        // Asked for at the insert before this one, as the value after that one's. Letting the
        // value go reads the allocator's header, or the counts, just before what it points to.
        if let Some(value) = &node.value {
            let start = value.heap_start();
            prefetch(start);
            prefetch(start.wrapping_sub(16));
        }
    }
}
