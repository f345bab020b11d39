//! A `tools/call`'s arguments checked against the `inputSchema` its tool was listed with
//! ([`McpIdempotencyLayer::validate_arguments`](super::McpIdempotencyLayer::validate_arguments)):
//! a call whose arguments break it is answered at once, as a tool execution error
//! (`isError: true`, which the protocol asks for arguments that do not validate, so that the
//! model can correct itself) naming each violation by JSON Pointer. It never reaches the
//! server, claims no intent and is kept nowhere.

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use super::answers;
use super::call::op_of;
use super::endpoint::Endpoint;
use super::envelope::ToolCall;
use super::era::Era;
use super::listing::Server;
use super::message::{self, Form};
use crate::body::ResponseBody;
use crate::contract::Violation;
use crate::store::Store;
use crate::telemetry;

/// The answer to `call` on `server` where its arguments break the `inputSchema` its tool
/// was listed with, written for `era` in `form` and counted; `None` where they match, or
/// where nothing is known to check them by (a tool never listed, or listed without a schema
/// that compiles), and the call goes on.
pub(crate) fn refusal<St: Store, B>(
    endpoint: &Endpoint<St>,
    (parts, bytes): (&Parts, &Bytes),
    (call, server): (&ToolCall, Server),
    (era, form): (Era, Form),
) -> Option<Response<ResponseBody<B>>> {
    if !endpoint.policy.validates_arguments {
        return None;
    }
    let listings = &endpoint.policy.listings;
    let schema = listings
        .tool(server, &call.name, |listed| listed.arguments.clone())
        .flatten()?;
    let op = op_of(endpoint, parts, call);
    telemetry::arguments_checked(&op);
    let arguments = arguments_of(bytes)?;
    let (violations, more) = schema.violations(&call.name, &arguments);
    let first = violations.first()?;
    telemetry::arguments_rejected(&op, first.reason);
    let text = told(&violations, more);
    let result = json!({
        "content": [{ "type": "text", "text": text }],
        "isError": true,
    });
    let mut message = answers::result(&call.id, result);
    era.fit(&mut message);
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Some(message::write(&message, form, headers).map(ResponseBody::full))
}

/// A call's arguments: `params.arguments`, where an absent (or null) one is `{}`; `None`
/// where the body cannot be read so (the envelope was read from it already).
fn arguments_of(bytes: &[u8]) -> Option<Value> {
    #[derive(Deserialize)]
    struct Call {
        params: Params,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(default)]
        arguments: Option<Value>,
    }
    let call: Call = serde_json::from_slice(bytes).ok()?;
    Some(call.params.arguments.unwrap_or_else(|| json!({})))
}

/// What the layer tells the model of arguments that break the tool's schema: first what
/// happened and whether calling again is safe, then each violation by JSON Pointer.
fn told(violations: &[Violation], more: bool) -> String {
    let mut text = String::from(
        "The tool was not run because its arguments do not match the tool's inputSchema; \
         it can be called again once they are corrected (called with the same arguments, it \
         would be refused again). What does not match, by JSON Pointer into the arguments:",
    );
    for violation in violations {
        text.push('\n');
        text.push_str(&violation.pointed());
    }
    if more {
        text.push_str("\n(and more past these)");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::input_schema::ArgumentSchema;

    fn violations(arguments: &Value) -> (Vec<Violation>, bool) {
        let schema = json!({
            "type": "object",
            "properties": {
                "to": { "type": "string", "format": "email" },
                "count": { "type": "integer", "minimum": 1 }
            },
            "required": ["to"]
        });
        let schema = ArgumentSchema::kept(None, &schema).unwrap();
        schema.violations("send", arguments)
    }

    #[test]
    fn the_words_say_first_that_the_tool_did_not_run_and_can_be_called_again_corrected() {
        let (violations, more) = violations(&json!({"count": 0}));
        let text = told(&violations, more);
        let (first, rest) = text.split_once("; ").unwrap();
        assert_eq!(
            first,
            "The tool was not run because its arguments do not match the tool's inputSchema"
        );
        assert!(rest.starts_with("it can be called again once they are corrected"));
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "/count: is below the minimum of 1",
                "/to: is required but missing"
            ]
        );
        assert!(told(&violations, true).ends_with("\n(and more past these)"));
    }

    #[test]
    fn absent_arguments_are_checked_as_an_empty_object() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send"}}"#;
        let arguments = arguments_of(body).unwrap();
        assert_eq!(arguments, json!({}));
        let null = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"send","arguments":null}}"#;
        assert_eq!(arguments_of(null).unwrap(), json!({}));
        let (named, _) = violations(&arguments);
        assert_eq!(named[0].pointed(), "/to: is required but missing");
    }
}
