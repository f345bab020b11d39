//! How long a kept outcome stands in for a repeat, as the words a caller reads say it.

use std::time::Duration;

/// "for the next 59 minutes": the time left until `expires_at_ms` (milliseconds since the Unix
/// epoch), rounded down, so that what a repeat is told never outlasts the record.
pub(crate) fn until(expires_at_ms: u64) -> String {
    let left = expires_at_ms.saturating_sub(crate::clock::now_ms());
    within(Duration::from_millis(left))
}

/// "for the next 2 hours": `left`, rounded down to a whole unit a reader takes in at once.
pub(crate) fn within(left: Duration) -> String {
    let seconds = left.as_secs();
    let (count, unit) = match seconds {
        0..=119 => (seconds, "second"),
        120..=7_199 => (seconds / 60, "minute"),
        7_200..=172_799 => (seconds / 3_600, "hour"),
        _ => (seconds / 86_400, "day"),
    };
    match count {
        0 | 1 => format!("for the next {unit}"),
        _ => format!("for the next {count} {unit}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_left_is_said_in_a_whole_unit_rounded_down() {
        let said = |s| within(Duration::from_secs(s));
        assert_eq!(said(0), "for the next second");
        assert_eq!(said(45), "for the next 45 seconds");
        assert_eq!(said(3_599), "for the next 59 minutes");
        assert_eq!(said(3_600), "for the next 60 minutes");
        assert_eq!(said(86_400), "for the next 24 hours");
        assert_eq!(said(3 * 86_400 + 5), "for the next 3 days");
    }
}
