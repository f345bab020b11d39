//! `Mcp-Param-*` headers (2026-07-28): the tool arguments a tool's `inputSchema` asks clients
//! to repeat in headers (`x-mcp-header` on a property), and the check a server makes of them
//! before it runs a call: each declared header there when its argument is, and absent when it
//! is not, once, and equal to the argument after decoding. Headers no schema declares are not
//! the server's to check.

use http::HeaderMap;
use serde_json::{Map, Value};

use super::era::decode_header_value;

/// The schema member that names a property's header.
const ANNOTATION: &str = "x-mcp-header";
/// What a declared header's name starts with.
pub(crate) const PREFIX: &str = "mcp-param-";

/// One header a tool declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamHeader {
    /// The `properties` keys from the schema's root to the argument.
    path: Vec<String>,
    /// The header's name, lowercased: `mcp-param-` and the annotation.
    name: String,
    /// The header's name as the tool declares it, for the words of a refusal.
    shown: String,
    /// Whether the argument is an integer, compared as a number.
    integer: bool,
}

/// What a request's headers come to against its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Agreement {
    /// The server would accept them.
    Agrees,
    /// The server refuses the request for this header (its name as declared).
    Refused(String),
    /// An argument the layer cannot render as surely as the server does (a number that is
    /// not an integer): only the server can tell.
    Unsure,
}

/// JSON Schema keywords whose values are schemas off the `properties` chain.
const ONE_SCHEMA: [&str; 11] = [
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
const SCHEMA_MAPS: [&str; 4] = [
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];

/// The headers `schema` declares; none where an annotation breaks the protocol's rules (off
/// the `properties` chain, not a token, not on a string, integer or boolean, or a name
/// twice), for clients then drop the tool and servers check nothing of it.
pub(crate) fn declared(schema: &Value) -> Vec<ParamHeader> {
    let mut found: Vec<ParamHeader> = Vec::new();
    let mut stack: Vec<(Option<Vec<String>>, &Value)> = vec![(Some(Vec::new()), schema)];
    while let Some((path, node)) = stack.pop() {
        let Value::Object(node) = node else { continue };
        if let Some(annotation) = node.get(ANNOTATION) {
            match header_of(path.as_deref(), annotation, node) {
                Some(header) if found.iter().all(|other| other.name != header.name) => {
                    found.push(header);
                }
                _ => return Vec::new(),
            }
        }
        for (keyword, value) in node {
            let kw = keyword.as_str();
            if kw == "properties" {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    let deeper = path.as_ref().map(|path| {
                        let mut path = path.clone();
                        path.push(name.clone());
                        path
                    });
                    stack.push((deeper, sub));
                }
            } else if ONE_SCHEMA.contains(&kw) {
                stack.push((None, value));
            } else if SCHEMA_LISTS.contains(&kw) {
                stack.extend(value.as_array().into_iter().flatten().map(|s| (None, s)));
            } else if SCHEMA_MAPS.contains(&kw) {
                stack.extend(
                    value
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(_, s)| (None, s)),
                );
            }
        }
    }
    found
}

/// The header one annotation declares, if it is a valid one.
fn header_of(
    path: Option<&[String]>,
    annotation: &Value,
    node: &Map<String, Value>,
) -> Option<ParamHeader> {
    let path = path.filter(|path| !path.is_empty())?;
    let token = annotation.as_str().filter(|token| is_token(token))?;
    let kind = node.get("type").and_then(Value::as_str)?;
    if !["string", "integer", "boolean"].contains(&kind) {
        return None;
    }
    Some(ParamHeader {
        path: path.to_vec(),
        name: format!("{PREFIX}{}", token.to_ascii_lowercase()),
        shown: format!("Mcp-Param-{token}"),
        integer: kind == "integer",
    })
}

/// Whether `text` is an HTTP field-name token (RFC 9110 `1*tchar`).
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks the request's `headers` against its `arguments` for the `declared` headers.
pub(crate) fn check(
    declared: &[ParamHeader],
    arguments: Option<&Value>,
    headers: &HeaderMap,
) -> Agreement {
    for header in declared {
        let refused = || Agreement::Refused(header.shown.clone());
        let mut sent = headers.get_all(header.name.as_str()).iter();
        let (first, again) = (sent.next(), sent.next());
        if again.is_some() {
            return refused();
        }
        let value = arguments.and_then(|arguments| at(arguments, &header.path));
        let Some(value) = value.filter(|value| !value.is_null()) else {
            if first.is_some() {
                return refused();
            }
            continue;
        };
        let Some(first) = first else {
            // No header for a value that has one; a value that has none cannot be sent.
            return match rendered(value) {
                HeaderForm::Text(_) | HeaderForm::Unsure => refused(),
                HeaderForm::None => continue,
            };
        };
        let Some(decoded) = first.to_str().ok().and_then(decode_header_value) else {
            return refused();
        };
        let agrees = match rendered(value) {
            _ if header.integer && equal_integers(&decoded, value) => true,
            HeaderForm::Text(text) => decoded == text,
            HeaderForm::Unsure => return Agreement::Unsure,
            HeaderForm::None => false,
        };
        if !agrees {
            return refused();
        }
    }
    Agreement::Agrees
}

/// The argument at `path`, if every step is an object that has it.
fn at<'a>(arguments: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(arguments, |node, key| node.as_object()?.get(key))
}

/// An argument as a client writes it in its header.
enum HeaderForm {
    Text(String),
    /// Not a value a header carries (an object, an array).
    None,
    /// A number that is not an integer, whose writing the layer cannot vouch for.
    Unsure,
}

fn rendered(value: &Value) -> HeaderForm {
    match value {
        Value::String(text) => HeaderForm::Text(text.clone()),
        Value::Bool(flag) => HeaderForm::Text(flag.to_string()),
        Value::Number(n) if n.is_i64() || n.is_u64() => HeaderForm::Text(n.to_string()),
        Value::Number(_) => HeaderForm::Unsure,
        _ => HeaderForm::None,
    }
}

/// Whether a header's decimal (`42`, `42.0`, `-7`) is the integral number `value`, compared
/// as numbers, as the protocol asks of integer arguments.
fn equal_integers(decoded: &str, value: &Value) -> bool {
    let (whole, fraction) = decoded.split_once('.').unwrap_or((decoded, ""));
    let digits = whole.strip_prefix('-').unwrap_or(whole);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && fraction.bytes().all(|b| b == b'0')
        && fraction.is_empty() != decoded.contains('.');
    if !canonical {
        return false;
    }
    let Ok(header) = whole.parse::<i128>() else {
        return false;
    };
    match value {
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or(n.as_u64().map(i128::from))
            .or(n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 1e18)
                .map(|f| f as i128))
            .is_some_and(|body| body == header),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "where": {"type": "object", "properties": {
                "dry": {"type": "boolean", "x-mcp-header": "Dry"}}},
            "query": {"type": "string"},
        }})
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn only_annotations_the_protocol_allows_declare_headers() {
        let names: Vec<_> = declared(&schema()).into_iter().map(|h| h.shown).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains(&"Mcp-Param-Dry".to_owned()), "{names:?}");
        for broken in [
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A"},
                                  "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"properties": {"a": {"type": "array",
                                        "items": {"type": "string", "x-mcp-header": "A"}},
                                  "b": {"type": "string", "x-mcp-header": "B"}}}),
        ] {
            assert_eq!(declared(&broken), Vec::new(), "{broken}");
        }
    }

    #[test]
    fn each_declared_header_must_say_what_its_argument_says() {
        let declared = declared(&schema());
        let arguments = json!({"region": "eu", "limit": 42, "where": {"dry": true}, "query": "q"});
        let check = |pairs| check(&declared, Some(&arguments), &headers(pairs));
        let right = [
            ("mcp-param-region", "=?base64?ZXU=?="),
            ("mcp-param-limit", "42.0"),
            ("mcp-param-dry", "true"),
        ];
        assert_eq!(check(&right), Agreement::Agrees);
        let refused = |name: &str| Agreement::Refused(name.to_owned());
        let limit = [
            ("mcp-param-region", "eu"),
            ("mcp-param-limit", "42.5"),
            ("mcp-param-dry", "true"),
        ];
        assert_eq!(check(&limit), refused("Mcp-Param-Limit"));
        let missing = [("mcp-param-region", "eu"), ("mcp-param-limit", "42")];
        assert_eq!(check(&missing), refused("Mcp-Param-Dry"));
        let twice = [
            ("mcp-param-region", "eu"),
            ("mcp-param-region", "eu"),
            ("mcp-param-limit", "42"),
            ("mcp-param-dry", "true"),
        ];
        assert_eq!(check(&twice), refused("Mcp-Param-Region"));
        // A header whose argument is not there.
        let none = json!({"query": "q"});
        let stray = headers(&[("mcp-param-region", "eu")]);
        assert_eq!(
            super::check(&declared, Some(&none), &stray),
            refused("Mcp-Param-Region")
        );
        assert_eq!(
            super::check(&declared, Some(&none), &HeaderMap::new()),
            Agreement::Agrees
        );
        // A number that is not an integer is the server's to judge.
        let float = json!({"limit": 1.5});
        let sent = headers(&[("mcp-param-limit", "1.5")]);
        assert_eq!(
            super::check(&declared, Some(&float), &sent),
            Agreement::Unsure
        );
    }

    #[test]
    fn integers_are_compared_as_numbers_from_canonical_decimals_only() {
        assert!(equal_integers("42", &json!(42)));
        assert!(equal_integers("-7.00", &json!(-7)));
        assert!(equal_integers("3", &json!(3.0)));
        assert!(!equal_integers("42.", &json!(42)));
        assert!(!equal_integers("4.2e1", &json!(42)));
        assert!(!equal_integers("+42", &json!(42)));
    }
}
