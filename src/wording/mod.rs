//! What the layer says about an action, whatever protocol carries it.
//!
//! Each [`Words`] has an `outcome`, whether calling again is safe, and a `detail` whose first
//! sentence says what happened to the action, since a model reads it to decide whether to
//! call again. The HTTP dialect writes it as JSON (a problem document for errors), the MCP
//! dialect as a tool result; neither reads it back.

mod attempts;
mod kept_for;
mod refusals;
mod status;

use serde_json::Value;

use crate::key::IntentKey;

#[cfg(feature = "mcp")]
pub(crate) use attempts::failure_told;
pub(crate) use attempts::{
    abandoned, already_executed, answer_broke_off, attempt_failed, in_progress, status_failed,
    Asker,
};
pub(crate) use refusals::refusal;
#[cfg(feature = "mcp")]
pub(crate) use refusals::unnamed_mcp_caller;
pub(crate) use status::{
    status_layer_fault, status_malformed, status_missing_scope, status_not_found,
    status_unavailable,
};

/// What the layer says about one action.
#[derive(Debug, Clone)]
pub(crate) struct Words {
    /// A short name of the situation (`missing-scope`, `too-busy`...).
    pub(crate) slug: &'static str,
    /// A title for the situation, where it is an error.
    pub(crate) title: &'static str,
    pub(crate) outcome: &'static str,
    pub(crate) retryable: bool,
    pub(crate) detail: String,
    /// Further members, in the order they are written.
    pub(crate) members: Vec<(&'static str, Value)>,
    /// How long to wait before calling again, where the layer says.
    pub(crate) retry_after_s: Option<u64>,
}

impl Words {
    pub(crate) fn new(
        slug: &'static str,
        title: &'static str,
        outcome: &'static str,
        retryable: bool,
        detail: String,
    ) -> Self {
        Self {
            slug,
            title,
            outcome,
            retryable,
            detail,
            members: Vec::with_capacity(4),
            retry_after_s: None,
        }
    }

    pub(crate) fn member(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.members.push((name, value.into()));
        self
    }

    pub(crate) fn intent(self, key: &IntentKey) -> Self {
        self.member("intent", key.to_hex())
    }

    pub(crate) fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self.member("retry_after_s", seconds)
    }

    /// The member named `name`, if the answer has one.
    #[cfg(feature = "mcp")]
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.members
            .iter()
            .find_map(|(member, value)| (*member == name).then_some(value))
    }
}
