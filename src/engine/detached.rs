//! Detached executions: tracked for shutdown, bounded in number.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio_util::task::TaskTracker;

use crate::telemetry::Drain;

/// How often a shutdown's drain reads the executions still running into its gauge.
const DRAIN_READING: std::time::Duration = std::time::Duration::from_millis(250);

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
    drain: Drain,
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
    /// again. The gauge `idempotency_shutdown_unfinished` reads the executions still running
    /// from the start of the wait, and those left at its end; each one left is logged.
    /// Call it once the server's connections are done (axum's graceful shutdown has
    /// returned): a request still in flight may start an execution after the signal.
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
        let ends = tokio::time::Instant::now() + grace;
        let finished = loop {
            self.drain.running(self.tracker.len());
            let left = ends.saturating_duration_since(tokio::time::Instant::now());
            let step = left.min(DRAIN_READING);
            if tokio::time::timeout(step, self.tracker.wait())
                .await
                .is_ok()
            {
                break true;
            }
            if step == left {
                break false;
            }
        };
        self.tracker.reopen();
        if finished {
            self.drain.running(0);
            return 0;
        }
        let unfinished = self.tracker.len();
        self.drain.cut_off(unfinished);
        unfinished
    }
}

/// The tracker and the count of executions running, shared by every service a layer makes.
/// The bound itself is a setting, so that changing it never replaces the tracker a
/// [`DetachedExecutions`] handle already watches.
#[derive(Debug, Default, Clone)]
pub(crate) struct DetachedTracker {
    tracker: TaskTracker,
    running: Arc<AtomicUsize>,
    drain: Drain,
}

/// A place held by one execution; dropping it frees the place.
#[derive(Debug)]
pub(crate) struct Reservation {
    running: Arc<AtomicUsize>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

impl DetachedTracker {
    /// A place for one more execution, if fewer than `max` run.
    pub(crate) fn try_reserve(&self, max: usize) -> Option<Reservation> {
        let taken = self
            .running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |running| {
                (running < max).then_some(running + 1)
            });
        taken.ok().map(|_| Reservation {
            running: Arc::clone(&self.running),
        })
    }

    pub(crate) fn tracker(&self) -> &TaskTracker {
        &self.tracker
    }

    pub(crate) fn handle(&self) -> DetachedExecutions {
        DetachedExecutions {
            tracker: self.tracker.clone(),
            drain: self.drain.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_counts_places_held_and_frees_them_on_drop() {
        let detached = DetachedTracker::default();
        let first = detached.try_reserve(2).unwrap();
        let _second = detached.try_reserve(2).unwrap();
        assert!(detached.try_reserve(2).is_none());
        drop(first);
        assert!(detached.try_reserve(2).is_some());
    }
}
