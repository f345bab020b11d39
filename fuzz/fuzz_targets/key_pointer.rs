//! The explicit key field's JSON pointer, from arbitrary text (before the first NUL byte), and
//! the key it reads from a JSON body (after it): a pointer that parses writes back as its text
//! and its tokens escape back to it, and the key read is the value RFC 6901 names, as
//! serde_json finds it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tower_idempotency::canonical::{to_canonical_vec, JsonPointer};
use tower_idempotency::fuzzing::key_field;
use tower_idempotency::key::ExplicitKey;

fn escaped(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|token| format!("/{}", token.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let Ok(text) = std::str::from_utf8(parts.next().unwrap_or_default()) else {
        return;
    };
    let body = parts.next().unwrap_or_default();
    let Ok(pointer) = text.parse::<JsonPointer>() else {
        return;
    };
    assert_eq!(pointer.to_string(), text, "written back as its text");
    assert_eq!(
        escaped(pointer.tokens()),
        text,
        "its tokens escape back to it"
    );
    let key = key_field(&pointer, body);
    // Compared where both read the body: strict JSON (each member named once) that
    // serde_json holds.
    let (Ok(_), Ok(value)) = (
        to_canonical_vec(body),
        serde_json::from_slice::<Value>(body),
    ) else {
        return;
    };
    let expected = match value.pointer(text) {
        None => None,
        Some(Value::String(text)) => Some(text.parse::<ExplicitKey>()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string().parse()),
        // A number serde_json holds as a double: its digits are not the ones written.
        Some(Value::Number(_)) => return,
        Some(_) => Some("".parse()),
    };
    assert_eq!(
        key.map(|k| k.map(|k| k.as_str().to_owned())),
        expected.map(|k| k.map(|k| k.as_str().to_owned())),
        "the key at {text}"
    );
});
