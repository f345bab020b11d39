//! Which tools are protected: what the configuration says, else what the server declares
//! (`readOnlyHint: true` in a `tools/list` answer passes a tool through), else protected.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::{Map, Value};

use super::param_headers::{self, ParamHeader};
use crate::settings::Timing;

/// What the configuration says of one tool.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ToolRule {
    /// `Some(true)`: pass through; `Some(false)`: protect, whatever the server declares.
    pub(crate) pass_through: Option<bool>,
    pub(crate) timing: Timing,
}

/// The tool policy of one layer.
#[derive(Debug, Default)]
pub(crate) struct ToolPolicy {
    pub(crate) configured: HashMap<String, ToolRule>,
    /// Tools the server declared read-only in the last `tools/list` answer seen.
    declared_read_only: RwLock<HashSet<String>>,
    /// Tools the last `tools/list` answer seen listed without an `outputSchema`: a result
    /// that is not an error need not match one.
    listed_unstructured: RwLock<HashSet<String>>,
    /// The `Mcp-Param-*` headers each tool declared in the last listing seen of it.
    param_headers: RwLock<HashMap<String, Arc<[ParamHeader]>>>,
}

impl Clone for ToolPolicy {
    fn clone(&self) -> Self {
        Self {
            configured: self.configured.clone(),
            declared_read_only: RwLock::new(self.read_only_snapshot()),
            listed_unstructured: RwLock::new(
                self.listed_unstructured
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
            param_headers: RwLock::new(
                self.param_headers
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
        }
    }
}

impl ToolPolicy {
    fn read_only_snapshot(&self) -> HashSet<String> {
        self.declared_read_only
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn rule_mut(&mut self, tool: &str) -> &mut ToolRule {
        self.configured.entry(tool.to_owned()).or_default()
    }

    /// Whether calls of `tool` pass through unprotected.
    pub(crate) fn passes_through(&self, tool: &str) -> bool {
        if let Some(pass) = self.configured.get(tool).and_then(|rule| rule.pass_through) {
            return pass;
        }
        self.declared_read_only
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    /// Whether `tool` was listed through the layer without an output schema, so that a
    /// result of the layer's that is not an error is valid for it. A tool not listed here
    /// may declare one, which such a result would have to match: clients check.
    pub(crate) fn listed_without_output_schema(&self, tool: &str) -> bool {
        self.listed_unstructured
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    /// The `Mcp-Param-*` headers `tool` declares, if a listing of it was seen.
    pub(crate) fn param_headers(&self, tool: &str) -> Option<Arc<[ParamHeader]>> {
        self.param_headers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .cloned()
    }

    /// Notes that the server's listing does not name `tool`: like the server, the layer
    /// checks no `Mcp-Param-*` header of it, until a listing names it.
    pub(crate) fn learn_unlisted(&self, tool: &str) {
        self.param_headers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.to_owned(), Arc::from([]));
    }

    /// The deadline and retention configured for `tool`.
    pub(crate) fn timing(&self, tool: &str) -> Timing {
        self.configured
            .get(tool)
            .map(|rule| rule.timing)
            .unwrap_or_default()
    }

    /// Learns the annotations of a `tools/list` result: each listed tool is read-only or
    /// not, has an output schema or not, and declares `Mcp-Param-*` headers, as it now
    /// declares. A paginated listing only updates the tools it lists.
    pub(crate) fn learn(&self, result: &Map<String, Value>) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else {
            return;
        };
        let mut read_only = self
            .declared_read_only
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut unstructured = self
            .listed_unstructured
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut params = self
            .param_headers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let declared = tool
                .pointer("/annotations/readOnlyHint")
                .and_then(Value::as_bool)
                == Some(true);
            if declared {
                read_only.insert(name.to_owned());
            } else {
                read_only.remove(name);
            }
            if tool
                .get("outputSchema")
                .is_some_and(|schema| !schema.is_null())
            {
                unstructured.remove(name);
            } else {
                unstructured.insert(name.to_owned());
            }
            let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
            params.insert(name.to_owned(), param_headers::declared(schema).into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert!(!policy.passes_through("search"));
        policy.learn(listing().as_object().unwrap());
        assert!(policy.passes_through("search"));
        assert!(!policy.passes_through("send_email"));
        assert!(!policy.passes_through("pay"));
    }

    #[test]
    fn only_tools_listed_without_an_output_schema_take_results_without_one() {
        let policy = ToolPolicy::default();
        assert!(
            !policy.listed_without_output_schema("pay"),
            "not listed yet"
        );
        let listing = json!({"tools": [
            {"name": "pay"},
            {"name": "report", "outputSchema": {"type": "object"}},
        ]});
        policy.learn(listing.as_object().unwrap());
        assert!(policy.listed_without_output_schema("pay"));
        assert!(!policy.listed_without_output_schema("report"));
        let relisted = json!({"tools": [{"name": "pay", "outputSchema": {"type": "object"}}]});
        policy.learn(relisted.as_object().unwrap());
        assert!(!policy.listed_without_output_schema("pay"));
    }

    #[test]
    fn configuration_overrides_what_the_server_declares() {
        let mut policy = ToolPolicy::default();
        policy.rule_mut("search").pass_through = Some(false);
        policy.rule_mut("pay").pass_through = Some(true);
        policy.learn(listing().as_object().unwrap());
        assert!(!policy.passes_through("search"));
        assert!(policy.passes_through("pay"));
    }

    #[test]
    fn a_tool_no_longer_declared_read_only_is_protected_again() {
        let policy = ToolPolicy::default();
        policy.learn(listing().as_object().unwrap());
        policy.learn(json!({"tools": [{"name": "search"}]}).as_object().unwrap());
        assert!(!policy.passes_through("search"));
    }
}
