//! What the MCP endpoint's handlers share of the layer: its engine, the tools' policy, the
//! requests forwarded unprotected, and what it serves.

use std::sync::Arc;

use super::cancellation::ForwardedRequests;
use super::policy::ToolPolicy;
use super::relay::Relays;
use crate::engine::Engine;

/// What one POST needs of the layer.
pub(crate) struct Endpoint<St> {
    pub(crate) engine: Arc<Engine<St>>,
    pub(crate) policy: Arc<ToolPolicy>,
    pub(crate) forwarded: ForwardedRequests,
    /// The questions relayed to callers and the callers attached, for their answers and
    /// cancellations.
    pub(crate) relays: Relays,
    pub(crate) tasks: bool,
    pub(crate) replay_notice: bool,
}

impl<St> std::fmt::Debug for Endpoint<St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("engine", &self.engine)
            .field("tools", &self.policy.configured)
            .field("tasks", &self.tasks)
            .field("replay_notice", &self.replay_notice)
            .finish_non_exhaustive()
    }
}
