//! What a Streamable HTTP POST body holds, as far as the layer cares: a `tools/call` to
//! protect, a discovery request whose answer the layer reads, a task request it may answer, a
//! cancellation it keeps, a refusal, or anything else.

use serde_json::{Map, Value};

use super::era::RequestMeta;
use crate::canonical::{self, CanonicalError};
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
    /// A message the layer will not pass on or run: answered at once, nothing executed.
    Refused(EnvelopeRefusal),
    /// `notifications/cancelled`: the client gave up on the request `request_id` (`None`
    /// when the notification names none).
    Cancellation { request_id: Option<Value> },
    /// Anything else (other methods, notifications, responses): passed through untouched.
    /// `id` is the id of a request, where it is one.
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
pub(crate) enum EnvelopeRefusal {
    /// A JSON-RPC batch holding a `tools/call` or a cancellation: Streamable HTTP carries one
    /// message per POST.
    Batch,
    /// A body that is not one JSON document the layer can read (not JSON, invalid UTF-8, a
    /// lone surrogate escape, nesting past the parser's limit...): whatever method it names,
    /// a more lenient parser in the server might read a `tools/call` in it. `why` says what.
    Unparsable { why: String },
    /// A message that names a member twice: parsers disagree on which one counts, so the
    /// server might read another method, id or tool than the layer. `id` is the request's id
    /// as serde_json reads it (the last one named), where it reads one, to answer with.
    Ambiguous { id: Option<Value> },
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

/// Reads a POST body: as one JSON document that names each member once, or not at all.
///
/// The crate's strict parser reads it first, since serde_json alone takes the last of two
/// members named alike, as some servers' parsers do and others do not. No byte search stands
/// in for it: a method can be spelt with escapes (`tools\/call`).
pub(crate) fn read(body: &[u8]) -> Envelope {
    if let Err(why) = canonical::parse(body) {
        return Envelope::Refused(unreadable(body, why));
    }
    let message = match serde_json::from_slice::<Value>(body) {
        Ok(message) => message,
        // Strict JSON that serde_json cannot hold (an integer past a double's range).
        Err(_) => {
            let why = CanonicalError::NumberOutOfRange.to_string();
            return Envelope::Refused(EnvelopeRefusal::Unparsable { why });
        }
    };
    match message {
        Value::Object(message) => read_message(message),
        Value::Array(batch) if batch.iter().any(|m| is_tool_call(m) || is_cancellation(m)) => {
            Envelope::Refused(EnvelopeRefusal::Batch)
        }
        _ => Envelope::Other { id: None },
    }
}

/// Why a body the strict parser refused is refused: ambiguous where it names a member twice,
/// else unparsable.
fn unreadable(body: &[u8], why: CanonicalError) -> EnvelopeRefusal {
    if why != CanonicalError::DuplicateMember {
        let why = why.to_string();
        return EnvelopeRefusal::Unparsable { why };
    }
    let id = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut message)) => message
            .remove("id")
            .filter(|id| id.is_string() || id.is_number()),
        _ => None,
    };
    EnvelopeRefusal::Ambiguous { id }
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
        None if method == TOOLS_CALL => return Envelope::Refused(EnvelopeRefusal::Notification),
        Some(_) if method == TOOLS_CALL => return Envelope::Refused(EnvelopeRefusal::BadId),
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
        None => Envelope::Refused(EnvelopeRefusal::NoToolName { id }),
    }
}

#[cfg(test)]
mod tests;
