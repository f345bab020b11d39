//! What a Streamable HTTP POST body holds, as far as the layer cares: a `tools/call` to
//! protect, a `tools/list` whose answer names the read-only tools, or anything else.

use serde_json::{Map, Value};

/// The JSON-RPC method of a tool call.
pub(crate) const TOOLS_CALL: &str = "tools/call";
/// The JSON-RPC method that lists the tools.
pub(crate) const TOOLS_LIST: &str = "tools/list";

/// One POST body, classified.
#[derive(Debug)]
pub(crate) enum Envelope {
    /// A well-formed `tools/call` request.
    ToolCall(ToolCall),
    /// A `tools/list` request, answered by the tool list with its annotations.
    ToolsList { id: Value },
    /// A `tools/call` the layer will not run: answered at once, nothing executed.
    Refused(Refusal),
    /// Anything else (other methods, notifications, responses, bodies that are not JSON):
    /// passed through untouched.
    Other,
}

/// The parts of a `tools/call` request the layer answers with.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    /// The JSON-RPC id of this attempt: every answer carries it back.
    pub(crate) id: Value,
    /// `params.name`.
    pub(crate) name: String,
}

/// Why a `tools/call` is refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// A JSON-RPC batch holding a `tools/call`: Streamable HTTP carries one message per POST.
    Batch,
    /// A `tools/call` without an id: a request sent as a notification.
    Notification,
    /// An id that is neither a string nor a number.
    BadId,
    /// No `params`, or no string `params.name`.
    NoToolName { id: Value },
}

/// Reads a POST body.
pub(crate) fn read(body: &[u8]) -> Envelope {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(message)) => read_message(message),
        Ok(Value::Array(batch)) if batch.iter().any(is_tool_call) => {
            Envelope::Refused(Refusal::Batch)
        }
        _ => Envelope::Other,
    }
}

fn is_tool_call(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some(TOOLS_CALL)
}

fn read_message(mut message: Map<String, Value>) -> Envelope {
    let method = message.get("method").and_then(Value::as_str);
    let wanted = matches!(method, Some(TOOLS_CALL | TOOLS_LIST));
    if !wanted {
        return Envelope::Other;
    }
    let listing = method == Some(TOOLS_LIST);
    let id = match message.remove("id") {
        None => {
            return if listing {
                Envelope::Other
            } else {
                Envelope::Refused(Refusal::Notification)
            }
        }
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) if listing => return Envelope::Other,
        Some(_) => return Envelope::Refused(Refusal::BadId),
    };
    if listing {
        return Envelope::ToolsList { id };
    }
    let name = message
        .get("params")
        .and_then(|params| params.get("name"))
        .and_then(Value::as_str);
    match name {
        Some(name) => Envelope::ToolCall(ToolCall {
            name: name.to_owned(),
            id,
        }),
        None => Envelope::Refused(Refusal::NoToolName { id }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_str(body: &str) -> Envelope {
        read(body.as_bytes())
    }

    #[test]
    fn a_tool_call_yields_its_id_and_tool_name() {
        let body = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"send_email","arguments":{}}}"#;
        let Envelope::ToolCall(call) = read_str(body) else {
            panic!("not a tool call")
        };
        assert_eq!(call.id, Value::from("a-1"));
        assert_eq!(call.name, "send_email");
    }

    #[test]
    fn other_methods_notifications_and_non_json_pass_through() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "not json",
            "",
        ] {
            assert!(matches!(read_str(body), Envelope::Other), "{body}");
        }
    }

    #[test]
    fn malformed_tool_calls_are_refused() {
        let cases = [
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]"#,
                Refusal::Batch,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
                Refusal::Notification,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"n":1},"method":"tools/call","params":{"name":"x"}}"#,
                Refusal::BadId,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#,
                Refusal::NoToolName { id: 3.into() },
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":7}}"#,
                Refusal::NoToolName { id: 3.into() },
            ),
        ];
        for (body, refusal) in cases {
            match read_str(body) {
                Envelope::Refused(found) => assert_eq!(found, refusal, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_tool_listing_is_recognised() {
        let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;
        assert!(matches!(read_str(body), Envelope::ToolsList { id } if id == 9));
    }
}
