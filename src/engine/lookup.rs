//! What the store holds of an intent, as far as one scope may see it: for the status path and
//! task queries.

use std::sync::Arc;

use super::Engine;
use crate::key::{IntentKey, ScopeHash};
use crate::store::{Entry, Record, Store, StoreError, Tombstone};

/// An intent as one scope sees it: another scope's intent is as unknown as one that never
/// ran or has expired, so that nothing leaks.
#[derive(Debug)]
pub(crate) enum IntentView {
    Running { started_at_ms: u64 },
    Completed(Arc<Record>),
    Failed(Arc<Tombstone>),
    Unknown,
}

impl<St: Store> Engine<St> {
    /// Looks `key` up for `scope`.
    pub(crate) async fn seen(
        &self,
        key: &IntentKey,
        scope: &ScopeHash,
    ) -> Result<IntentView, StoreError> {
        Ok(match self.store.get(key).await? {
            Some(Entry::Running(info)) if info.scope == *scope => IntentView::Running {
                started_at_ms: info.started_at_ms,
            },
            Some(Entry::Completed(record)) if record.scope == *scope => {
                IntentView::Completed(record)
            }
            Some(Entry::Failed(tombstone)) if tombstone.scope == *scope => {
                IntentView::Failed(tombstone)
            }
            _ => IntentView::Unknown,
        })
    }
}
