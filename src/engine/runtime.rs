//! The state every service of one layer shares, created once: the store, the intents in
//! flight, the detached executions, the attempt counts, the labels and the recent requests.

use std::sync::Arc;

use super::detached::DetachedTracker;
use super::inflight::Inflight;
use super::recent::RecentRequests;
use crate::store::StoreMetrics;
use crate::telemetry::{Attempts, Duplicates, Ops};

/// Created with the layer and never replaced: a handle taken from it (the detached
/// executions) stays valid whatever the builder is asked later.
pub(crate) struct Runtime<St> {
    pub(crate) store: Arc<St>,
    pub(crate) store_metrics: Arc<StoreMetrics>,
    pub(crate) inflight: Arc<Inflight>,
    pub(crate) detached: DetachedTracker,
    pub(crate) attempts: Attempts,
    pub(crate) ops: Ops,
    pub(crate) recent: RecentRequests,
    /// What observe mode counted, for the duplicate report.
    pub(crate) duplicates: Duplicates,
}

impl<St> Runtime<St> {
    pub(crate) fn new(store: St) -> Self {
        crate::telemetry::calibrate();
        Self {
            store: Arc::new(store),
            store_metrics: Arc::default(),
            inflight: Arc::default(),
            detached: DetachedTracker::default(),
            attempts: Attempts::default(),
            ops: Ops::default(),
            recent: RecentRequests::default(),
            duplicates: Duplicates::default(),
        }
    }
}

impl<St> std::fmt::Debug for Runtime<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("detached", &self.detached)
            .finish_non_exhaustive()
    }
}
