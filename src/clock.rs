//! Wall-clock milliseconds, the unit records share across processes.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whole seconds since `since_ms` (zero if the clock went back).
pub(crate) fn seconds_since(since_ms: u64) -> u64 {
    now_ms().saturating_sub(since_ms) / 1000
}
