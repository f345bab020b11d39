//! What a server's JSON-RPC answer to a protected call says of the call: the tool's answer to
//! keep, a refusal or failure to release so that a retry runs, or no answer yet (the call goes
//! on at the server, so that a repeat must not run it again).

use serde_json::Value;

/// What a JSON-RPC answer says of the call it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statement {
    /// The tool's answer, to keep.
    Kept,
    /// Not the tool's answer to its arguments: released, so that a retry runs.
    Released,
    /// The server's answer to a call it cancelled: released, so that a retry runs, though
    /// the tool may have run part of the way.
    Cancelled,
    /// The server asks for more input before it completes the call (`input_required`):
    /// released, so that the call, sent again with the input, runs.
    AsksForInput,
    /// Neither a final answer nor a refusal (a task the server made of the call): the call
    /// is running or ran at the server, so a repeat must not run it again.
    MayHaveRun,
}

/// Whether a JSON-RPC answer is kept for replay. A result is, `isError: true` included: it
/// is the tool's own answer, where it says it is complete (`resultType` absent or
/// `complete`); a server that asks for input first (`input_required`) has not run the tool
/// yet, and any other kind (a task) says the call goes on. The deterministic refusals (an
/// invalid request, an unknown method, invalid params) are kept too, and so is every code
/// outside JSON-RPC's reserved range, which servers define for their own refusals. The
/// other reserved codes (internal error, parse error, the -32000 to -32099 server errors)
/// release the key for a retry, and so does a server's answer to a call it cancelled: it
/// says nothing of what the tool would answer.
pub(crate) fn said(answer: &Value) -> Statement {
    let Some(error) = answer.get("error") else {
        let kind = answer.pointer("/result/resultType").and_then(Value::as_str);
        // A task the server made of the call (2025-11-25: `{task}`, no content) is no answer.
        let task_of_2025 = answer.pointer("/result/task").is_some_and(Value::is_object)
            && answer.pointer("/result/content").is_none();
        return match kind {
            None | Some("complete") if !task_of_2025 => Statement::Kept,
            Some("input_required") => Statement::AsksForInput,
            _ => Statement::MayHaveRun,
        };
    };
    if is_cancelled(error) {
        Statement::Cancelled
    } else if keeps_error(error) {
        Statement::Kept
    } else {
        Statement::Released
    }
}

#[cfg(test)]
fn keeps(answer: &Value) -> bool {
    said(answer) == Statement::Kept
}

fn keeps_error(error: &Value) -> bool {
    let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
    (-32602..=-32600).contains(&code) || !(-32768..=-32000).contains(&code)
}

/// Whether a JSON-RPC error is a server's answer to a cancelled call. Servers built on some
/// SDKs answer one with "Request cancelled" and a code outside the reserved range (0).
fn is_cancelled(error: &Value) -> bool {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let message = message.trim().trim_end_matches('.').to_ascii_lowercase();
    matches!(message.as_str(), "request cancelled" | "request canceled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_complete_result_is_kept_one_asking_for_input_released_and_a_task_may_have_run() {
        let complete = json!({"id":1,"result":{"resultType":"complete","content":[]}});
        assert_eq!(said(&complete), Statement::Kept);
        let input = json!({"id":1,"result":{"resultType":"input_required","requestState":"s"}});
        assert_eq!(said(&input), Statement::AsksForInput);
        let cancelled = json!({"id":1,"error":{"code":-32800,"message":"Request cancelled"}});
        assert_eq!(
            said(&cancelled),
            Statement::Cancelled,
            "released, and told as may have run"
        );
        let task = json!({"id":1,"result":{"resultType":"task","taskId":"t","status":"working"}});
        assert_eq!(said(&task), Statement::MayHaveRun);
        let task_of_2025 = json!({"id":1,"result":{"task":{"taskId":"t","status":"working"}}});
        assert_eq!(said(&task_of_2025), Statement::MayHaveRun);
    }

    #[test]
    fn results_and_deterministic_refusals_are_kept_internal_errors_released() {
        let kept = [
            json!({"id":1,"result":{"content":[],"isError":true}}),
            json!({"id":1,"error":{"code":-32602,"message":"unknown tool"}}),
            json!({"id":1,"error":{"code":-32601,"message":"no such method"}}),
            json!({"id":1,"error":{"code":4001,"message":"card declined"}}),
        ];
        for answer in kept {
            assert!(keeps(&answer), "{answer}");
        }
        let refusal = json!({"id":1,"error":{"code":0,"message":"account closed"}});
        assert!(keeps(&refusal), "code 0 alone is a server's own refusal");
        let released = [
            json!({"id":1,"error":{"code":-32603,"message":"internal"}}),
            json!({"id":1,"error":{"code":-32000,"message":"server error"}}),
            json!({"id":1,"error":{"code":-32700,"message":"parse error"}}),
            json!({"id":1,"error":{"message":"no code"}}),
            json!({"id":1,"error":{"code":0,"message":"Request cancelled"}}),
            json!({"id":1,"error":{"code":4002,"message":"Request canceled."}}),
        ];
        for answer in released {
            assert!(!keeps(&answer), "{answer}");
        }
    }
}
