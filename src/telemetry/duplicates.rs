//! What observe mode counts: each call of a protected route checked for a repeat of its intent.

use super::Op;

/// What the check of one observed call found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finding {
    /// The intent's first call within its window: `attempt` is 1.
    First,
    /// A repeat: the intent's call number `attempt` (2 or more) within its window.
    Repeat(u64),
    /// No intent could be derived (no scope, a body over the limit, a malformed key).
    NotKeyable,
    /// The store could not count it.
    Uncounted,
}

impl Finding {
    /// What a store's count makes of a call.
    pub(crate) fn from_count(count: u64) -> Self {
        if count <= 1 {
            Self::First
        } else {
            Self::Repeat(count)
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::Repeat(_) => "repeat",
            Self::NotKeyable => "not_keyable",
            Self::Uncounted => "uncounted",
        }
    }

    /// The call's number within its intent, where it was counted.
    pub(crate) fn attempt(self) -> Option<u64> {
        match self {
            Self::First => Some(1),
            Self::Repeat(attempt) => Some(attempt),
            Self::NotKeyable | Self::Uncounted => None,
        }
    }
}

/// Counts one observed call: `idempotency_duplicate_checks_total` by result, and the call's
/// number within its intent in `idempotency_duplicate_attempts`.
pub(crate) fn checked(op: &Op, checked: Finding) {
    op.hot.checks().checked(checked);
}
