//! Deterministic JSON documents of a chosen size, shaped like tool-call arguments.

use serde_json::{json, Value};

/// A JSON object of at least `bytes` bytes: records with strings, numbers, flags and tags.
pub fn document(bytes: usize, salt: u64) -> String {
    let mut records = Vec::new();
    let mut text = String::new();
    let mut n = 0u64;
    while text.len() < bytes {
        records.push(json!({
            "id": n * 7919 + salt,
            "name": format!("record {n} for the report on quarterly revenue"),
            "amount": (n as f64) * 1.25 + 0.1,
            "active": n.is_multiple_of(2),
            "tags": ["alpha", "beta", format!("t{}", n % 13)],
            "owner": { "email": format!("user{n}@example.com"), "team": "finance" },
        }));
        n += 1;
        text = Value::Array(records.clone()).to_string();
    }
    json!({ "tool_call_id": format!("call_{salt}"), "records": records }).to_string()
}
