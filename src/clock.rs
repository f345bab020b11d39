//! The layer's one clock: Tokio's, so that tests can pause and advance it, read as wall-clock
//! milliseconds, the unit records share across processes.
//!
//! The wall clock is read once, at the first call; after that the time is that reading plus
//! the time Tokio has seen pass. Within a process every deadline, lease and record time then
//! moves together, and a wall clock that jumps does not make a lease lapse early.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// The wall clock and Tokio's clock, read together once.
static ANCHOR: OnceLock<(u64, Instant)> = OnceLock::new();

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    ms_at(Instant::now())
}

/// Milliseconds since the Unix epoch at `instant`, a reading of Tokio's clock already taken.
pub(crate) fn ms_at(instant: Instant) -> u64 {
    let (wall_ms, at) = *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH);
        (wall.map_or(0, |d| d.as_millis() as u64), instant)
    });
    // A reading from before the anchor (taken earlier, or on another runtime's paused clock)
    // lies as far before it.
    match instant.checked_duration_since(at) {
        Some(passed) => wall_ms.saturating_add(passed.as_millis() as u64),
        // Rounded down as the readings after it are, so that the time between two readings
        // is the same on either side.
        None => {
            wall_ms.saturating_sub(at.duration_since(instant).as_nanos().div_ceil(1_000_000) as u64)
        }
    }
}

/// Whole seconds since `since_ms` (zero if that is later than now).
pub(crate) fn seconds_since(since_ms: u64) -> u64 {
    now_ms().saturating_sub(since_ms) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    #[tokio::test(start_paused = true)]
    async fn a_reading_taken_earlier_gives_its_own_time() {
        let earlier = Instant::now();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(now_ms() - ms_at(earlier), 5_000);
    }

    #[test]
    fn the_clock_reads_the_wall_clock() {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let now = now_ms();
        let wall = wall.as_millis() as u64;
        assert!(now.abs_diff(wall) < 60_000, "{now} vs {wall}");
    }
}
