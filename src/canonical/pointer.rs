//! RFC 6901 JSON Pointers, used to leave fields out of a fingerprint or to read an explicit key.

use std::fmt;
use std::str::FromStr;

use super::{Node, TapeIndex, Tree, ROOT};

/// A JSON Pointer such as `/tool_call_id` or `/meta/request_id`.
///
/// ```
/// use tower_idempotency::canonical::JsonPointer;
///
/// let pointer: JsonPointer = "/a~1b/0".parse().unwrap();
/// assert_eq!(pointer.tokens(), ["a/b", "0"]);
/// assert!("no-leading-slash".parse::<JsonPointer>().is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct JsonPointer {
    text: String,
    tokens: Vec<String>,
}

/// The text is not a JSON Pointer (RFC 6901).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPointer(String);

impl fmt::Display for InvalidPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a JSON Pointer", self.0)
    }
}

impl std::error::Error for InvalidPointer {}

impl FromStr for JsonPointer {
    type Err = InvalidPointer;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidPointer(text.to_owned());
        if text.is_empty() {
            // The whole document: accepted by RFC 6901 but meaningless to leave out.
            return Err(invalid());
        }
        let rest = text.strip_prefix('/').ok_or_else(invalid)?;
        let tokens = rest
            .split('/')
            .map(|raw| unescape(raw).ok_or_else(invalid))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            text: text.to_owned(),
            tokens,
        })
    }
}

fn unescape(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next()? {
                '0' => out.push('~'),
                '1' => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

impl fmt::Debug for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl JsonPointer {
    /// The reference tokens, unescaped.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// Leaves out the value the pointer names, if there is one, and returns it.
    pub(crate) fn remove<'a>(&self, tree: &mut Tree<'a>) -> Option<Node<'a>> {
        let place = self
            .tokens
            .iter()
            .try_fold(ROOT, |place, token| child(tree, place, token))?;
        Some(tree.remove(place))
    }

    /// Leaves out the object the pointer names if nothing is left in it (its members all
    /// left out, or none written): an emptied object counts as absent.
    fn remove_if_empty(&self, tree: &mut Tree<'_>) {
        let place = self
            .tokens
            .iter()
            .try_fold(ROOT, |place, token| child(tree, place, token));
        if let Some(place) = place {
            if matches!(tree.node(place), Node::Object(_)) && tree.children(place).next().is_none()
            {
                tree.remove(place);
            }
        }
    }
}

impl JsonPointer {
    /// Whether the value the pointer names is the string `expected`.
    pub(crate) fn names_string(&self, tree: &Tree<'_>, expected: &str) -> bool {
        let place = self
            .tokens
            .iter()
            .try_fold(ROOT, |place, token| child(tree, place, token));
        place.is_some_and(
            |place| matches!(tree.node(place), Node::String(text) if text.as_str() == expected),
        )
    }
}

/// Leaves out of `tree` what each of `ignored` names, then each of `emptied` that names an
/// object left empty: an emptied object counts as absent.
pub(crate) fn leave_out(tree: &mut Tree<'_>, ignored: &[JsonPointer], emptied: &[JsonPointer]) {
    for pointer in ignored {
        pointer.remove(tree);
    }
    for pointer in emptied {
        pointer.remove_if_empty(tree);
    }
}

/// An array index as RFC 6901 writes it: `0`, or digits without a leading zero (no sign,
/// which `usize`'s parser would take).
fn index(token: &str) -> Option<usize> {
    let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
    if !digits || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    token.parse().ok()
}

/// The place of the child that `token` names of the value at `place`.
fn child(tree: &Tree<'_>, place: TapeIndex, token: &str) -> Option<TapeIndex> {
    match tree.node(place) {
        Node::Object(_) => tree
            .children(place)
            .find(|&member| tree.name(member).is_some_and(|name| name.as_str() == token)),
        Node::Array { .. } => tree.children(place).nth(index(token)?),
        _ => None,
    }
}

/// A pointer a builder was given: a malformed one is the program's own mistake, so it panics,
/// naming the layer.
pub(crate) fn parse_pointer(pointer: &str) -> JsonPointer {
    pointer
        .parse()
        .unwrap_or_else(|error| panic!("IdempotencyLayer: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{emit, parse, NumberKinds};

    fn without(json: &str, pointer: &str) -> String {
        let mut tree = parse(json.as_bytes()).unwrap();
        pointer.parse::<JsonPointer>().unwrap().remove(&mut tree);
        let mut out = Vec::new();
        emit(&tree, NumberKinds::Distinct, &mut out);
        String::from_utf8(out).unwrap()
    }

    fn without_if_empty(json: &str, pointer: &str) -> String {
        let mut tree = parse(json.as_bytes()).unwrap();
        let pointer = pointer.parse::<JsonPointer>().unwrap();
        pointer.remove_if_empty(&mut tree);
        let mut out = Vec::new();
        emit(&tree, NumberKinds::Distinct, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_emptied_object_is_left_out_and_one_with_members_kept() {
        let mut tree = parse(br#"{"m":{"t":1},"a":2}"#).unwrap();
        "/m/t".parse::<JsonPointer>().unwrap().remove(&mut tree);
        "/m".parse::<JsonPointer>()
            .unwrap()
            .remove_if_empty(&mut tree);
        let mut out = Vec::new();
        emit(&tree, NumberKinds::Distinct, &mut out);
        assert_eq!(out, br#"{"a":2}"#);
        assert_eq!(without_if_empty(r#"{"m":{},"a":2}"#, "/m"), r#"{"a":2}"#);
        assert_eq!(
            without_if_empty(r#"{"m":{"k":1},"a":2}"#, "/m"),
            r#"{"a":2,"m":{"k":1}}"#
        );
        assert_eq!(
            without_if_empty(r#"{"m":[],"a":2}"#, "/m"),
            r#"{"a":2,"m":[]}"#
        );
    }

    #[test]
    fn removes_members_at_any_depth() {
        assert_eq!(without(r#"{"a":1,"id":"x"}"#, "/id"), r#"{"a":1}"#);
        assert_eq!(
            without(r#"{"m":{"id":2,"k":3}}"#, "/m/id"),
            r#"{"m":{"k":3}}"#
        );
        assert_eq!(without(r#"{"l":[1,2,3]}"#, "/l/1"), r#"{"l":[1,3]}"#);
        assert_eq!(without(r#"{"a/b":1,"c":2}"#, "/a~1b"), r#"{"c":2}"#);
    }

    #[test]
    fn a_later_index_counts_the_items_left_after_an_earlier_removal() {
        let tree = |pointers: &[&str]| {
            let mut tree = parse(br#"{"l":[1,2,3],"k":[4,5]}"#).unwrap();
            for pointer in pointers {
                pointer.parse::<JsonPointer>().unwrap().remove(&mut tree);
            }
            let mut out = Vec::new();
            emit(&tree, NumberKinds::Distinct, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(tree(&["/l/0", "/l/0"]), r#"{"k":[4,5],"l":[3]}"#);
        assert_eq!(tree(&["/l/1", "/l/1"]), r#"{"k":[4,5],"l":[1]}"#);
        assert_eq!(tree(&["/l/2", "/l/2"]), r#"{"k":[4,5],"l":[1,2]}"#);
        assert_eq!(tree(&["/k", "/k/0"]), r#"{"l":[1,2,3]}"#);
    }

    #[test]
    fn missing_targets_leave_the_document_alone() {
        assert_eq!(without(r#"{"a":1}"#, "/b"), r#"{"a":1}"#);
        assert_eq!(without(r#"[1]"#, "/01"), r#"[1]"#);
        assert_eq!(without(r#""s""#, "/x"), r#""s""#);
    }

    #[test]
    fn an_array_index_is_digits_alone_without_a_sign() {
        assert_eq!(without(r#"[1,2]"#, "/+1"), r#"[1,2]"#);
        assert_eq!(
            without(r#"{"items":[0,16]}"#, "/items/+0000"),
            r#"{"items":[0,16]}"#
        );
        assert_eq!(without(r#"[1,2]"#, "/1"), r#"[1]"#);
    }

    #[test]
    fn malformed_pointers_are_refused() {
        for text in ["", "a", "/~2", "/~"] {
            assert!(text.parse::<JsonPointer>().is_err(), "{text:?}");
        }
    }
}
