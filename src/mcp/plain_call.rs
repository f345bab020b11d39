//! What the server is sent of a protected call, where it is not the call as it came: the
//! layer's own tasks are the layer's, so the server runs the plain call.

/// Members of a JSON object whose values keep their exact text.
type RawMembers = std::collections::BTreeMap<String, Box<serde_json::value::RawValue>>;

/// The body of a tool call asked to run as a task, without `params.task`: the layer runs
/// it as a task, and the server runs it as a plain call. Every other member keeps its exact
/// text (a number no f64 holds, `1.10`), so the plain call of the same arguments is the same
/// intent and the server reads what the client sent.
pub(crate) fn without_task(body: &[u8]) -> Option<Vec<u8>> {
    without(body, &["params", "task"])
}

/// The body of a stateless-era tool call whose client capabilities name the tasks
/// extension, without it: only the layer answers a protected call with a task, so the
/// server must not make one of its own, which the layer could neither keep nor replay.
pub(crate) fn without_tasks_extension(body: &[u8]) -> Option<Vec<u8>> {
    let path = [
        "params",
        "_meta",
        super::era::META_CAPABILITIES,
        "extensions",
        super::era::TASKS_EXTENSION,
    ];
    without(body, &path)
}

/// `body` without the member at `path`; `None` where there is none. Values keep their exact
/// text; the members of the objects along the path are written in name order.
fn without(body: &[u8], path: &[&str]) -> Option<Vec<u8>> {
    let body = serde_json::from_slice::<&serde_json::value::RawValue>(body).ok()?;
    let edited = remove_at(body, path)?;
    Some(edited.get().as_bytes().to_vec())
}

fn remove_at(
    raw: &serde_json::value::RawValue,
    path: &[&str],
) -> Option<Box<serde_json::value::RawValue>> {
    let mut members: RawMembers = serde_json::from_str(raw.get()).ok()?;
    match path {
        [] => return None,
        [last] => {
            members.remove(*last)?;
        }
        [first, rest @ ..] => {
            let edited = remove_at(members.get(*first)?, rest)?;
            members.insert((*first).to_owned(), edited);
        }
    }
    serde_json::value::to_raw_value(&members).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::envelope::{read, Envelope};
    use serde_json::Value;

    #[test]
    fn a_call_asked_to_run_as_a_task_says_so_and_loses_the_request_on_the_way_in() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"task":{"ttl":60000}}}"#;
        let Envelope::ToolCall(call) = read(body.as_bytes()) else {
            panic!("not a tool call")
        };
        assert!(call.as_task);
        let plain: Value = serde_json::from_slice(&without_task(body.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            plain["params"],
            serde_json::json!({"name":"x","arguments":{}})
        );
    }

    #[test]
    fn the_tasks_extension_is_left_out_of_what_the_server_reads_and_nothing_else() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":1.10},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{},"other":{}}}}}}"#;
        let plain = String::from_utf8(without_tasks_extension(body.as_bytes()).unwrap()).unwrap();
        assert!(!plain.contains("io.modelcontextprotocol/tasks"), "{plain}");
        assert!(plain.contains(r#""extensions":{"other":{}}"#), "{plain}");
        assert!(plain.contains(r#""n":1.10"#), "{plain}");
        let without_it = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(without_tasks_extension(without_it.as_bytes()), None);
    }

    #[test]
    fn leaving_the_task_out_keeps_every_other_member_as_it_was_written() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":123456789012345678901234567890,"r":1.10,"e":1E2},"task":{}}}"#;
        let plain = String::from_utf8(without_task(body.as_bytes()).unwrap()).unwrap();
        assert!(
            plain.contains(r#""arguments":{"n":123456789012345678901234567890,"r":1.10,"e":1E2}"#),
            "{plain}"
        );
        assert!(!plain.contains("task"), "{plain}");
    }
}
