//! Which paths are protected, and the deadline, retention and execution bound of each.

use std::time::Duration;

use super::RetryBudget;

/// Prefix rules over request paths; the longest matching prefix wins.
#[derive(Debug, Clone)]
pub(crate) struct PathRules {
    protect: Vec<String>,
    exclude: Vec<String>,
    deadlines: Vec<(String, Duration)>,
    retentions: Vec<(String, Duration)>,
    max_executions: Vec<(String, Duration)>,
    retry_budgets: Vec<(String, RetryBudget)>,
    pub(crate) default_deadline: Duration,
    pub(crate) default_retention: Duration,
    pub(crate) default_max_execution: Option<Duration>,
    pub(crate) default_retry_budget: RetryBudget,
}

/// Whether `prefix` covers `path` on a segment boundary: `/tools` covers `/tools` and
/// `/tools/x`, not `/toolsx`.
fn covers(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

fn longest<'a, T>(rules: &'a [(String, T)], path: &str) -> Option<&'a T> {
    rules
        .iter()
        .filter(|(prefix, _)| covers(prefix, path))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, value)| value)
}

impl PathRules {
    pub(crate) fn new(default_deadline: Duration, default_retention: Duration) -> Self {
        Self {
            protect: Vec::new(),
            exclude: Vec::new(),
            deadlines: Vec::new(),
            retentions: Vec::new(),
            max_executions: Vec::new(),
            retry_budgets: Vec::new(),
            default_deadline,
            default_retention,
            default_max_execution: None,
            default_retry_budget: RetryBudget::default(),
        }
    }

    pub(crate) fn protect(&mut self, prefix: impl Into<String>) {
        self.protect.push(prefix.into());
    }

    pub(crate) fn exclude(&mut self, prefix: impl Into<String>) {
        self.exclude.push(prefix.into());
    }

    pub(crate) fn deadline_for(&mut self, prefix: impl Into<String>, deadline: Duration) {
        self.deadlines.push((prefix.into(), deadline));
    }

    pub(crate) fn retention_for(&mut self, prefix: impl Into<String>, retention: Duration) {
        self.retentions.push((prefix.into(), retention));
    }

    pub(crate) fn max_execution_for(&mut self, prefix: impl Into<String>, limit: Duration) {
        self.max_executions.push((prefix.into(), limit));
    }

    pub(crate) fn retry_budget_for(&mut self, prefix: impl Into<String>, budget: RetryBudget) {
        self.retry_budgets.push((prefix.into(), budget));
    }

    /// Protected unless excluded; with no `protect` rule every path is protected.
    pub(crate) fn is_protected(&self, path: &str) -> bool {
        let longest_match = |prefixes: &[String]| {
            prefixes
                .iter()
                .filter(|prefix| covers(prefix, path))
                .map(String::len)
                .max()
        };
        let protected = if self.protect.is_empty() {
            Some(0)
        } else {
            longest_match(&self.protect)
        };
        match (protected, longest_match(&self.exclude)) {
            (None, _) => false,
            (Some(_), None) => true,
            // The more specific rule wins: exclude `/tools` but protect `/tools/pay`.
            (Some(p), Some(e)) => p > e,
        }
    }

    pub(crate) fn deadline(&self, path: &str) -> Duration {
        longest(&self.deadlines, path)
            .copied()
            .unwrap_or(self.default_deadline)
    }

    pub(crate) fn retention(&self, path: &str) -> Duration {
        longest(&self.retentions, path)
            .copied()
            .unwrap_or(self.default_retention)
    }

    /// How soon an intent on `path` may run again after its attempts failed.
    pub(crate) fn retry_budget(&self, path: &str) -> RetryBudget {
        longest(&self.retry_budgets, path)
            .copied()
            .unwrap_or(self.default_retry_budget)
    }

    /// How long an execution on `path` may run before it is abandoned, if it is bounded.
    pub(crate) fn max_execution(&self, path: &str) -> Option<Duration> {
        longest(&self.max_executions, path)
            .copied()
            .or(self.default_max_execution)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> PathRules {
        PathRules::new(Duration::from_secs(25), Duration::from_secs(86400))
    }

    #[test]
    fn prefixes_match_whole_segments() {
        assert!(covers("/tools", "/tools"));
        assert!(covers("/tools", "/tools/send"));
        assert!(!covers("/tools", "/toolsx"));
        assert!(covers("/", "/anything"));
    }

    #[test]
    fn everything_is_protected_until_a_rule_narrows_it() {
        let mut r = rules();
        assert!(r.is_protected("/x"));
        r.protect("/tools");
        assert!(!r.is_protected("/x"));
        assert!(r.is_protected("/tools/a"));
        r.exclude("/tools/internal");
        assert!(!r.is_protected("/tools/internal/b"));
        r.protect("/tools/internal/pay");
        assert!(r.is_protected("/tools/internal/pay"));
    }

    #[test]
    fn the_longest_prefix_sets_deadline_and_retention() {
        let mut r = rules();
        r.deadline_for("/tools", Duration::from_secs(5));
        r.deadline_for("/tools/report", Duration::ZERO);
        r.retention_for("/tools/report", Duration::from_secs(60));
        assert_eq!(r.deadline("/tools/report"), Duration::ZERO);
        assert_eq!(r.deadline("/tools/send"), Duration::from_secs(5));
        assert_eq!(r.deadline("/other"), Duration::from_secs(25));
        assert_eq!(r.retention("/tools/report/x"), Duration::from_secs(60));
        assert_eq!(r.retention("/tools/send"), Duration::from_secs(86400));
    }
}
