//! Which tools are protected: what the configuration says, else what the server declares
//! (`readOnlyHint: true` in a `tools/list` answer passes a tool through), else protected.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::listing::{Listings, Revision, Server};
use super::param_headers::ParamHeader;
use crate::settings::Timing;

/// What the configuration says of one tool.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ToolRule {
    /// `Some(true)`: pass through; `Some(false)`: protect, whatever the server declares.
    pub(crate) pass_through: Option<bool>,
    pub(crate) timing: Timing,
}

/// The tool policy of one layer: what its configuration says, and what its servers declare.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolPolicy {
    pub(crate) configured: HashMap<String, ToolRule>,
    /// Whether a call's arguments are checked against its tool's listed `inputSchema`.
    pub(crate) validates_arguments: bool,
    /// What each server's last listing declared of its tools.
    pub(crate) listings: Listings,
}

impl ToolPolicy {
    pub(crate) fn rule_mut(&mut self, tool: &str) -> &mut ToolRule {
        self.configured.entry(tool.to_owned()).or_default()
    }

    /// Whether calls of `tool` on `server` pass through unprotected.
    pub(crate) fn passes_through(&self, server: Server, tool: &str) -> bool {
        if let Some(pass) = self.configured.get(tool).and_then(|rule| rule.pass_through) {
            return pass;
        }
        self.listings
            .tool(server, tool, |listed| listed.read_only)
            .unwrap_or(false)
    }

    /// Whether `tool` was listed through the layer without an output schema, so that a
    /// result of the layer's that is not an error is valid for it. A tool not listed here
    /// may declare one, which such a result would have to match: clients check.
    pub(crate) fn listed_without_output_schema(&self, server: Server, tool: &str) -> bool {
        self.listings
            .tool(server, tool, |listed| !listed.output_schema)
            .unwrap_or(false)
    }

    /// The `Mcp-Param-*` headers `tool` declares, if a listing of it was seen; none where the
    /// server's listing was read through without naming it, as the server then checks none.
    pub(crate) fn param_headers(&self, server: Server, tool: &str) -> Option<Arc<[ParamHeader]>> {
        let declared = self
            .listings
            .tool(server, tool, |listed| Arc::clone(&listed.param_headers));
        match declared {
            Some(declared) => Some(declared),
            None if self.listings.is_unlisted(server, tool) => Some(Arc::from([])),
            None => None,
        }
    }

    /// The deadline and retention configured for `tool`.
    pub(crate) fn timing(&self, tool: &str) -> Timing {
        self.configured
            .get(tool)
            .map(|rule| rule.timing)
            .unwrap_or_default()
    }

    /// Learns the tools of a `tools/list` result given in `revision` of its server's
    /// listing: each listed tool is read-only or not, has an output schema or not, declares
    /// `Mcp-Param-*` headers and, where arguments are checked, an input schema, as it now
    /// declares. A paginated listing only updates the tools it lists.
    pub(crate) fn learn(&self, revision: Revision, result: &Map<String, Value>) {
        let arguments = self.validates_arguments;
        self.listings.learn(revision, result, arguments);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn learnt(policy: &ToolPolicy, listing: &Value) {
        let revision = policy.listings.revision(SERVER);
        policy.learn(revision, listing.as_object().unwrap());
    }

    const SERVER: Server = Server::TEST;

    fn listing() -> Value {
        json!({"tools": [
            {"name": "search", "annotations": {"readOnlyHint": true}},
            {"name": "send_email", "annotations": {"readOnlyHint": false}},
            {"name": "pay"},
        ]})
    }

    #[test]
    fn declared_read_only_tools_pass_through_and_the_rest_are_protected() {
        let policy = ToolPolicy::default();
        assert!(!policy.passes_through(SERVER, "search"));
        learnt(&policy, &listing());
        assert!(policy.passes_through(SERVER, "search"));
        assert!(!policy.passes_through(SERVER, "send_email"));
        assert!(!policy.passes_through(SERVER, "pay"));
    }

    #[test]
    fn only_tools_listed_without_an_output_schema_take_results_without_one() {
        let policy = ToolPolicy::default();
        assert!(
            !policy.listed_without_output_schema(SERVER, "pay"),
            "not listed yet"
        );
        let listing = json!({"tools": [
            {"name": "pay"},
            {"name": "report", "outputSchema": {"type": "object"}},
        ]});
        learnt(&policy, &listing);
        assert!(policy.listed_without_output_schema(SERVER, "pay"));
        assert!(!policy.listed_without_output_schema(SERVER, "report"));
        let relisted = json!({"tools": [{"name": "pay", "outputSchema": {"type": "object"}}]});
        learnt(&policy, &relisted);
        assert!(!policy.listed_without_output_schema(SERVER, "pay"));
    }

    #[test]
    fn configuration_overrides_what_the_server_declares() {
        let mut policy = ToolPolicy::default();
        policy.rule_mut("search").pass_through = Some(false);
        policy.rule_mut("pay").pass_through = Some(true);
        learnt(&policy, &listing());
        assert!(!policy.passes_through(SERVER, "search"));
        assert!(policy.passes_through(SERVER, "pay"));
    }

    #[test]
    fn a_tool_no_longer_declared_read_only_is_protected_again() {
        let policy = ToolPolicy::default();
        learnt(&policy, &listing());
        learnt(&policy, &json!({"tools": [{"name": "search"}]}));
        assert!(!policy.passes_through(SERVER, "search"));
    }
}
