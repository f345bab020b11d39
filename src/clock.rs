//! The layer's one clock: Tokio's, so that tests can pause and advance it, read as wall-clock
//! milliseconds, the unit records share across processes.
//!
//! The wall clock is read once, at the first call; after that the time is that reading plus
//! the time Tokio has seen pass. Within a process every deadline, lease and record time then
//! moves together, and a wall clock that jumps does not make a lease lapse early.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// The wall clock and Tokio's clock, read together once.
static ANCHOR: OnceLock<(u64, Instant)> = OnceLock::new();

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    ms_at(Instant::now())
}

/// `at`, read as milliseconds since the Unix epoch: for a time read already, so that one
/// reading serves both clocks.
pub(crate) fn ms_at(at: Instant) -> u64 {
    let (wall_ms, anchor) = *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH);
        (wall.map_or(0, millis), at)
    });
    let passed = at.saturating_duration_since(anchor);
    wall_ms.saturating_add(millis(passed))
}

/// `duration` in whole milliseconds, or `u64::MAX` for a duration longer than that counts:
/// a cast would wrap around to a short time.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The farthest a time is set from now: a longer one (`Duration::MAX`, "always wait", "keep
/// forever") is taken as this, a hundred years, which every clock and server the layer uses can
/// count to. Adding a longer one to a clock would panic.
pub(crate) const FARTHEST: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `wait` after `at`, or [`FARTHEST`] after it if `wait` is longer.
pub(crate) fn later(at: Instant, wait: Duration) -> Instant {
    at + wait.min(FARTHEST)
}

/// Whole seconds since `since_ms` (zero if that is later than now).
pub(crate) fn seconds_since(since_ms: u64) -> u64 {
    now_ms().saturating_sub(since_ms) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_moves_with_tokio_time() {
        let before = now_ms();
        tokio::time::sleep(Duration::from_secs(90)).await;
        let after = now_ms();
        assert!(
            (90_000..91_000).contains(&(after - before)),
            "{}",
            after - before
        );
        assert_eq!(seconds_since(before), 90);
    }

    #[test]
    fn the_clock_reads_the_wall_clock() {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let now = now_ms();
        let wall = wall.as_millis() as u64;
        assert!(now.abs_diff(wall) < 60_000, "{now} vs {wall}");
    }
}
