//! The layer's setters of how soon a failing intent may run again: its retry budget.

use super::IdempotencyLayer;
use crate::settings::RetryBudget;

impl<St> IdempotencyLayer<St> {
    /// How soon an intent whose attempts keep failing may run again (default
    /// [`RetryBudget::default`]: at once after one failure, then 1 s, 2 s, 4 s…, and after 5
    /// failures in a row not before 10 min). [`RetryBudget::off`] runs every attempt.
    pub fn retry_budget(self, budget: RetryBudget) -> Self {
        self.set(|s| s.paths.default_retry_budget = budget)
    }

    /// The retry budget of paths under `prefix`; see [`retry_budget`](Self::retry_budget).
    pub fn retry_budget_for(self, prefix: impl Into<String>, budget: RetryBudget) -> Self {
        self.set(|s| s.paths.retry_budget_for(prefix, budget))
    }
}
