//! A tool's `inputSchema`, as its listing declared it: compiled once, at the first call
//! checked against it, and what in a call's arguments breaks it, each violation named by its
//! JSON Pointer as the contract layer names them.

use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::contract::Violation;

/// The most violations one answer names; past them, it says there are more.
pub(crate) const MOST_NAMED: usize = 10;

/// A tool's `inputSchema` as its listing declared it, compiled at the first call checked
/// against it, once: a listing that declares it again keeps it, compiled.
pub(crate) struct ArgumentSchema {
    schema: Value,
    /// `None` where the schema does not compile: the tool's calls then pass unchecked.
    compiled: OnceLock<Option<jsonschema::Validator>>,
}

impl std::fmt::Debug for ArgumentSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentSchema")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl ArgumentSchema {
    /// The schema a listing declares (none for a tool listed without one): `known`, where
    /// the tool declared this very schema before.
    pub(crate) fn kept(known: Option<&Arc<Self>>, schema: &Value) -> Option<Arc<Self>> {
        if schema.is_null() {
            return None;
        }
        if let Some(known) = known.filter(|known| known.schema == *schema) {
            return Some(Arc::clone(known));
        }
        let fresh = Self {
            schema: schema.clone(),
            compiled: OnceLock::new(),
        };
        Some(Arc::new(fresh))
    }

    /// The schema compiled, formats such as `email` checked, as the contract layer checks
    /// them; `None` (said once in the log) where it does not compile.
    fn validator(&self, tool: &str) -> Option<&jsonschema::Validator> {
        let compiled = self.compiled.get_or_init(|| {
            let built = jsonschema::options()
                .should_validate_formats(true)
                .build(&self.schema);
            built
                .inspect_err(|error| {
                    tracing::warn!(
                        tool,
                        %error,
                        "an MCP tool's inputSchema does not compile: its calls' arguments are \
                         not checked, and pass on to the server"
                    );
                })
                .ok()
        });
        compiled.as_ref()
    }

    /// What in `arguments` breaks the schema, each place once and at most [`MOST_NAMED`]
    /// of them, in the order of their JSON Pointers, and whether there were more; nothing
    /// where they match it or where the schema does not compile.
    pub(crate) fn violations(&self, tool: &str, arguments: &Value) -> (Vec<Violation>, bool) {
        let Some(validator) = self.validator(tool) else {
            return (Vec::new(), false);
        };
        let mut found: Vec<Violation> = Vec::new();
        for error in validator.iter_errors(arguments) {
            let violation = Violation::of(&error);
            let again = found
                .iter()
                .any(|seen| seen.field == violation.field && seen.problem == violation.problem);
            if again {
                continue;
            }
            if found.len() == MOST_NAMED {
                return (in_order(found), true);
            }
            found.push(violation);
        }
        (in_order(found), false)
    }
}

fn in_order(mut violations: Vec<Violation>) -> Vec<Violation> {
    violations.sort_by(|a, b| a.field.cmp(&b.field));
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Arc<ArgumentSchema> {
        let schema = json!({
            "type": "object",
            "properties": {
                "to": { "type": "string", "format": "email" },
                "count": { "type": "integer", "minimum": 1 }
            },
            "required": ["to"]
        });
        ArgumentSchema::kept(None, &schema).unwrap()
    }

    fn named(arguments: Value) -> Vec<String> {
        let (violations, _) = schema().violations("send", &arguments);
        violations.iter().map(Violation::pointed).collect()
    }

    #[test]
    fn each_violation_is_named_by_its_json_pointer() {
        assert_eq!(
            named(json!({"to": "bob@example.com", "count": 0})),
            ["/count: is below the minimum of 1"]
        );
        assert_eq!(named(json!({"count": 2})), ["/to: is required but missing"]);
        assert_eq!(
            named(json!({"to": "not an address", "count": "two"})),
            [
                "/count: has the wrong type (the schema asks for integer)",
                "/to: is not a valid email",
            ]
        );
        assert_eq!(
            named(json!([1])),
            ["the arguments: has the wrong type (the schema asks for object)"]
        );
        assert!(named(json!({"to": "bob@example.com", "count": 3})).is_empty());
    }

    #[test]
    fn a_schema_that_does_not_compile_checks_nothing() {
        let broken = json!({"type": "object", "properties": {"to": {"type": 12}}});
        let schema = ArgumentSchema::kept(None, &broken).unwrap();
        let (violations, more) = schema.violations("send", &json!({"to": 1}));
        assert!(violations.is_empty() && !more);
    }

    #[test]
    fn a_schema_listed_again_unchanged_is_kept_compiled() {
        let first = schema();
        let _ = first.violations("send", &json!({}));
        let again = ArgumentSchema::kept(Some(&first), &first.schema).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        let changed = ArgumentSchema::kept(Some(&first), &json!({"type": "object"})).unwrap();
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(
            ArgumentSchema::kept(Some(&first), &Value::Null).map(|_| ()),
            None
        );
    }

    #[test]
    fn past_the_most_named_there_are_said_to_be_more() {
        let properties: serde_json::Map<String, Value> = (0..15)
            .map(|n| (format!("p{n}"), json!({"type": "string"})))
            .collect();
        let required: Vec<String> = properties.keys().cloned().collect();
        let schema = json!({"type": "object", "properties": properties, "required": required});
        let schema = ArgumentSchema::kept(None, &schema).unwrap();
        let (violations, more) = schema.violations("many", &json!({}));
        assert_eq!(violations.len(), MOST_NAMED);
        assert!(more);
    }
}
