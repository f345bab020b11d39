//! What a Streamable HTTP POST body holds, as far as the layer cares: a `tools/call` to
//! protect, a discovery request whose answer the layer reads, a task request it may answer, a
//! cancellation it keeps, a refusal, or anything else.

use serde_json::{Map, Value};

use super::era::RequestMeta;
use crate::key::IntentKey;

/// The JSON-RPC method of a tool call.
pub(crate) const TOOLS_CALL: &str = "tools/call";
/// The JSON-RPC method that lists the tools.
pub(crate) const TOOLS_LIST: &str = "tools/list";
/// The JSON-RPC method that opens a session and names the server's capabilities.
pub(crate) const INITIALIZE: &str = "initialize";
/// The JSON-RPC method that describes a stateless-era server.
pub(crate) const SERVER_DISCOVER: &str = "server/discover";
/// The JSON-RPC method that asks about a task.
pub(crate) const TASKS_GET: &str = "tasks/get";
/// The JSON-RPC method that asks for a task's result (2025-11-25).
pub(crate) const TASKS_RESULT: &str = "tasks/result";
/// The JSON-RPC method that answers a task's questions (the tasks extension).
pub(crate) const TASKS_UPDATE: &str = "tasks/update";
/// The JSON-RPC method that asks for a task to stop.
pub(crate) const TASKS_CANCEL: &str = "tasks/cancel";
/// The notification a client sends when it gives up on one of its requests.
pub(crate) const CANCELLED: &str = "notifications/cancelled";

/// One POST body, classified.
#[derive(Debug)]
pub(crate) enum Envelope {
    /// A well-formed `tools/call` request.
    ToolCall(ToolCall),
    /// An `initialize`, `server/discover` or `tools/list` request, whose answer describes the
    /// server and its tools: read on the way back, and completed where the layer adds to it.
    Discovery { id: Value, what: Discovery },
    /// A `tasks/get`, `tasks/result`, `tasks/update` or `tasks/cancel` request.
    TaskQuery(TaskQuery),
    /// A `tools/call` the layer will not run: answered at once, nothing executed.
    Refused(Refusal),
    /// `notifications/cancelled`: the client gave up on the request `request_id` (`None`
    /// when the notification names none).
    Cancellation { request_id: Option<Value> },
    /// Anything else (other methods, notifications, responses, bodies that are not JSON):
    /// passed through untouched. `id` is the id of a request, where it is one.
    Other { id: Option<Value> },
}

/// The parts of a `tools/call` request the layer answers with.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    /// The JSON-RPC id of this attempt: every answer carries it back.
    pub(crate) id: Value,
    /// `params.name`.
    pub(crate) name: String,
    /// Whether the caller asked for the call to run as a task (`params.task`, 2025-11-25).
    pub(crate) as_task: bool,
    /// What `params._meta` says of the request.
    pub(crate) meta: RequestMeta,
}

/// What a discovery request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discovery {
    Initialize,
    ServerDiscover,
    ToolsList,
}

/// A question about a task, or an instruction to it.
#[derive(Debug, Clone)]
pub(crate) struct TaskQuery {
    pub(crate) id: Value,
    pub(crate) asks: TaskAsk,
    pub(crate) task_id: String,
    /// The intent the task id names, where it names one: only then may it be the layer's.
    pub(crate) key: Option<IntentKey>,
    /// What `params._meta` says of the request.
    pub(crate) meta: RequestMeta,
}

/// What a task request asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskAsk {
    Get,
    /// `tasks/result` (2025-11-25): the result, waited for.
    Result,
    /// `tasks/update` (the tasks extension): answers to the task's questions.
    Update,
    Cancel,
}

impl TaskAsk {
    fn of(method: &str) -> Option<Self> {
        Some(match method {
            TASKS_GET => Self::Get,
            TASKS_RESULT => Self::Result,
            TASKS_UPDATE => Self::Update,
            TASKS_CANCEL => Self::Cancel,
            _ => return None,
        })
    }

    /// The method's name.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Self::Get => TASKS_GET,
            Self::Result => TASKS_RESULT,
            Self::Update => TASKS_UPDATE,
            Self::Cancel => TASKS_CANCEL,
        }
    }
}

/// Why a `tools/call` is refused.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refusal {
    /// A JSON-RPC batch holding a `tools/call` or a cancellation: Streamable HTTP carries one
    /// message per POST.
    Batch,
    /// A body that names a `tools/call` but is not JSON the layer can read.
    Unparsable,
    /// A `tools/call` without an id: a request sent as a notification.
    Notification,
    /// An id that is neither a string nor a number.
    BadId,
    /// No `params`, or no string `params.name`.
    NoToolName { id: Value },
    /// A message whose arguments cannot be told apart from its id and metadata: a member
    /// named twice, or nesting past the canonical parser's limit. The protected path finds
    /// it, as it computes the key; `why` says what it found.
    Unkeyable { id: Value, why: String },
}

/// Reads a POST body.
pub(crate) fn read(body: &[u8]) -> Envelope {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(message)) => read_message(message),
        Ok(Value::Array(batch)) if batch.iter().any(|m| is_tool_call(m) || is_cancellation(m)) => {
            Envelope::Refused(Refusal::Batch)
        }
        // Not JSON the layer can read, but it names a tool call: passed on, it could run
        // unprotected.
        Err(_) if memchr::memmem::find(body, TOOLS_CALL.as_bytes()).is_some() => {
            Envelope::Refused(Refusal::Unparsable)
        }
        _ => Envelope::Other { id: None },
    }
}

fn is_tool_call(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some(TOOLS_CALL)
}

fn is_cancellation(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some(CANCELLED)
}

fn read_message(mut message: Map<String, Value>) -> Envelope {
    let method = match message.get("method").and_then(Value::as_str) {
        Some(method) => method.to_owned(),
        None => return Envelope::Other { id: None },
    };
    let method = method.as_str();
    // A cancellation is absorbed however it is sent, an id or not.
    if method == CANCELLED {
        let request_id = message
            .get("params")
            .and_then(|params| params.get("requestId"))
            .filter(|id| id.is_string() || id.is_number())
            .cloned();
        return Envelope::Cancellation { request_id };
    }
    let discovery = match method {
        TOOLS_LIST => Some(Discovery::ToolsList),
        INITIALIZE => Some(Discovery::Initialize),
        SERVER_DISCOVER => Some(Discovery::ServerDiscover),
        _ => None,
    };
    let query = TaskAsk::of(method);
    if method != TOOLS_CALL && discovery.is_none() && query.is_none() {
        let id = message
            .remove("id")
            .filter(|id| id.is_string() || id.is_number());
        return Envelope::Other { id };
    }
    let id = match message.remove("id") {
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        // Only a tool call is the layer's to refuse; the server answers the rest.
        None if method == TOOLS_CALL => return Envelope::Refused(Refusal::Notification),
        Some(_) if method == TOOLS_CALL => return Envelope::Refused(Refusal::BadId),
        _ => return Envelope::Other { id: None },
    };
    if let Some(what) = discovery {
        return Envelope::Discovery { id, what };
    }
    let params = message.get("params");
    let meta = RequestMeta::of(params);
    if let Some(asks) = query {
        let task_id = params.and_then(|p| p.get("taskId")).and_then(Value::as_str);
        return match task_id {
            Some(task_id) => Envelope::TaskQuery(TaskQuery {
                id,
                asks,
                task_id: task_id.to_owned(),
                key: task_id.parse().ok(),
                meta,
            }),
            None => Envelope::Other { id: Some(id) },
        };
    }
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    match name {
        Some(name) => Envelope::ToolCall(ToolCall {
            name: name.to_owned(),
            as_task: params
                .and_then(|p| p.get("task"))
                .is_some_and(Value::is_object),
            id,
            meta,
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
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            "not json",
            "",
        ] {
            assert!(matches!(read_str(body), Envelope::Other { .. }), "{body}");
        }
    }

    #[test]
    fn other_requests_carry_their_id_and_notifications_none() {
        let Envelope::Other { id } = read_str(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        else {
            panic!("not passed through")
        };
        assert_eq!(id, Some(Value::from("p")));
        let body = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(read_str(body), Envelope::Other { id: None }));
    }

    #[test]
    fn a_cancellation_in_a_batch_or_with_an_id_never_slips_past() {
        let batch =
            r#"[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]"#;
        assert!(matches!(read_str(batch), Envelope::Refused(Refusal::Batch)));
        let with_id = r#"{"jsonrpc":"2.0","id":5,"method":"notifications/cancelled","params":{"requestId":1}}"#;
        assert!(matches!(read_str(with_id), Envelope::Cancellation { .. }));
    }

    #[test]
    fn a_tool_call_the_layer_cannot_read_is_refused_not_passed_on() {
        let broken = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"n":NaN}}}"#;
        assert!(matches!(
            read_str(broken),
            Envelope::Refused(Refusal::Unparsable)
        ));
        let lone = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"s":"\ud800"}}}"#;
        assert!(matches!(
            read_str(lone),
            Envelope::Refused(Refusal::Unparsable) | Envelope::ToolCall(_)
        ));
    }

    #[test]
    fn a_cancellation_names_the_request_it_cancels() {
        let body = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"timeout"}}"#;
        let Envelope::Cancellation { request_id } = read_str(body) else {
            panic!("not a cancellation")
        };
        assert_eq!(request_id, Some(Value::from(7)));
        let body = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#;
        assert!(matches!(
            read_str(body),
            Envelope::Cancellation { request_id: None }
        ));
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
    fn discovery_requests_and_task_queries_are_recognised() {
        let body = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;
        assert!(matches!(
            read_str(body),
            Envelope::Discovery { id, what: Discovery::ToolsList } if id == 9
        ));
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(matches!(
            read_str(body),
            Envelope::Discovery {
                what: Discovery::Initialize,
                ..
            }
        ));
        let body = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t"}}"#;
        let Envelope::TaskQuery(query) = read_str(body) else {
            panic!("not a task query")
        };
        assert!(query.asks == TaskAsk::Result && query.task_id == "t" && query.id == 2);
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tasks/cancel","params":{"taskId":"t"}}"#;
        let Envelope::TaskQuery(query) = read_str(body) else {
            panic!("not a task request")
        };
        assert_eq!(query.asks, TaskAsk::Cancel);
    }
}
