//! Known bugs brought back for the model checker (`model/`) to find. Never in a build with
//! features alone: only `--cfg tower_idempotency_revert` compiles them in, and then each stays
//! off unless `TOWER_IDEMPOTENCY_REVERT` names it, so that one build serves every switch.

#![cfg(tower_idempotency_revert)]

use std::sync::OnceLock;

use crate::key::IntentKey;
use crate::store::OwnerToken;

/// Whether the bug `name` is brought back in this process. The model checker knows the
/// switches' names and fails on one it does not know.
pub(super) fn on(name: &str) -> bool {
    static CHOSEN: OnceLock<Option<String>> = OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| std::env::var("TOWER_IDEMPOTENCY_REVERT").ok());
    chosen.as_deref() == Some(name)
}

impl super::MemoryStore {
    /// `fencing`: a completion takes the lease from whoever holds it instead of checking its
    /// token.
    pub(super) fn revert_fencing(&self, key: &IntentKey, token: &OwnerToken) {
        if !on("fencing") {
            return;
        }
        if let Some(lease) = self.running_map().get_mut(key) {
            lease.token = *token;
        }
    }

    /// `operator-over-lease`: an operator's removal takes a running lease away too (before
    /// e27ce1f), so that a call made since runs beside the execution that still holds it.
    pub(super) fn revert_operator_over_lease(&self, key: &IntentKey) -> bool {
        on("operator-over-lease") && self.running_map().remove(key).is_some()
    }
}
