//! What an operator asks of the memory store: a listing a page at a time, a removal and a
//! resolution kept without an owner.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant as LeaseClock;

use super::kept::CachedRecord;
use super::{record_weight, Closing, MemoryStore};
use crate::key::IntentKey;
use crate::store::{Entry, Record, Scanned};

impl MemoryStore {
    /// A page of the entries held: on the first, every running lease, then `count` of the
    /// table's values from the node the cursor names (cursor `n + 1` for node `n`).
    pub(super) fn scan_page(&self, cursor: u64, count: usize) -> Scanned {
        let now = LeaseClock::now();
        let mut entries = Vec::new();
        if cursor == 0 {
            let running = self.running_map();
            entries.extend(
                running
                    .iter()
                    .filter(|(_, lease)| lease.expires > now)
                    .map(|(key, lease)| (*key, Entry::Running(lease.info))),
            );
        }
        let from = usize::try_from(cursor.saturating_sub(1)).unwrap_or(usize::MAX);
        let table = self.settled_table();
        let (page, next) = table.page(from, count.max(1), now);
        entries.extend(page.into_iter().map(|(key, settled)| {
            let entry = match settled {
                Closing::Completed(kept) => Entry::Completed(kept.peek()),
                Closing::Failed(tombstone) => Entry::Failed(Arc::clone(tombstone)),
            };
            (key, entry)
        }));
        let next = next.map_or(0, |at| u64::try_from(at).unwrap_or(u64::MAX - 1) + 1);
        Scanned::new(entries, next)
    }

    /// Removes the kept value of `key`: a running lease is not the operator's.
    pub(super) fn remove_entry(&self, key: &IntentKey) -> bool {
        let removed = self.settled_table().remove(key);
        #[cfg(tower_idempotency_revert)]
        let removed = self.revert_operator_over_lease(key) | removed;
        removed
    }

    /// Keeps `record` for `key` unless a live lease holds it, under the claim lock, so that no
    /// claim sees the lease and the record apart: whether it kept it.
    pub(super) fn put_record(&self, key: &IntentKey, record: &Record, retention: Duration) -> bool {
        let now = LeaseClock::now();
        let mut running = self.running_map();
        if running.get(key).is_some_and(|lease| lease.expires > now) {
            return false;
        }
        running.remove(key);
        let share = record.share.unwrap_or(record.scope);
        let settled = Closing::Completed(CachedRecord::new(record));
        let mut table = self.settled_table();
        // What an insert evicts for room is let go, as on any insert.
        let _evicted = table.insert(*key, settled, record_weight(record), share, retention, now);
        true
    }
}
