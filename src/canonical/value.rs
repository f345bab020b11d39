//! Crossing between the canonical tree and `serde_json::Value`, for the normalisation hook.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use super::number::parse_double;
use super::tree::Builder;
use super::{CanonicalError, Node, TapeIndex, Text, Tree, ROOT};

/// Converts a tree into a `Value`. Integers that fit no 64-bit type cannot cross exactly, so
/// they are refused rather than rounded.
pub(crate) fn to_value(tree: &Tree<'_>) -> Result<Value, CanonicalError> {
    value_at(tree, ROOT)
}

fn value_at(tree: &Tree<'_>, place: TapeIndex) -> Result<Value, CanonicalError> {
    Ok(match tree.node(place) {
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
        Node::Double(d) => double(*d)?,
        Node::Decimal(literal) => double(parse_double(literal)?)?,
        Node::String(s) => Value::String(s.as_str().to_owned()),
        Node::Array { .. } => Value::Array(
            tree.children(place)
                .map(|item| value_at(tree, item))
                .collect::<Result<_, _>>()?,
        ),
        Node::Object(_) => {
            let mut map = Map::new();
            for member in tree.children(place) {
                let name = tree.name(member).map_or("", Text::as_str);
                map.insert(name.to_owned(), value_at(tree, member)?);
            }
            Value::Object(map)
        }
        // Never met: children left out are skipped, and no pointer names the root.
        Node::Removed { .. } => Value::Null,
    })
}

/// A finite double as a JSON number.
fn double(value: f64) -> Result<Value, CanonicalError> {
    Ok(Value::Number(
        Number::from_f64(value).ok_or(CanonicalError::NumberOutOfRange)?,
    ))
}

/// Converts a `Value` back into a tree, borrowing its strings.
pub(crate) fn from_value(value: &Value) -> Result<Tree<'_>, CanonicalError> {
    let mut tree = Builder::new(0);
    put(value, ROOT, &mut tree)?;
    Ok(tree.finish())
}

/// Writes `value` into the entry at `at` of `tree`, and its contents after it.
fn put<'a>(value: &'a Value, at: TapeIndex, tree: &mut Builder<'a>) -> Result<(), CanonicalError> {
    let node = match value {
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
        Value::Array(items) => {
            for item in items {
                let place = tree.push(None);
                put(item, place, tree)?;
            }
            tree.close_array(at);
            return Ok(());
        }
        Value::Object(map) => {
            for (name, value) in map {
                let place = tree.push(Some(Text::Decoded(Cow::Borrowed(name.as_str()))));
                put(value, place, tree)?;
            }
            return tree.close_object(at);
        }
    };
    tree.set(at, node);
    Ok(())
}
