//! Detached executions: tracked for shutdown, bounded in number.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::task::TaskTracker;

/// Default bound on executions running at once.
pub(crate) const DEFAULT_MAX_DETACHED: usize = 1024;

/// Executions run detached from their callers, so that a caller that disconnects cannot cancel
/// a side effect halfway. This handle waits for them at shutdown.
///
/// ```no_run
/// # async fn serve() {
/// use tower_idempotency::IdempotencyLayer;
///
/// let layer = IdempotencyLayer::new();
/// let executions = layer.detached();
/// // ... serve with `layer` until a shutdown signal, stop accepting, then:
/// executions.wait().await;
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct DetachedExecutions {
    tracker: TaskTracker,
}

impl DetachedExecutions {
    /// Executions still running.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Whether none is running.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// Waits until every detached execution has ended and recorded its outcome.
    pub async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
        self.tracker.reopen();
    }

    /// Waits for the detached executions, at most `grace` (an orchestrator's shutdown grace
    /// period, less a margin), and returns how many were still running then: those are cut
    /// off when the process exits, their leases lapse, and another instance may run them
    /// again. Each one left is counted (`idempotency_shutdown_unfinished_total`) and logged.
    ///
    /// ```no_run
    /// # async fn serve() {
    /// use std::time::Duration;
    /// use tower_idempotency::IdempotencyLayer;
    ///
    /// let layer = IdempotencyLayer::new();
    /// let executions = layer.detached();
    /// // ... serve until SIGTERM, stop accepting, then:
    /// let unfinished = executions.wait_for(Duration::from_secs(25)).await;
    /// assert_eq!(unfinished, 0, "every running action finished and recorded its outcome");
    /// # }
    /// ```
    pub async fn wait_for(&self, grace: std::time::Duration) -> usize {
        self.tracker.close();
        let finished = tokio::time::timeout(grace, self.tracker.wait()).await;
        self.tracker.reopen();
        if finished.is_ok() {
            return 0;
        }
        let unfinished = self.tracker.len();
        crate::telemetry::shutdown_unfinished(unfinished);
        unfinished
    }
}

/// The tracker and the bound, shared by every service a layer makes.
#[derive(Debug)]
pub(crate) struct Detached {
    tracker: TaskTracker,
    permits: Arc<Semaphore>,
}

impl Detached {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            tracker: TaskTracker::new(),
            permits: Arc::new(Semaphore::new(max)),
        }
    }

    /// A place for one more execution, if the bound allows it.
    pub(crate) fn try_reserve(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }

    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    pub(crate) fn handle(&self) -> DetachedExecutions {
        DetachedExecutions {
            tracker: self.tracker.clone(),
        }
    }
}
