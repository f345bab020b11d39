//! Known bugs brought back for the model checker (`model/`) to find. Never in a build with
//! features alone: only `--cfg tower_idempotency_revert` compiles them in, and then each stays
//! off unless `TOWER_IDEMPOTENCY_REVERT` names it, so that one build serves every switch.

#![cfg(tower_idempotency_revert)]

use std::sync::OnceLock;

use crate::key::IntentKey;
use crate::store::OwnerToken;

/// Every switch, by the name `TOWER_IDEMPOTENCY_REVERT` takes.
const SWITCHES: [&str; 2] = ["fencing", "operator-over-lease"];

/// Whether the bug `name` is brought back in this process.
pub(super) fn on(name: &str) -> bool {
    static CHOSEN: OnceLock<Option<String>> = OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| {
        let chosen = std::env::var("TOWER_IDEMPOTENCY_REVERT").ok()?;
        assert!(
            SWITCHES.contains(&chosen.as_str()),
            "TOWER_IDEMPOTENCY_REVERT={chosen} names no switch (known: {SWITCHES:?})"
        );
        Some(chosen)
    });
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
