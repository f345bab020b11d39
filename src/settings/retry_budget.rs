//! How soon an intent whose attempts keep failing may run again.

use std::time::Duration;

/// How soon an intent may run again after its attempts failed in a row: the retry budget.
///
/// After one failure the next attempt runs at once. After `k ≥ 2` failures in a row it may run
/// no sooner than `backoff × 2^(k−2)` after the last (at most `longest_backoff`), and after
/// `max_failures` in a row no sooner than `cooldown`. An attempt inside its wait is not run:
/// the layer answers it at once (HTTP 429 with `Retry-After`), saying how often the intent
/// failed and when calling again runs it. A success ends the run of failures. The count is kept
/// with the intent's failure in the store, so every instance that shares the store applies it.
///
/// What counts as a failure: an answer the layer releases (a 5xx, a 408, 425 or 429, a
/// failure the classification rule names), an error of the inner service, a panic, an answer
/// that broke off. An answer of the credentials (401, 403), a server's cancellation and a
/// request for more input do not count, and end the run of failures.
///
/// ```
/// use std::time::Duration;
/// use tower_idempotency::{IdempotencyLayer, RetryBudget};
///
/// let budget = RetryBudget::default();
/// assert_eq!(budget.wait_after(1), Duration::ZERO);
/// assert_eq!(budget.wait_after(2), Duration::from_secs(1));
/// assert_eq!(budget.wait_after(4), Duration::from_secs(4));
/// assert_eq!(budget.wait_after(5), Duration::from_secs(600));
///
/// let layer = IdempotencyLayer::new()
///     .retry_budget(budget.max_failures(3).cooldown(Duration::from_secs(60)))
///     .retry_budget_for("/tools/search", RetryBudget::off());
/// # let _ = layer;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    backoff: Duration,
    longest_backoff: Duration,
    max_failures: u32,
    cooldown: Duration,
}

/// The default base of the backoff between failed attempts.
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);
/// The default longest backoff between failed attempts.
const DEFAULT_LONGEST_BACKOFF: Duration = Duration::from_secs(60);
/// The default number of failures in a row after which an intent cools down.
const DEFAULT_MAX_FAILURES: u32 = 5;
/// The default time an intent that failed `max_failures` times in a row is held back.
const DEFAULT_FAILURE_COOLDOWN: Duration = Duration::from_secs(10 * 60);

impl Default for RetryBudget {
    fn default() -> Self {
        Self {
            backoff: DEFAULT_RETRY_BACKOFF,
            longest_backoff: DEFAULT_LONGEST_BACKOFF,
            max_failures: DEFAULT_MAX_FAILURES,
            cooldown: DEFAULT_FAILURE_COOLDOWN,
        }
    }
}

impl RetryBudget {
    /// No budget: every attempt after a failure runs, as soon as it comes.
    pub fn off() -> Self {
        Self::default().max_failures(0)
    }

    /// The base of the backoff (default 1 s): after `k ≥ 2` failures in a row, the next
    /// attempt waits `backoff × 2^(k−2)`. Zero: no backoff before `max_failures`.
    pub fn backoff(self, backoff: Duration) -> Self {
        Self { backoff, ..self }
    }

    /// The longest backoff (default 1 min).
    pub fn longest_backoff(self, longest: Duration) -> Self {
        Self {
            longest_backoff: longest,
            ..self
        }
    }

    /// After this many failures in a row (default 5) the intent waits `cooldown`; 0 turns the
    /// budget off.
    pub fn max_failures(self, max_failures: u32) -> Self {
        Self {
            max_failures,
            ..self
        }
    }

    /// How long an intent that failed `max_failures` times in a row is held back (default
    /// 10 min).
    pub fn cooldown(self, cooldown: Duration) -> Self {
        Self { cooldown, ..self }
    }

    /// Whether the budget holds nothing back.
    pub fn is_off(&self) -> bool {
        self.max_failures == 0
    }

    /// How long after the last of `failures` failures in a row the next attempt may run.
    pub fn wait_after(&self, failures: u32) -> Duration {
        if self.is_off() {
            return Duration::ZERO;
        }
        if failures >= self.max_failures {
            return self.cooldown;
        }
        match failures.checked_sub(2) {
            None => Duration::ZERO,
            Some(doublings) => {
                let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
                self.backoff
                    .checked_mul(factor)
                    .unwrap_or(Duration::MAX)
                    .min(self.longest_backoff)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn the_default_budget_runs_five_attempts_at_0_0_1_3_and_7_s_then_cools_down() {
        let budget = RetryBudget::default();
        let mut at = Duration::ZERO;
        let mut runs = vec![at];
        for failures in 1..5 {
            at += budget.wait_after(failures);
            runs.push(at);
        }
        assert_eq!(runs, [S(0), S(0), S(1), S(3), S(7)]);
        assert_eq!(budget.wait_after(5), S(600));
        assert_eq!(budget.wait_after(9), S(600));
    }

    #[test]
    fn the_backoff_doubles_up_to_its_longest() {
        let budget = RetryBudget::default().max_failures(100);
        assert_eq!(budget.wait_after(8), S(60));
        assert_eq!(budget.wait_after(99), S(60));
        assert_eq!(budget.wait_after(100), S(600));
    }

    #[test]
    fn zero_failures_allowed_turns_the_budget_off() {
        let off = RetryBudget::off();
        assert!(off.is_off());
        assert_eq!(off.wait_after(50), Duration::ZERO);
    }

    #[test]
    fn one_failure_allowed_cools_down_after_the_first() {
        let budget = RetryBudget::default().max_failures(1).cooldown(S(30));
        assert_eq!(budget.wait_after(0), Duration::ZERO);
        assert_eq!(budget.wait_after(1), S(30));
    }
}
