//! Crossing between the canonical tree and `serde_json::Value`, for the normalisation hook.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use super::{CanonicalError, Node, Text};

/// Converts a tree into a `Value`. Integers that fit no 64-bit type cannot cross exactly, so
/// they are refused rather than rounded.
pub(crate) fn to_value(node: &Node<'_>) -> Result<Value, CanonicalError> {
    Ok(match node {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        // `-0` has no integer in serde_json: it would cross as `0`, another intent.
        Node::Integer(digits) if digits.as_ref() == "-0" => {
            return Err(CanonicalError::NumberOutOfRange)
        }
        Node::Integer(digits) => {
            if let Ok(n) = digits.parse::<u64>() {
                Value::Number(n.into())
            } else if let Ok(n) = digits.parse::<i64>() {
                Value::Number(n.into())
            } else {
                return Err(CanonicalError::NumberOutOfRange);
            }
        }
        Node::Double(d) => {
            Value::Number(Number::from_f64(*d).ok_or(CanonicalError::NumberOutOfRange)?)
        }
        Node::String(s) => Value::String(s.as_str().to_owned()),
        Node::Array(items) => Value::Array(items.iter().map(to_value).collect::<Result<_, _>>()?),
        Node::Object(members) => {
            let mut map = Map::new();
            for (name, value) in members {
                map.insert(name.as_str().to_owned(), to_value(value)?);
            }
            Value::Object(map)
        }
    })
}

/// Converts a `Value` back into a tree, borrowing its strings.
pub(crate) fn from_value(value: &Value) -> Result<Node<'_>, CanonicalError> {
    Ok(match value {
        Value::Null => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                Node::Integer(Cow::Owned(u.to_string()))
            } else if let Some(i) = n.as_i64() {
                Node::Integer(Cow::Owned(i.to_string()))
            } else {
                let d = n.as_f64().ok_or(CanonicalError::NumberOutOfRange)?;
                if !d.is_finite() {
                    return Err(CanonicalError::NumberOutOfRange);
                }
                Node::Double(d)
            }
        }
        Value::String(s) => Node::String(Text::Decoded(Cow::Borrowed(s))),
        Value::Array(items) => Node::Array(items.iter().map(from_value).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            let mut members = map
                .iter()
                .map(|(k, v)| Ok((Text::Decoded(Cow::Borrowed(k.as_str())), from_value(v)?)))
                .collect::<Result<Vec<_>, CanonicalError>>()?;
            members.sort_by(|a, b| super::order::utf16_cmp(a.0.as_str(), b.0.as_str()));
            Node::Object(members)
        }
    })
}
