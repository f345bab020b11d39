//! Known bugs brought back for the model checker (`model/`) to find. Never in a build with
//! features alone: only `--cfg tower_idempotency_revert="NAME"` compiles one in.

#[cfg(tower_idempotency_revert = "fencing")]
impl super::MemoryStore {
    /// A completion that takes the lease from whoever holds it instead of checking its token.
    pub(super) fn take_lease(&self, key: &crate::key::IntentKey, token: &crate::store::OwnerToken) {
        if let Some(lease) = self.running_map().get_mut(key) {
            lease.token = *token;
        }
    }
}
