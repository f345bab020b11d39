//! The layer's own answers in MCP terms: a `CallToolResult` whose text is the answer's
//! detail (what happened to the action, then whether calling again is safe), and JSON-RPC
//! errors for envelopes it will not run.

use serde_json::{json, Map, Value};

use super::envelope::EnvelopeRefusal;
use super::era::{self, Unservable};
use crate::key::IntentKey;
use crate::store::StoredResponse;
use crate::wording::Words;

/// JSON-RPC's "Internal error".
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC's "Parse error".
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's "Invalid Request".
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's "Invalid params".
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// The JSON-RPC response carrying `result` to the request `id`.
pub(crate) fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// The JSON-RPC error response to the request `id` (null where there is none).
pub(crate) fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": error })
}

/// What a layer answer puts in `structuredContent`: the outcome, whether calling again is
/// safe, and its members, less a status URL, which is for HTTP clients.
fn structured(told: &Words) -> Map<String, Value> {
    let mut structured = Map::new();
    structured.insert("outcome".to_owned(), told.outcome.into());
    structured.insert("retryable".to_owned(), told.retryable.into());
    for (name, value) in &told.members {
        if *name != "status_url" {
            structured.insert((*name).to_owned(), value.clone());
        }
    }
    structured
}

/// A layer answer (in progress, not executed, failed...) as the `CallToolResult` answering
/// the call `id`. Only "in progress" is not an error, the action being under way, and only
/// for a tool that `takes_unstructured` results: one that is not an error must match the
/// tool's output schema, which the layer's words cannot, and clients check it.
pub(crate) fn tool_result(id: &Value, told: &Words, takes_unstructured: bool) -> Value {
    let in_progress = told.outcome == "in_progress";
    let detail = if in_progress {
        let seconds = |name| told.get(name).and_then(Value::as_u64).unwrap_or(1);
        let (started, again) = (seconds("started_s_ago"), seconds("retry_after_s"));
        let first = if told.get("started_by_this_call") == Some(&Value::Bool(true)) {
            format!("This call started the action, which is still running ({started} s so far).")
        } else {
            format!("This action is already running (started {started} s ago) and was not started again.")
        };
        format!(
            "{first} Do not repeat it with new arguments: call this tool again with the same \
             arguments in {again} s to get its result."
        )
    } else {
        told.detail.clone()
    };
    let call_result = json!({
        "content": [{ "type": "text", "text": detail }],
        "structuredContent": structured(told),
        "isError": !(in_progress && takes_unstructured),
    });
    result(id, call_result)
}

/// `tasks/result` for a task still running when the query stopped waiting: a tool result in
/// task terms, not an error, since the action is under way.
pub(crate) fn task_still_running(id: &Value, intent: &IntentKey, started_s_ago: u64) -> Value {
    let retry_after_s = started_s_ago.div_ceil(2).clamp(1, 30);
    let text = format!(
        "This task is still running (started {started_s_ago} s ago) and was not started \
         again. Ask tasks/result for it again in {retry_after_s} s; do not call the tool again \
         with new arguments."
    );
    let call_result = json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": {
            "outcome": "in_progress",
            "retryable": true,
            "retry_after_s": retry_after_s,
            "started_s_ago": started_s_ago,
            "intent": intent.to_hex(),
        },
        "isError": false,
    });
    result(id, call_result)
}

/// The `_meta` member that marks a replayed tool result.
pub(crate) const REPLAY_META: &str = "tower-idempotency/replay";

/// Tells the model that a tool result is a replay: a leading text block, and `_meta`. Only a
/// result with content is touched; a kept JSON-RPC error is replayed as it was.
pub(crate) fn note_replay(message: &mut Value, ran_s_ago: u64, intent: &str) {
    let Some(Value::Object(result)) = message.get_mut("result") else {
        return;
    };
    let Some(Value::Array(content)) = result.get_mut("content") else {
        return;
    };
    let notice = format!(
        "This exact call already ran {ran_s_ago} s ago and was not run again; its result \
         follows."
    );
    content.insert(0, json!({ "type": "text", "text": notice }));
    let meta = result
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        let replay = json!({ "replayed": true, "ran_s_ago": ran_s_ago, "intent": intent });
        meta.insert(REPLAY_META.to_owned(), replay);
    }
}

/// A tool result (an error result) saying that the action may have run, in `text`.
pub(crate) fn may_have_run(id: &Value, text: String) -> Value {
    let told = Words::new("unknown", "Outcome unknown", "unknown", false, text);
    tool_result(id, &told, false)
}

/// The tool result for an answer the layer holds but cannot read back.
pub(crate) fn lost(id: &Value) -> Value {
    may_have_run(
        id,
        "This action may have run: its answer could not be read back, so whether it took \
         effect is not known. Check before calling again."
            .to_owned(),
    )
}

/// The JSON-RPC error answering a refused envelope (the id is null where there is none).
///
/// A body the layer cannot read is JSON-RPC's parse error, as the official SDKs answer it;
/// one that names a member twice is an invalid request: it is JSON, but not one request.
pub(crate) fn refused(refusal: &EnvelopeRefusal) -> Value {
    let worded;
    let (id, code, message) = match refusal {
        EnvelopeRefusal::Batch => (
            Value::Null,
            INVALID_REQUEST,
            "Nothing was executed: a batch may not hold a tools/call or a cancellation. Send \
             each message in its own request; doing so is safe.",
        ),
        EnvelopeRefusal::Unparsable { why } => {
            worded = format!(
                "Nothing was executed: the request is not JSON that can be read ({why}), so \
                 it was not passed on. Send it again as valid JSON; doing so is safe."
            );
            (Value::Null, PARSE_ERROR, worded.as_str())
        }
        EnvelopeRefusal::Ambiguous { id } => (
            id.clone().unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Nothing was executed: the message names a member twice, and JSON parsers differ \
             on which one counts, so it was not passed on. Send it again with each member \
             named once; doing so is safe.",
        ),
        EnvelopeRefusal::Notification => (
            Value::Null,
            INVALID_REQUEST,
            "Nothing was executed: a tools/call needs an id. Send it again with one; doing so \
             is safe.",
        ),
        EnvelopeRefusal::BadId => (
            Value::Null,
            INVALID_REQUEST,
            "Nothing was executed: a request id must be a string or a number. Send the call \
             again with one; doing so is safe.",
        ),
        EnvelopeRefusal::NoToolName { id } => (
            id.clone(),
            INVALID_PARAMS,
            "Nothing was executed: a tools/call needs params.name, the tool to call. Send it \
             again with the tool's name; doing so is safe.",
        ),
        EnvelopeRefusal::Unkeyable { id, why } => {
            worded = format!(
                "Nothing was executed: this call cannot be recognised when it is repeated \
                 ({why}). Send it again with each member named once."
            );
            (id.clone(), INVALID_PARAMS, worded.as_str())
        }
    };
    // The same message would be refused again: it must change first.
    let data = json!({ "outcome": "not_executed", "retryable": false });
    error(&id, code, message, Some(data))
}

/// The JSON-RPC error answering a request the layer will not answer for the server, as the
/// protocol words it; it goes out with HTTP 400.
pub(crate) fn unservable(id: &Value, why: &Unservable) -> Value {
    let (code, message, data) = match why {
        Unservable::Version(requested) => {
            let supported: Vec<&str> = era::STATELESS
                .iter()
                .rev()
                .chain(era::HANDSHAKE.iter().rev())
                .copied()
                .collect();
            (
                era::UNSUPPORTED_VERSION,
                format!(
                    "Unsupported protocol version {requested:?}: nothing was executed. Send the \
                     call again with one of the supported versions; doing so is safe."
                ),
                json!({ "supported": supported, "requested": requested }),
            )
        }
        Unservable::Mismatch(header) => mismatch(header),
        Unservable::Param(header) => mismatch(header),
        Unservable::MissingMeta(member) => (
            INVALID_PARAMS,
            format!(
                "Invalid params: params._meta needs {member:?} in protocol 2026-07-28. \
                 Nothing was executed; send the call again with it, which is safe."
            ),
            json!({ "outcome": "not_executed", "retryable": true }),
        ),
    };
    error(id, code, &message, Some(data))
}

/// The parts of the protocol's `HeaderMismatch` error for `header`.
fn mismatch(header: &str) -> (i64, String, Value) {
    (
        era::HEADER_MISMATCH,
        format!(
            "Header mismatch: the {header} header is missing or does not match the \
             request body. Nothing was executed; send the call again with matching \
             headers, which is safe."
        ),
        json!({ "outcome": "not_executed", "retryable": true }),
    )
}

/// The JSON-RPC message a stored answer holds, if it holds one.
pub(crate) fn stored_message(stored: &StoredResponse) -> Option<Value> {
    if !stored.status.is_success() {
        return None;
    }
    match serde_json::from_slice(&stored.body) {
        Ok(message @ Value::Object(_)) => Some(message),
        _ => None,
    }
}

/// A JSON-RPC message answering the request `id`.
pub(crate) fn with_id(mut message: Value, id: &Value) -> Value {
    if let Value::Object(message) = &mut message {
        message.insert("id".to_owned(), id.clone());
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_progress_is_a_result_that_is_not_an_error_where_the_tool_takes_one() {
        let key = IntentKey::from_bytes([0xab; 32]);
        let duplicate = crate::wording::Asker::Duplicate;
        let told =
            crate::wording::in_progress(&key, "/_idempotency/ab", 3, "the session", duplicate);
        let schema_unknown = tool_result(&json!(5), &told, false);
        assert_eq!(schema_unknown["result"]["isError"], true);
        let result = tool_result(&json!(5), &told, true);
        assert_eq!(result["id"], 5);
        assert_eq!(result["result"]["isError"], false);
        let text = result["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("This action is already running"), "{text}");
        assert!(text.contains("in 2 s") && !text.contains("GET"), "{text}");
        let structured = &result["result"]["structuredContent"];
        assert_eq!(structured["retry_after_s"], 2);
        assert_eq!(structured["intent"], key.to_hex());
        assert!(structured.get("status_url").is_none());
    }

    #[test]
    fn refusals_are_errors_without_the_problem_members() {
        let told = crate::wording::refusal(
            &crate::engine::Refusal::TooBusy,
            &crate::settings::Settings::default(),
            None,
        );
        let result = tool_result(&json!("x"), &told, true);
        assert_eq!(result["result"]["isError"], true);
        let structured = result["result"]["structuredContent"].as_object().unwrap();
        assert!(!structured.contains_key("type") && !structured.contains_key("status"));
        assert_eq!(structured["outcome"], "not_executed");
    }

    #[test]
    fn a_refused_envelope_keeps_its_id_when_it_has_one() {
        let error = refused(&EnvelopeRefusal::NoToolName { id: json!(4) });
        assert_eq!(error["id"], 4);
        assert_eq!(error["error"]["code"], INVALID_PARAMS);
        assert_eq!(refused(&EnvelopeRefusal::Batch)["id"], Value::Null);
    }
}
